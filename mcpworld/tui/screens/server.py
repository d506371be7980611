"""One server: its tools, tasks, resources, the live episode's tables, the tool console, the JSON-RPC log and
the call history.

The screen owns one `ServerSession` (one connection). The app installs it, so leaving it (Esc) keeps the
connection for later; closing it (Ctrl+W) closes the episode and the connection. What the server offers is
reactive state (`tools`, `tasks`, `prompts`, `resources`, `error`): the loader sets it, watchers draw it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, OptionList, Static, TabbedContent, TabPane, TextArea
from textual.widgets.option_list import Option

from mcpworld.core.models import TaskInfo
from mcpworld.tui.errors import ReportsWorkerErrors, error_text
from mcpworld.tui.render import tool_detail
from mcpworld.tui.session import ServerSession
from mcpworld.tui.store import append_history, load_history
from mcpworld.tui.widgets.console import ToolConsole
from mcpworld.tui.widgets.history import CallHistory
from mcpworld.tui.widgets.rpc_log import RpcLogView
from mcpworld.tui.widgets.state import StateBrowser

TABS = ["tools", "tasks", "resources", "state", "console", "log", "history"]
# Most terminals send Alt+digit as ESC+digit, which Textual reads as the character Option+digit types on a Mac
# (Alt+5 arrives as "∞"): both spellings switch tabs. Those characters typed in a text box stay in the box.
ALT_DIGIT_AS_TYPED = ["inverted_exclamation_mark", "trade_mark_sign", "pound_sign", "cent_sign", "infinity",
                      "section_sign", "pilcrow_sign"]
FOCUS = {"tools": "#tools-list", "tasks": "#tasks-table", "resources": "#resources-list", "state": "#state-tables",
         "console": "#tool-select", "log": "#log-table", "history": "#history-table"}


class ServerScreen(ReportsWorkerErrors, Screen):
    """Tabs over one live connection; the console and the state browser share its episode."""

    # The footer shows what a person needs at 80 columns (with the Log tab's own keys); F1 lists every key.
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("ctrl+r", "call", "Call", priority=True),
        Binding("ctrl+n", "start_task", "Task", priority=True),
        Binding("ctrl+g", "verify", "Verify", priority=True),
        Binding("ctrl+t", "toggle_args", "JSON", priority=True),
        Binding("ctrl+w", "close_server", "Close server", show=False),
        Binding("ctrl+o", "copy_result", "Copy result", priority=True, show=False),
        Binding("f5", "reload", "Reload", show=False),
        # Alt+digit, never a bare digit: a digit typed outside a text box must not switch tabs under you
        *[Binding(f"alt+{i + 1},{ALT_DIGIT_AS_TYPED[i]}", f"tab('{tab}')", tab.title(), show=False)
          for i, tab in enumerate(TABS)],
    ]

    tools: reactive[list[types.Tool]] = reactive(list, init=False, always_update=True)
    tasks: reactive[list[TaskInfo]] = reactive(list, init=False, always_update=True)
    prompts: reactive[list[types.Prompt]] = reactive(list, init=False, always_update=True)
    resources: reactive[list[types.Resource]] = reactive(list, init=False, always_update=True)
    error: reactive[str] = reactive("", init=False)
    loaded: reactive[bool] = reactive(False, init=False)

    def __init__(self, target: str | dict[str, Any], registry: str | None = None, title: str | None = None,
                 server_key: str | None = None):
        super().__init__()
        self.session = ServerSession(target, registry)
        self.server_key = server_key or self.session.label
        self.server_title = title or self.session.label
        self._focus_set_for: str | None = None  # the tab whose activation action_tab has already focused

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="server-error", markup=False)
        with TabbedContent(initial="tools", id="tabs"):
            with TabPane("Tools", id="tools"), Horizontal(classes="split"):
                yield OptionList(id="tools-list", classes="side")
                with VerticalScroll(classes="detail", id="tool-detail-box"):
                    yield Static("Connecting…", id="tool-detail")
            with TabPane("Tasks", id="tasks"):
                yield DataTable(id="tasks-table", cursor_type="row", zebra_stripes=True)
            with TabPane("Resources", id="resources"), Horizontal(classes="split"):
                yield OptionList(id="resources-list", classes="side")
                with VerticalScroll(classes="detail"):
                    yield Static("Select a resource to read it.", id="resource-body", markup=False)
            with TabPane("State", id="state"):
                yield StateBrowser(self.session, id="state-browser")
            with TabPane("Console", id="console"):
                yield ToolConsole(self.session, id="tool-console")
            with TabPane("Log", id="log"):
                yield RpcLogView(self.session.log, label=self.session.label,
                                 save_dir=getattr(self.app, "workdir", None), id="rpc-log")
            with TabPane("History", id="history"):
                yield CallHistory(id="call-history")
        yield Footer()

    def on_mount(self) -> None:
        self.title = self.server_title
        self.sub_title = f"{self.session.label} · connecting…"
        self.app.run_worker(self.session.run(), name=f"session {self.session.label}", group="sessions",
                            exit_on_error=False)
        self.load()
        self.monitor_connection()
        self.read_history()

    def on_unmount(self) -> None:
        self.session.close()

    # -- loading -----------------------------------------------------------------------------------------

    @work(group="load", exclusive=True, exit_on_error=False)
    async def load(self) -> None:
        """Connect, then list tools, tasks (or prompts) and resources; start a free-play episode on a world."""
        try:
            await self.session.wait_connected()
        except Exception as exc:
            self.error = f"Cannot connect to {self.session.label}: {error_text(exc)}"
            return
        problems: list[str] = []
        caps = self.session.capabilities

        async def ask(what: str, wanted: bool, fetch: Any) -> list[Any]:
            if not wanted:
                return []
            try:
                return await fetch()
            except Exception as exc:
                problems.append(f"{what} failed: {error_text(exc)}")
                return []

        self.tools = await ask("tools/list", True, self.session.list_tools)
        self.tasks = await ask("tasks", self.session.is_world, self.session.tasks)
        self.prompts = await ask("prompts/list", "prompts" in caps, self.session.list_prompts)  # optional
        self.resources = await ask("resources/list", "resources" in caps, self.session.list_resources)
        if self.session.is_world and self.session.episode is None:
            self.query_one(ToolConsole).start_task(None)
        self.loaded = True
        for problem in problems:
            self.notify(problem, severity="error", timeout=8)

    @work(group="connection", exit_on_error=False)
    async def monitor_connection(self) -> None:
        """Show it when a connection that came up is lost (a server killed, a network gone)."""
        await self.session.connected.wait()
        if self.session.error is not None:
            return  # never came up: load() reports it
        await self.session.finished.wait()
        if self.session.error is not None:
            self.error = f"Lost the connection to {self.session.label}: {self.session.error}"

    @work(thread=True, group="history", exit_on_error=False)
    def read_history(self) -> None:
        """Thread worker: earlier calls to this server, from the history file."""
        records = load_history(self.session.label)
        self.app.call_from_thread(self.query_one(CallHistory).set_records, records)

    # -- watchers ----------------------------------------------------------------------------------------

    def watch_error(self, message: str) -> None:
        error = self.query_one("#server-error", Static)
        error.update(message + "\nPress Escape to go back, F5 to retry.")
        error.display = bool(message)
        if message:
            self.sub_title = f"{self.session.label} · not connected"
            self.query_one("#tool-detail", Static).update(Text(message, "red"))
            self.notify(message, title="Error", severity="error", timeout=10)

    def watch_tools(self, tools: list[types.Tool]) -> None:
        options = self.query_one("#tools-list", OptionList)
        options.clear_options()
        options.add_options([Option(t.name, id=t.name) for t in tools])
        if tools:
            options.highlighted = 0
        self.query_one("#tool-detail", Static).update(tool_detail(tools[0]) if tools else "This server has no tools.")
        self.query_one(ToolConsole).set_tools(tools)

    def watch_tasks(self, tasks: list[TaskInfo]) -> None:
        self._fill_tasks()
        self.query_one(ToolConsole).set_tasks(tasks)

    def watch_prompts(self) -> None:
        self._fill_tasks()

    def _fill_tasks(self) -> None:
        """A world's tasks, or the prompts of any other server, in one table."""
        table = self.query_one("#tasks-table", DataTable)
        table.clear(columns=True)
        if self.tasks:
            table.add_columns("id", "split", "level", "kind", "instruction")
            for t in self.tasks:
                table.add_row(t.id, t.split, t.difficulty, t.kind, t.instruction.splitlines()[0][:80], key=t.id)
        else:
            table.add_columns("prompt", "description")
            for pr in self.prompts:
                table.add_row(pr.name, (pr.description or "")[:80], key=pr.name)

    def watch_resources(self, resources: list[types.Resource]) -> None:
        options = self.query_one("#resources-list", OptionList)
        options.clear_options()
        options.add_options([Option(r.name, id=r.uri) for r in resources])
        if resources:
            options.highlighted = 0

    def watch_loaded(self, loaded: bool) -> None:
        if loaded:
            count = f"{len(self.tasks)} tasks" if self.session.is_world else f"{len(self.prompts)} prompts"
            self.sub_title = f"{self.session.label} · {len(self.tools)} tools · {count}"

    # -- events ------------------------------------------------------------------------------------------

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "tools-list":
            tool = next((t for t in self.tools if t.name == event.option.id), None)
            if tool is not None:
                self.query_one("#tool-detail", Static).update(tool_detail(tool))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "tools-list" and event.option.id:
            self.action_tab("console")
            self.query_one(ToolConsole).open_tool(event.option.id)  # focus lands in its first argument
        elif event.option_list.id == "resources-list" and event.option.id:
            self.read_resource(event.option.id)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "tasks-table" and self.session.is_world and event.row_key.value:
            self.query_one(ToolConsole).start_task(event.row_key.value)
            self.action_tab("console")

    def on_tool_console_episode_changed(self, event: ToolConsole.EpisodeChanged) -> None:
        if self.query_one(TabbedContent).active == "state":
            self.query_one(StateBrowser).reload()

    def on_tool_console_called(self, event: ToolConsole.Called) -> None:
        self.query_one(CallHistory).add(event.record)
        self.run_worker(asyncio.to_thread(append_history, event.record), group="history-write",
                        exit_on_error=False)  # the history file is appended off the event loop

    def on_call_history_rerun(self, event: CallHistory.Rerun) -> None:
        self.query_one(ToolConsole).load_call(event.record.tool, event.record.arguments)
        self.action_tab("console")
        self.notify(f"{event.record.tool}'s arguments are in the JSON box: edit them, Ctrl+R calls.")

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "state":
            self.query_one(StateBrowser).reload()
        if self._focus_set_for == event.pane.id:  # action_tab already put the focus (it may have moved on since)
            self._focus_set_for = None
        elif event.pane.id in FOCUS:  # a tab clicked with the mouse
            self.query_one(FOCUS[event.pane.id]).focus()

    @work(group="resource", exclusive=True, exit_on_error=False)
    async def read_resource(self, uri: str) -> None:
        body = self.query_one("#resource-body", Static)
        body.update(f"reading {uri}…")
        try:
            result = await self.session.read_resource(uri)
        except Exception as exc:
            body.update(Text(f"{uri}: {error_text(exc)}", "red"))
            return
        parts = []
        for content in result.contents:
            text = getattr(content, "text", None)
            parts.append(text if text is not None else f"({content.mime_type or 'binary'} content)")
        body.update(Text(f"{uri}\n\n" + "\n".join(parts)))

    # -- actions -----------------------------------------------------------------------------------------

    def action_tab(self, tab: str) -> None:
        """Show `tab` and focus its main widget (a tab already shown keeps its focus, e.g. the JSON box)."""
        tabs = self.query_one(TabbedContent)
        if tabs.active != tab:
            self._focus_set_for = tab
            tabs.active = tab
            self.query_one(FOCUS[tab]).focus()

    def action_call(self) -> None:
        self.action_tab("console")
        self.query_one(ToolConsole).call_selected()

    def action_start_task(self) -> None:
        self.action_tab("console")
        self.query_one(ToolConsole).start_selected()

    def action_verify(self) -> None:
        self.action_tab("console")
        self.query_one(ToolConsole).verify()

    def action_toggle_args(self) -> None:
        self.action_tab("console")
        self.query_one(ToolConsole).toggle_mode()

    def action_copy_result(self) -> None:
        self.query_one(ToolConsole).copy_result()

    async def action_reload(self) -> None:
        if self.session.finished.is_set():  # the connection is gone: reopen the server on a new one
            target, key, title = self.session.target, self.server_key, self.server_title
            await self.action_close_server()
            self.app.open_server(key, target, title)  # type: ignore[attr-defined]
            return
        if self.query_one(TabbedContent).active == "state":
            self.query_one(StateBrowser).reload()
        else:
            self.load()

    def action_back(self) -> None:
        """Esc goes back one level: out of a text box, then to the Tools tab, then to the list (the connection
        kept open, the list's cursor on this server). It never shows another server."""
        tabs = self.query_one(TabbedContent)
        if isinstance(self.focused, Input | TextArea) and tabs.active in FOCUS:
            self.query_one(FOCUS[tabs.active]).focus()
            return
        if tabs.active != "tools":
            self.action_tab("tools")
            return
        self.app.left_server = self.server_key  # type: ignore[attr-defined]  # the list puts its cursor here
        self.dismiss()

    async def action_close_server(self) -> None:
        """Close the episode and the connection, and go back (an installed screen is forgotten by the app)."""
        if getattr(self.app, "server_screen", lambda _: None)(self.server_key) is self:
            await self.app.close_server(self.server_key)  # type: ignore[attr-defined]
            return
        await self.session.aclose(3.0)
        self.dismiss()
