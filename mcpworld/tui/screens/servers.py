"""The home screen: every server in the registry, filterable, with kind, health, tags and counts."""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from mcpworld.tui.errors import ReportsWorkerErrors, error_text
from mcpworld.tui.registry import ServerEntry, fetch_servers

HEALTH_STYLE = {"up": "green", "down": "red"}


class ServersScreen(ReportsWorkerErrors, Screen):
    """Search box, servers table, one line about the highlighted server."""

    DEFAULT_CSS = """
    ServersScreen #search { margin: 0 0 1 0; }
    ServersScreen #servers { height: 1fr; }
    ServersScreen #server-info { height: 3; padding: 0 1; color: $text-muted; }
    ServersScreen #servers-error { display: none; color: $error; padding: 0 1; height: auto; }
    """

    BINDINGS = [
        Binding("slash", "focus_search", "Search"),
        Binding("r,f5", "refresh", "Refresh"),
        Binding("t", "trajectories", "Trajectories"),
        Binding("n", "rollouts", "New rollout"),
        Binding("q", "app.quit", "Quit"),
        Binding("down", "focus_table", "Table", show=False),
        Binding("escape", "focus_table", "Table", show=False),
    ]

    def __init__(self, registry: str):
        super().__init__()
        self.registry = registry
        self.entries: list[ServerEntry] = []
        self.shown: list[ServerEntry] = []
        self.loaded = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="filter (/): words, or kind:world health:down tag:travel", id="search",
                    compact=True)
        yield Static("", id="servers-error", markup=False)
        yield DataTable(id="servers", cursor_type="row", zebra_stripes=True)
        yield Static("Loading servers…", id="server-info", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.title = "mcpworld"
        self.sub_title = f"registry {self.registry}"
        table = self.query_one("#servers", DataTable)
        table.add_columns("server", "kind", "health", "tools", "tasks", "tags")
        table.focus()
        self.action_refresh()

    # -- data --------------------------------------------------------------------------------------------

    def action_refresh(self) -> None:
        self.query_one("#server-info", Static).update("Loading servers…")
        self.fetch()

    @work(thread=True, group="fetch", exclusive=True, exit_on_error=False)
    def fetch(self) -> None:
        """Thread worker: the registry is read with sync httpx, off the event loop."""
        try:
            entries = fetch_servers(self.registry)
        except Exception as exc:
            self.app.call_from_thread(self._failed, error_text(exc))
            return
        self.app.call_from_thread(self._loaded, entries)

    def _failed(self, message: str) -> None:
        error = self.query_one("#servers-error", Static)
        error.update(message + "   (press r to retry)")
        error.display = True
        self.query_one("#server-info", Static).update("")
        self.notify(message, title="Registry", severity="error", timeout=10)

    def _loaded(self, entries: list[ServerEntry]) -> None:
        self.query_one("#servers-error", Static).display = False
        self.entries = entries
        self.loaded = True
        self.apply_filter()

    def apply_filter(self) -> None:
        query = self.query_one("#search", Input).value
        table = self.query_one("#servers", DataTable)
        table.clear()
        self.shown = [e for e in self.entries if e.matches(query)]
        for e in self.shown:
            table.add_row(e.short_name if e.name.startswith("io.mcpworld/") else e.name, e.kind,
                          Text(e.health, HEALTH_STYLE.get(e.health, "yellow")),
                          "" if e.tools is None else str(e.tools), "" if e.tasks is None else str(e.tasks),
                          ", ".join(e.tags), key=e.name)
        self._describe(self.shown[0] if self.shown else None)

    def _describe(self, entry: ServerEntry | None) -> None:
        info = self.query_one("#server-info", Static)
        if entry is None:
            query = self.query_one("#search", Input).value
            info.update(f"No server matches {query!r}." if self.entries else "The registry has no servers.")
            return
        text = Text()
        text.append(f"{entry.name} {entry.version}", "bold")
        if entry.title:
            text.append(f"  {entry.title}")
        text.append(f"\n{entry.description}")
        if entry.health == "down" and entry.health_error:
            text.append(f"\ndown: {entry.health_error}", "red")
        else:
            text.append(f"\n{len(self.shown)} of {len(self.entries)} servers · Enter opens", "dim")
        info.update(text)

    # -- events ------------------------------------------------------------------------------------------

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "search":
            self.apply_filter()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            self.query_one("#servers", DataTable).focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if 0 <= event.cursor_row < len(self.shown):
            self._describe(self.shown[event.cursor_row])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        entry = next((e for e in self.shown if e.name == event.row_key.value), None)
        if entry is not None:
            self.open(entry)

    def open(self, entry: ServerEntry) -> None:
        from mcpworld.tui.screens.server import ServerScreen

        self.app.push_screen(ServerScreen(entry.record, self.registry, entry.title or entry.name))

    # -- actions -----------------------------------------------------------------------------------------

    def action_focus_table(self) -> None:
        self.query_one("#servers", DataTable).focus()

    def action_focus_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_trajectories(self) -> None:
        from mcpworld.tui.screens.trajectories import TrajectoriesScreen

        self.app.push_screen(TrajectoriesScreen())

    def action_rollouts(self) -> None:
        from mcpworld.tui.screens.rollouts import RolloutsScreen

        worlds = [e for e in self.entries if e.kind == "world"]
        self.app.push_screen(RolloutsScreen(self.registry, worlds, getattr(self.app, "workdir", None)))
