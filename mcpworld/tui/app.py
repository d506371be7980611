"""The Textual app: global keys (help, quit), the screen stack, and a clean close of live connections."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.binding import Binding

from mcpworld.registry.connect import registry_url
from mcpworld.tui.screens.help import HelpScreen
from mcpworld.tui.screens.server import ServerScreen
from mcpworld.tui.screens.servers import ServersScreen
from mcpworld.tui.screens.trajectories import TrajectoriesScreen


class MCPWorldApp(App[None]):
    """Servers is the home screen; everything else is pushed on top of it and popped with Esc."""

    TITLE = "mcpworld"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    DataTable { scrollbar-size-vertical: 1; }
    """
    BINDINGS = [
        Binding("f1", "help", "Help"),
        Binding("question_mark", "help", "Help", show=False),
        Binding("ctrl+q", "quit", "Quit", priority=True, show=False),
    ]

    def __init__(self, registry: str | None = None, open_file: str | Path | None = None,
                 workdir: str | Path | None = None):
        super().__init__()
        self.registry = (registry or registry_url()).rstrip("/")
        self.open_file = Path(open_file) if open_file else None
        self.workdir = Path(workdir) if workdir else Path.cwd()

    def on_mount(self) -> None:
        self.push_screen(ServersScreen(self.registry))
        if self.open_file is not None:
            self.push_screen(TrajectoriesScreen(self.open_file))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        """Close every open connection from its own task before exiting."""
        for screen in self.screen_stack:
            if isinstance(screen, ServerScreen):
                await screen.session.aclose(2.0)
        self.exit()
