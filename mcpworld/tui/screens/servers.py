"""The home screen: every server in the registry and every saved one, filterable, with kind, health and counts.

State is reactive: `entries` (what was read) and `query` (the filter) make `shown`, and watchers draw it.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Header, Input, Label, Static

from mcpworld.tui.errors import ReportsWorkerErrors, error_text
from mcpworld.tui.registry import ServerEntry, fetch_servers
from mcpworld.tui.store import SavedServer, StoreError, add_saved, check_server, load_saved, remove_saved

HEALTH_STYLE = {"up": "green", "down": "red"}
OPEN_MARK = "● "


def saved_entry(saved: SavedServer) -> ServerEntry:
    """A saved server as a row: its facts are unknown until it is opened."""
    return ServerEntry(name=saved.name, title="", description=f"saved server at {saved.url}", version="",
                       kind="saved", health="?", health_error=None, latency_ms=None, tags=[], tools=None,
                       tasks=None, status="active", record=saved.record())


def row_name(entry: ServerEntry) -> str:
    return entry.short_name if entry.name.startswith("io.mcpworld/") else entry.name


class ServersScreen(ReportsWorkerErrors, Screen):
    """Search box, servers table, a few lines about the highlighted server."""

    BINDINGS = [
        Binding("slash", "focus_search", "Search"),
        Binding("r,f5", "refresh", "Refresh"),
        Binding("a", "add_server", "Add"),
        Binding("x,delete", "remove_server", "Delete saved", show=False),
        Binding("t", "trajectories", "Trajectories"),
        Binding("n", "rollouts", "Rollout"),
        Binding("q", "app.quit", "Quit"),
        Binding("down", "focus_table", "Table", show=False),
        Binding("escape", "focus_table", "Table", show=False),
    ]

    entries: reactive[list[ServerEntry]] = reactive(list, init=False, always_update=True)
    filter_text: reactive[str] = reactive("", init=False)
    shown: reactive[list[ServerEntry]] = reactive(list, init=False, always_update=True)
    error: reactive[str] = reactive("", init=False)
    loaded: reactive[bool] = reactive(False, init=False)

    def __init__(self, registry: str):
        super().__init__()
        self.registry = registry

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
        self.watch(self.app, "open_servers", lambda _: self._draw(), init=False)
        self.action_refresh()

    def on_screen_resume(self) -> None:
        """Back from a server: the cursor is on that server's row, so Enter (like F2) opens it again."""
        left, self.app.left_server = getattr(self.app, "left_server", None), None  # type: ignore[attr-defined]
        row = next((i for i, e in enumerate(self.shown) if e.name == left), None)
        if row is not None:
            self.query_one("#servers", DataTable).move_cursor(row=row)

    # -- data --------------------------------------------------------------------------------------------

    def action_refresh(self) -> None:
        self.query_one("#server-info", Static).update("Loading servers…")
        self.fetch()

    @work(thread=True, group="fetch", exclusive=True, exit_on_error=False)
    def fetch(self) -> None:
        """Thread worker: the registry (sync httpx) and the saved servers file are read off the event loop."""
        problems: list[str] = []
        try:
            entries = fetch_servers(self.registry)
        except Exception as exc:
            entries = []
            problems.append(error_text(exc) + "   (press r to retry)")
        try:
            entries += [saved_entry(s) for s in load_saved()]
        except StoreError as exc:
            problems.append(str(exc))
        self.app.call_from_thread(self._loaded, entries, "\n".join(problems))

    def _loaded(self, entries: list[ServerEntry], problems: str) -> None:
        self.error = problems
        self.entries = entries
        self.loaded = True

    def watch_error(self, error: str) -> None:
        panel = self.query_one("#servers-error", Static)
        panel.update(error)
        panel.display = bool(error)
        if error:
            self.notify(error, title="Servers", severity="error", timeout=10)

    def watch_entries(self) -> None:
        self.shown = [e for e in self.entries if e.matches(self.filter_text)]

    def watch_filter_text(self) -> None:
        self.watch_entries()

    def watch_shown(self) -> None:
        self._draw()

    def _draw(self) -> None:
        """The table from `shown`, marking open servers; the cursor stays on its row when it can."""
        table = self.query_one("#servers", DataTable)
        row = table.cursor_row
        table.clear()
        open_servers = set(getattr(self.app, "open_servers", ()))
        for e in self.shown:
            mark = OPEN_MARK if e.name in open_servers else ""
            table.add_row(mark + row_name(e), e.kind, Text(e.health, HEALTH_STYLE.get(e.health, "yellow")),
                          "" if e.tools is None else str(e.tools), "" if e.tasks is None else str(e.tasks),
                          ", ".join(e.tags), key=e.name)
        if 0 < row < len(self.shown):
            table.move_cursor(row=row)
        self._describe(self.highlighted() or (self.shown[0] if self.shown else None))

    def _describe(self, entry: ServerEntry | None) -> None:
        info = self.query_one("#server-info", Static)
        if entry is None:
            info.update(f"No server matches {self.filter_text!r}." if self.entries
                        else "No servers: press a to add one.")
            return
        text = Text()
        text.append(f"{entry.name} {entry.version}".rstrip(), "bold")
        if entry.title:
            text.append(f"  {entry.title}")
        text.append(f"\n{entry.description}")
        if entry.health == "down" and entry.health_error:
            text.append(f"\ndown: {entry.health_error}", "red")
        else:
            opened = len(getattr(self.app, "open_servers", ()))
            text.append(f"\n{len(self.shown)} of {len(self.entries)} servers · {opened} open (F2) · Enter opens",
                        "dim")
        info.update(text)

    def highlighted(self) -> ServerEntry | None:
        row = self.query_one("#servers", DataTable).cursor_row
        return self.shown[row] if 0 <= row < len(self.shown) else None

    # -- events ------------------------------------------------------------------------------------------

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "search":
            self.filter_text = event.value

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            self.query_one("#servers", DataTable).focus()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if 0 <= event.cursor_row < len(self.shown):
            self._describe(self.shown[event.cursor_row])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        entry = next((e for e in self.shown if e.name == event.row_key.value), None)
        if entry is not None:
            self.app.open_server(entry.name, entry.record, entry.title or entry.name)  # type: ignore[attr-defined]

    # -- actions -----------------------------------------------------------------------------------------

    def action_focus_table(self) -> None:
        self.query_one("#servers", DataTable).focus()

    def action_focus_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_add_server(self) -> None:
        self.app.push_screen(AddServerScreen(), lambda added: self.action_refresh() if added else None)

    def action_remove_server(self) -> None:
        entry = self.highlighted()
        if entry is None or entry.kind != "saved":
            self.notify("Only saved servers can be deleted: highlight one (kind 'saved').", severity="warning")
            return
        self.delete_saved(entry.name)

    @work(thread=True, group="saved", exit_on_error=False)
    def delete_saved(self, name: str) -> None:
        """Thread worker: the saved servers file is rewritten off the event loop."""
        remove_saved(name)
        self.app.call_from_thread(self.notify, f"Deleted the saved server {name}.")
        self.app.call_from_thread(self.action_refresh)

    def action_trajectories(self) -> None:
        from mcpworld.tui.screens.trajectories import TrajectoriesScreen

        self.app.push_screen(TrajectoriesScreen())

    def action_rollouts(self) -> None:
        from mcpworld.tui.screens.rollouts import RolloutsScreen

        worlds = [e for e in self.entries if e.kind == "world"]
        self.app.push_screen(RolloutsScreen(self.registry, worlds))  # written under $MCPWORLD_HOME/runs


class AddServerScreen(ModalScreen[bool]):
    """Name and MCP URL of a server to keep in the list; a bad one is explained and nothing is saved."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Save a server (kept in the mcpworld data directory)", markup=False)
            with Horizontal(classes="row"):
                yield Label("name")
                yield Input(id="add-name", placeholder="what the list shows", compact=True)
            with Horizontal(classes="row"):
                yield Label("url")
                yield Input(id="add-url", placeholder="http://127.0.0.1:8000/mcp", compact=True)
            yield Static("", id="add-error", markup=False)
            with Horizontal(id="add-buttons"):
                yield Button("Save", id="add-save", variant="primary", compact=True)
                yield Button("Cancel", id="add-cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#add-name", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "add-name":
            self.query_one("#add-url", Input).focus()
        else:
            self.action_save()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "add-save":
            self.action_save()
        else:
            self.action_cancel()

    def action_save(self) -> None:
        name, url = self.query_one("#add-name", Input).value, self.query_one("#add-url", Input).value
        try:
            check_server(name, url, [])  # the cheap checks at once; the file is read and written in the worker
        except StoreError as exc:
            self.query_one("#add-error", Static).update(str(exc))
            return
        self.save(name, url)

    @work(thread=True, group="saved", exit_on_error=False)
    def save(self, name: str, url: str) -> None:
        """Thread worker: the saved servers file is read and rewritten off the event loop."""
        try:
            add_saved(name, url)
        except StoreError as exc:
            self.app.call_from_thread(self.query_one("#add-error", Static).update, str(exc))
            return
        self.app.call_from_thread(self.dismiss, True)

    def action_cancel(self) -> None:
        self.dismiss(False)
