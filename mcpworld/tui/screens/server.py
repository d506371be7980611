"""One server: its tools, tasks, resources, the live episode's tables, the tool console and the JSON-RPC log.

The screen owns one `ServerSession` (one connection) for its whole life and closes it when dismissed.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, OptionList, Static, TabbedContent, TabPane, TextArea
from textual.widgets.option_list import Option

from mcpworld.core.models import TaskInfo
from mcpworld.tui.errors import ReportsWorkerErrors, error_text
from mcpworld.tui.render import tool_detail
from mcpworld.tui.session import ServerSession
from mcpworld.tui.widgets.console import ToolConsole
from mcpworld.tui.widgets.rpc_log import RpcLogView
from mcpworld.tui.widgets.state import StateBrowser

TABS = ["tools", "tasks", "resources", "state", "console", "log"]
FOCUS = {"tools": "#tools-list", "tasks": "#tasks-table", "resources": "#resources-list", "state": "#state-tables",
         "console": "#tool-select", "log": "#log-table"}


class ServerScreen(ReportsWorkerErrors, Screen):
    """Tabs over one live connection; the console and the state browser share its episode."""

    DEFAULT_CSS = """
    ServerScreen #server-error { display: none; color: $error; height: auto; padding: 0 1; }
    ServerScreen .split { height: 1fr; }
    ServerScreen .side { width: 30; height: 1fr; }
    ServerScreen .detail { width: 1fr; height: 1fr; padding: 0 1; }
    ServerScreen #tasks-table { height: 1fr; }
    ServerScreen TabPane { padding: 0; }
    """

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("ctrl+r", "call", "Call", priority=True),
        Binding("ctrl+n", "start_task", "Start task", priority=True),
        Binding("ctrl+g", "verify", "Verify", priority=True),
        Binding("ctrl+t", "toggle_args", "Form/JSON", priority=True),
        Binding("f5", "reload", "Reload"),
        *[Binding(str(i + 1), f"tab('{tab}')", tab.title(), show=False) for i, tab in enumerate(TABS)],
    ]

    def __init__(self, target: str | dict[str, Any], registry: str | None = None, title: str | None = None):
        super().__init__()
        self.session = ServerSession(target, registry)
        self.server_title = title or self.session.label
        self.tools: list[types.Tool] = []
        self.tasks: list[TaskInfo] = []
        self.prompts: list[types.Prompt] = []
        self.resources: list[types.Resource] = []
        self.loaded = False

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
        yield Footer()

    def on_mount(self) -> None:
        self.title = self.server_title
        self.sub_title = f"{self.session.label} · connecting…"
        self.app.run_worker(self.session.run(), name=f"session {self.session.label}", group="sessions",
                            exit_on_error=False)
        self.load()
        self.watch_session()

    def on_unmount(self) -> None:
        self.session.close()

    # -- loading -----------------------------------------------------------------------------------------

    @work(group="load", exclusive=True, exit_on_error=False)
    async def load(self) -> None:
        """Connect, then list tools, tasks (or prompts) and resources; start a free-play episode on a world."""
        try:
            await self.session.wait_connected()
        except Exception as exc:
            self._fail(f"Cannot connect to {self.session.label}: {error_text(exc)}")
            return
        problems: list[str] = []
        try:
            self.tools = await self.session.list_tools()
        except Exception as exc:
            problems.append(f"tools/list failed: {error_text(exc)}")
        if self.session.is_world:
            try:
                self.tasks = await self.session.tasks()
            except Exception as exc:
                problems.append(f"tasks failed: {error_text(exc)}")
        caps = self.session.capabilities
        try:  # prompts and resources are optional: ask only servers that have them
            self.prompts = await self.session.list_prompts() if "prompts" in caps else []
        except Exception as exc:
            problems.append(f"prompts/list failed: {error_text(exc)}")
        try:
            self.resources = await self.session.list_resources() if "resources" in caps else []
        except Exception as exc:
            problems.append(f"resources/list failed: {error_text(exc)}")
        self._fill()
        if self.session.is_world and self.session.episode is None:
            self.query_one(ToolConsole).start_task(None)
        self.loaded = True
        tasks = f"{len(self.tasks)} tasks" if self.session.is_world else f"{len(self.prompts)} prompts"
        self.sub_title = f"{self.session.label} · {len(self.tools)} tools · {tasks}"
        for problem in problems:
            self.notify(problem, severity="error", timeout=8)

    @work(group="watch", exit_on_error=False)
    async def watch_session(self) -> None:
        """Show it when a connection that came up is lost (a server killed, a network gone)."""
        await self.session.connected.wait()
        if self.session.error is not None:
            return  # never came up: load() reports it
        await self.session.finished.wait()
        if self.session.error is not None:
            self._fail(f"Lost the connection to {self.session.label}: {self.session.error}")

    def _fail(self, message: str) -> None:
        error = self.query_one("#server-error", Static)
        error.update(message + "\nPress Escape to go back, F5 to retry.")
        error.display = True
        self.sub_title = f"{self.session.label} · not connected"
        self.query_one("#tool-detail", Static).update(Text(message, "red"))
        self.notify(message, title="Error", severity="error", timeout=10)

    def _fill(self) -> None:
        tools = self.query_one("#tools-list", OptionList)
        tools.clear_options()
        tools.add_options([Option(t.name, id=t.name) for t in self.tools])
        if self.tools:
            tools.highlighted = 0
            self.query_one("#tool-detail", Static).update(tool_detail(self.tools[0]))
        else:
            self.query_one("#tool-detail", Static).update("This server has no tools.")
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
        resources = self.query_one("#resources-list", OptionList)
        resources.clear_options()
        resources.add_options([Option(r.name, id=r.uri) for r in self.resources])
        if self.resources:
            resources.highlighted = 0
        console = self.query_one(ToolConsole)
        console.set_tools(self.tools)
        console.set_tasks(self.tasks)
        console.show_episode()

    # -- events ------------------------------------------------------------------------------------------

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "tools-list":
            tool = next((t for t in self.tools if t.name == event.option.id), None)
            if tool is not None:
                self.query_one("#tool-detail", Static).update(tool_detail(tool))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "tools-list" and event.option.id:
            self.query_one(ToolConsole).select_tool(event.option.id)
            self.action_tab("console")
        elif event.option_list.id == "resources-list" and event.option.id:
            self.read_resource(event.option.id)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "tasks-table" and self.session.is_world and event.row_key.value:
            self.query_one(ToolConsole).start_task(event.row_key.value)
            self.action_tab("console")

    def on_tool_console_episode_changed(self, event: ToolConsole.EpisodeChanged) -> None:
        if self.query_one(TabbedContent).active == "state":
            self.query_one(StateBrowser).reload()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "state":
            self.query_one(StateBrowser).reload()
        if event.pane.id in FOCUS:
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

    def action_reload(self) -> None:
        if self.session.finished.is_set():  # the connection is gone: reopen the screen on a new one
            screen = ServerScreen(self.session.target, self.session.registry, self.server_title)
            self.app.pop_screen()
            self.app.push_screen(screen)
            return
        if self.query_one(TabbedContent).active == "state":
            self.query_one(StateBrowser).reload()
        else:
            self.load()

    async def action_back(self) -> None:
        """Esc in a text box leaves the box (so digits switch tabs again); Esc elsewhere leaves the screen."""
        tabs = self.query_one(TabbedContent)
        if isinstance(self.focused, Input | TextArea) and tabs.active in FOCUS:
            self.query_one(FOCUS[tabs.active]).focus()
            return
        await self.session.aclose(3.0)
        self.dismiss()
