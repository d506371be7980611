"""The tool console: start a task episode, call tools in it (form or JSON), verify, and read the verdict.

All calls go through the screen's `ServerSession`, from workers, so a slow server never freezes the UI.
"""

from __future__ import annotations

import json
import time
from typing import Any

import mcp_types as types
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, ContentSwitcher, Input, Select, Static, TextArea

from mcpworld.core.models import TaskInfo, Verdict
from mcpworld.tui.errors import ReportsWorkerErrors, error_text
from mcpworld.tui.render import call_result, verdict_text
from mcpworld.tui.session import ServerSession
from mcpworld.tui.widgets.schema_form import FormError, SchemaForm


class ToolConsole(ReportsWorkerErrors, Vertical):
    """Task row, episode line, tool row, then arguments (form or JSON) beside the result."""

    DEFAULT_CSS = """
    ToolConsole .bar { height: 1; margin-bottom: 1; }
    ToolConsole #task-select { width: 30; }
    ToolConsole #tool-select { width: 1fr; }
    ToolConsole #answer { width: 1fr; margin-left: 1; }
    ToolConsole Button { margin-left: 1; min-width: 8; }
    ToolConsole #episode-line { height: 1; color: $text-muted; margin-bottom: 1; }
    ToolConsole #console-body { height: 1fr; }
    ToolConsole #args { width: 1fr; height: 1fr; }
    ToolConsole #json-args { height: 1fr; }
    ToolConsole #result-box { width: 1fr; height: 1fr; border-left: solid $primary-darken-2; padding-left: 1; }
    """

    class EpisodeChanged(Message):
        """The live episode started, or its state changed (a call, a verify): the state browser refreshes."""

    def __init__(self, session: ServerSession, **kwargs: Any):
        super().__init__(**kwargs)
        self.session = session
        self.tools: dict[str, types.Tool] = {}
        self.tasks: list[TaskInfo] = []
        self.mode = "form"
        self.form_tool: str | None = None
        self.last_result: types.CallToolResult | None = None
        self.last_verdict: Verdict | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(classes="bar", id="task-bar"):
            yield Select([], id="task-select", prompt="task", compact=True)
            yield Button("Start", id="start", compact=True)
            yield Input(placeholder="answer to verify (answer tasks)", id="answer", compact=True)
            yield Button("Verify", id="verify", compact=True)
        yield Static("No episode yet.", id="episode-line", markup=False)
        with Horizontal(classes="bar"):
            yield Select([], id="tool-select", prompt="tool", compact=True)
            yield Button("Call", id="call", compact=True, variant="primary")
            yield Button("JSON", id="mode", compact=True)
        with Horizontal(id="console-body"):
            with ContentSwitcher(initial="form-box", id="args"):
                yield VerticalScroll(id="form-box")
                yield TextArea("{}", id="json-args", show_line_numbers=False)
            with VerticalScroll(id="result-box"):
                yield Static("Pick a tool, fill its arguments, press Ctrl+R to call it.", id="result")

    # -- data from the screen --------------------------------------------------------------------------

    def set_tools(self, tools: list[types.Tool]) -> None:
        self.tools = {t.name: t for t in tools}
        select = self.query_one("#tool-select", Select)
        select.set_options([(t.name, t.name) for t in tools])
        if tools:
            select.value = tools[0].name

    def set_tasks(self, tasks: list[TaskInfo]) -> None:
        self.tasks = tasks
        self.query_one("#task-select", Select).set_options([(t.id, t.id) for t in tasks])
        self.query_one("#task-bar").display = self.session.is_world

    def select_tool(self, name: str) -> None:
        if name in self.tools:
            self.query_one("#tool-select", Select).value = name

    def show_episode(self) -> None:
        s = self.session
        if not s.is_world:
            text = "Not a world server: tools are called without an episode."
        elif s.episode is None:
            text = "No episode yet."
        else:
            text = f"episode {s.episode} · " + (f"task {s.task}" if s.task else "free play (no task)")
        self.query_one("#episode-line", Static).update(text)

    def show(self, renderable: Any) -> None:
        self.query_one("#result", Static).update(renderable)
        self.query_one("#result-box", VerticalScroll).scroll_home(animate=False)

    # -- the form ----------------------------------------------------------------------------------------

    async def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "tool-select" and isinstance(event.value, str):
            await self._build_form(event.value)

    async def _build_form(self, name: str) -> None:
        """Replace the form with one for `name` (awaited, so there is never more than one form)."""
        box = self.query_one("#form-box", VerticalScroll)
        await box.remove_children()
        tool = self.tools.get(name)
        if tool is not None:
            await box.mount(SchemaForm(tool.input_schema))
        self.form_tool = name

    def arguments(self) -> dict[str, Any]:
        """The arguments from the form or the JSON box; raises FormError with what is wrong."""
        if self.mode == "json":
            text = self.query_one("#json-args", TextArea).text.strip() or "{}"
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise FormError(f"arguments are not valid JSON: {exc}") from None
            if not isinstance(value, dict):
                raise FormError("arguments must be a JSON object, e.g. {\"id\": \"X1\"}")
            return value
        forms = self.query(SchemaForm)
        return forms.first().values() if forms else {}

    def set_json(self, arguments: dict[str, Any]) -> None:
        """Switch to the JSON box holding `arguments` (what pasting arguments amounts to)."""
        self.query_one("#json-args", TextArea).text = json.dumps(arguments, indent=2)
        if self.mode != "json":
            self.toggle_mode()

    def toggle_mode(self) -> None:
        """Form ⇄ JSON, carrying the arguments across when they parse."""
        switcher = self.query_one("#args", ContentSwitcher)
        forms = self.query(SchemaForm)
        if self.mode == "form":
            try:
                values = forms.first().values() if forms else {}
            except FormError:
                values = {}
            area = self.query_one("#json-args", TextArea)
            if values or not area.text.strip():
                area.text = json.dumps(values, indent=2)
            self.mode = "json"
            switcher.current = "json-args"
            self.query_one("#mode", Button).label = "Form"
            area.focus()
        else:
            try:
                value = json.loads(self.query_one("#json-args", TextArea).text or "{}")
                if forms and isinstance(value, dict):
                    forms.first().set_values(value)
            except ValueError:  # FormError included: the JSON stays in its box, the form keeps its values
                pass
            self.mode = "form"
            switcher.current = "form-box"
            self.query_one("#mode", Button).label = "JSON"

    # -- actions -----------------------------------------------------------------------------------------

    def on_button_pressed(self, event: Button.Pressed) -> None:
        handlers = {"call": self.call_selected, "start": self.start_selected, "verify": self.verify,
                    "mode": self.toggle_mode}
        if event.button.id in handlers:
            handlers[event.button.id]()

    def call_selected(self) -> None:
        name = self.query_one("#tool-select", Select).value
        if not isinstance(name, str):
            self.notify("Pick a tool first.", severity="warning")
            return
        try:
            arguments = self.arguments()
        except FormError as exc:
            self.show(Text(str(exc), "red"))
            self.notify(str(exc), severity="error")
            return
        self.call_tool(name, arguments)

    def _disconnected(self) -> bool:
        """Say so when the connection is gone (F5 reconnects); True if it is."""
        if not self.session.finished.is_set():
            return False
        message = f"Not connected ({self.session.error or 'closed'}); press F5 to reconnect."
        self.show(Text(message, "red"))
        self.notify(message, severity="error")
        return True

    @work(group="console", exit_on_error=False)
    async def call_tool(self, name: str, arguments: dict[str, Any]) -> None:
        if self._disconnected():
            return
        if self.session.is_world and self.session.episode is None:
            self.notify("No live episode yet: start a task (Ctrl+N) or wait for the free-play episode.",
                        severity="warning")
            return
        self.show(Text(f"calling {name}…", "dim"))
        began = time.perf_counter()
        try:
            result = await self.session.call_tool(name, arguments)
        except Exception as exc:
            self.show(Text(f"{name} failed: {error_text(exc)}", "red"))
            self.notify(f"{name} failed: {error_text(exc)}", severity="error")
            return
        self.last_result = result
        self.show(call_result(name, result, (time.perf_counter() - began) * 1000))
        self.post_message(self.EpisodeChanged())

    def start_selected(self) -> None:
        task = self.query_one("#task-select", Select).value
        if not isinstance(task, str):
            self.notify("Pick a task first.", severity="warning")
            return
        self.start_task(task)

    @work(group="console", exit_on_error=False)
    async def start_task(self, task: str | None) -> None:
        if self._disconnected():
            return
        if not self.session.is_world:
            self.notify("Only worlds have task episodes.", severity="warning")
            return
        if task is not None:
            self.query_one("#task-select", Select).value = task
        try:
            started = await self.session.start(task)
        except Exception as exc:
            what = f"could not start {task}" if task else "could not start a free-play episode"
            self.show(Text(f"{what}: {error_text(exc)}", "red"))
            self.notify(f"{what}: {error_text(exc)}", severity="error")
            return
        self.last_verdict = None
        self.show_episode()
        text = Text()
        text.append(f"Started task {started.task}\n\n" if started.task else "Started a free-play episode\n\n",
                    "bold")
        if started.instruction:
            text.append(started.instruction + "\n")
        self.show(text)
        self.post_message(self.EpisodeChanged())

    @work(group="console", exit_on_error=False)
    async def verify(self) -> None:
        if self._disconnected():
            return
        if self.session.episode is None:
            self.notify("No live episode to verify.", severity="warning")
            return
        if self.session.task is None:
            self.notify("This is a free-play episode: start a task (Ctrl+N) to verify it.", severity="warning")
            return
        answer = self.query_one("#answer", Input).value.strip() or None
        try:
            result = await self.session.verify(answer)
        except Exception as exc:
            self.show(Text(f"verify failed: {error_text(exc)}", "red"))
            self.notify(f"verify failed: {error_text(exc)}", severity="error")
            return
        self.last_verdict = result.verdict
        self.show(verdict_text(result.verdict))
        self.notify("Verdict: passed" if result.verdict.passed else "Verdict: failed",
                    severity="information" if result.verdict.passed else "warning")
        self.post_message(self.EpisodeChanged())
