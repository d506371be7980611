"""The Textual app: global keys (help, quit, next open server), the screen stack, and every open server.

Opened servers are installed screens: leaving one (Esc) keeps its connection, so several servers stay open at
once; closing one (Ctrl+W) or quitting closes its episode and its connection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.reactive import reactive

from mcpworld.registry.connect import registry_url
from mcpworld.tui.screens.help import HelpScreen
from mcpworld.tui.screens.server import ServerScreen
from mcpworld.tui.screens.servers import ServersScreen
from mcpworld.tui.screens.trajectories import TrajectoriesScreen

STYLES = ["app", "servers", "server", "trajectories", "rollouts", "help"]


class MCPWorldApp(App[None]):
    """Servers is the home screen; everything else is pushed on top of it and popped with Esc."""

    TITLE = "mcpworld"
    ENABLE_COMMAND_PALETTE = False
    CSS_PATH = [f"styles/{name}.tcss" for name in STYLES]
    BINDINGS = [
        Binding("f1", "help", "Help"),
        Binding("question_mark", "help", "Help", show=False),
        Binding("f2", "next_server", "Next server", show=False),  # in the list's info line and on F1
        Binding("ctrl+q", "quit", "Quit", priority=True, show=False),
    ]

    open_servers: reactive[tuple[str, ...]] = reactive(())
    """Names of the servers with a live screen (and connection), in the order they were opened."""
    last_server: str | None = None
    """The server shown last: F2 away from a server screen goes back to it."""
    left_server: str | None = None
    """The server whose screen was left last, until the list has put its cursor on its row."""

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

    # -- open servers ------------------------------------------------------------------------------------

    @staticmethod
    def screen_name(server: str) -> str:
        return f"server:{server}"

    def server_screen(self, server: str) -> ServerScreen | None:
        name = self.screen_name(server)
        screen = self.get_screen(name) if self.is_screen_installed(name) else None
        return screen if isinstance(screen, ServerScreen) else None

    def open_server(self, server: str, target: str | dict[str, Any], title: str | None = None) -> None:
        """Show the server's screen, opening its connection the first time; an open one is shown as it was."""
        screen = self.server_screen(server)
        if screen is None:
            screen = ServerScreen(target, self.registry, title, server_key=server)
            self.install_screen(screen, self.screen_name(server))
            self.open_servers = (*self.open_servers, server)
        self.last_server = server
        while isinstance(self.screen, ServerScreen) and self.screen is not screen:
            self.pop_screen()  # one server screen on the stack at a time: switching, not stacking
        if self.screen is not screen:
            self.push_screen(self.screen_name(server))

    async def close_server(self, server: str) -> None:
        """Close the episode and the connection, and forget the screen."""
        screen = self.server_screen(server)
        if screen is None:
            return
        await screen.session.aclose(3.0)
        if self.screen is screen:
            await self.pop_screen()
        self.uninstall_screen(self.screen_name(server))
        await screen.remove()
        self.open_servers = tuple(s for s in self.open_servers if s != server)

    def action_next_server(self) -> None:
        if not self.open_servers:
            self.notify("No server is open: pick one in the list and press Enter.", severity="warning")
            return
        order = list(self.open_servers)
        if isinstance(self.screen, ServerScreen) and self.screen.server_key in order:
            server = order[(order.index(self.screen.server_key) + 1) % len(order)]
        else:  # from another screen: back to the server shown last, not to the first one opened
            server = self.last_server if self.last_server in order else order[0]
        screen = self.server_screen(server)
        if screen is not None:
            self.open_server(server, screen.session.target)

    # -- global keys -------------------------------------------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        """Close every open connection from its own task before exiting."""
        screens = [self.server_screen(server) for server in self.open_servers]
        screens += [s for s in self.screen_stack if isinstance(s, ServerScreen) and s not in screens]
        for screen in screens:
            if screen is not None:
                await screen.session.aclose(2.0)
        self.exit()
