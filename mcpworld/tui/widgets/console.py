"""The tool console: start a task episode, call tools in it (form or JSON), verify, and read the verdict.

All calls go through the screen's `ServerSession`, from workers, so a slow server never freezes the UI. The
argument mode, the output pane and the episode line are reactive: actions set them, watchers draw them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import mcp_types as types
from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Button, ContentSwitcher, Input, Select, Static, TextArea

from mcpworld.core.models import TaskInfo, Verdict
from mcpworld.tui.errors import ReportsWorkerErrors, error_text
from mcpworld.tui.render import call_result, dumps, verdict_text
from mcpworld.tui.rpclog import mcp_json
from mcpworld.tui.session import ServerSession
from mcpworld.tui.store import CallRecord
from mcpworld.tui.widgets.schema_form import FormError, SchemaForm

JSON_PLACEHOLDER = 'type or paste a JSON object, e.g. {"reservation_id": "ZFA04Y"}'


def json_object(text: str) -> dict[str, Any] | None:
    """`text` as a JSON object, or None when it is not one (a paste that is not arguments)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class JsonArgs(TextArea):
    """The JSON arguments box: a paste into an empty box (or one holding only `{}`) replaces it whole."""

    async def _on_paste(self, event: events.Paste) -> None:
        if self.read_only or self.text.strip() not in ("", "{}"):
            return  # TextArea inserts the paste at the cursor, as in any editor
        event.prevent_default()
        self.load_text(event.text.strip())
        self.move_cursor(self.document.end)
        self.focus()

    def set_arguments(self, text: str) -> None:
        """Replace the box's text and put the cursor at its end, ready to edit."""
        self.load_text(text)
        self.move_cursor(self.document.end)


class ToolConsole(ReportsWorkerErrors, Vertical):
    """Task row, episode line, tool row, then arguments (form or JSON) beside the result."""

    class EpisodeChanged(Message):
        """The live episode started, or its state changed (a call, a verify): the state browser refreshes."""

    class Called(Message):
        """A tool call finished (well or not): the screen adds it to the call history."""

        def __init__(self, record: CallRecord):
            super().__init__()
            self.record = record

    mode: reactive[str] = reactive("form", init=False)
    """`form` or `json`: which argument editor is shown."""
    output: reactive[Any] = reactive("Pick a tool, fill its arguments, press Ctrl+R to call it.", init=False,
                                     always_update=True)
    """What the result pane shows (a result, a verdict, an error)."""
    episode: reactive[tuple[bool, str | None, str | None]] = reactive((False, None, None), init=False)
    """(is a world, live episode id, its task) as the session last reported them."""

    def __init__(self, session: ServerSession, **kwargs: Any):
        super().__init__(**kwargs)
        self.session = session
        self.tools: dict[str, types.Tool] = {}
        self.tasks: list[TaskInfo] = []
        self.form_tool: str | None = None
        self.last_result: types.CallToolResult | None = None
        self.last_verdict: Verdict | None = None
        self.last_json: tuple[str, Any] | None = None  # (what it is, the JSON) of what the pane shows
        self.focus_pending: str | None = None  # a tool opened with Enter: its first argument gets the focus

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
                yield JsonArgs("", id="json-args", show_line_numbers=False, placeholder=JSON_PLACEHOLDER)
            with VerticalScroll(id="result-box"):
                yield Static(self.output, id="result")

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
        self.sync_episode()

    def select_tool(self, name: str) -> None:
        if name in self.tools:
            self.query_one("#tool-select", Select).value = name

    def open_tool(self, name: str) -> None:
        """Pick `name` and put the focus where its arguments are typed (once its form is built)."""
        if name not in self.tools:
            return
        self.focus_pending = name
        self.select_tool(name)
        if self.form_tool == name and self.query(SchemaForm):  # already built: no Changed, no rebuild
            self.focus_arguments()

    def focus_arguments(self) -> None:
        """Focus the first argument (the JSON box in JSON mode; Call for a tool without arguments)."""
        self.focus_pending = None
        if self.mode == "json":
            self.query_one(JsonArgs).focus()
            return
        forms = self.query(SchemaForm)
        fields = forms.first().query("Input, Select") if forms else None
        (fields.first() if fields else self.query_one("#call", Button)).focus()

    def sync_episode(self) -> None:
        """Take the session's episode into the reactive state (the watcher redraws the line)."""
        self.episode = (self.session.is_world, self.session.episode, self.session.task)

    def watch_episode(self, episode: tuple[bool, str | None, str | None]) -> None:
        is_world, live, task = episode
        if not is_world:
            text = "Not a world server: tools are called without an episode."
        elif live is None:
            text = "No episode yet."
        else:
            text = f"episode {live} · " + (f"task {task}" if task else "free play (no task)")
        self.query_one("#episode-line", Static).update(text)

    def show(self, renderable: Any, as_json: tuple[str, Any] | None = None) -> None:
        """Show `renderable` in the result pane; `as_json` is what Ctrl+O copies (nothing for messages)."""
        self.last_json = as_json
        self.output = renderable

    def watch_output(self, renderable: Any) -> None:
        self.query_one("#result", Static).update(renderable)
        self.query_one("#result-box", VerticalScroll).scroll_home(animate=False)

    def warn(self, message: str) -> None:
        """Say why nothing happened, where the person looks (the result pane) and as a toast."""
        self.show(Text(message, "yellow"))
        self.notify(message, severity="warning")

    def copy_result(self) -> None:
        """The shown result (tool result or verdict) to the clipboard as JSON."""
        if self.last_json is None:
            self.warn("Nothing to copy yet: call a tool or verify first.")
            return
        what, value = self.last_json
        self.app.copy_to_clipboard(dumps(value))
        self.notify(f"Copied {what} as JSON.")

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
        if self.focus_pending == name:
            self.focus_arguments()

    def arguments(self) -> dict[str, Any]:
        """The arguments from the form or the JSON box; raises FormError with what is wrong."""
        if self.mode == "json":
            text = self.query_one(JsonArgs).text.strip() or "{}"
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
        """Switch to the JSON box holding `arguments`, cursor at the end (what pasting arguments amounts to)."""
        self.query_one(JsonArgs).set_arguments(json.dumps(arguments, indent=2))
        self.mode = "json"

    def load_call(self, tool: str, arguments: dict[str, Any]) -> None:
        """Put an earlier call back in the console (from the history), ready to edit and call again."""
        self.select_tool(tool)
        self.set_json(arguments)

    def toggle_mode(self) -> None:
        """Form ⇄ JSON, carrying the arguments across when they parse."""
        forms = self.query(SchemaForm)
        area = self.query_one(JsonArgs)
        if self.mode == "form":
            try:
                values = forms.first().values() if forms else {}
            except FormError:
                values = {}
            if values or area.text.strip() in ("", "{}"):
                area.set_arguments(json.dumps(values, indent=2) if values else "")
            self.mode = "json"
        else:
            value = json_object(area.text or "{}")
            if forms and value is not None:
                try:
                    forms.first().set_values(value)
                except FormError:  # the form is still being built: it keeps its values
                    pass
            self.mode = "form"

    def watch_mode(self, mode: str) -> None:
        self.query_one("#args", ContentSwitcher).current = "json-args" if mode == "json" else "form-box"
        self.query_one("#mode", Button).label = "Form" if mode == "json" else "JSON"
        if mode == "json":
            self.call_after_refresh(self.query_one(JsonArgs).focus)  # once the switcher has shown it

    def on_paste(self, event: events.Paste) -> None:
        """A JSON object pasted while no text box has focus becomes the arguments (in the JSON box)."""
        if isinstance(self.app.focused, Input | TextArea):
            return  # the box took it
        value = json_object(event.text.strip())
        if value is not None:
            event.stop()
            self.set_json(value)

    # -- actions -----------------------------------------------------------------------------------------

    def on_button_pressed(self, event: Button.Pressed) -> None:
        handlers: dict[str, Callable[[], object]] = {"call": self.call_selected, "start": self.start_selected,
                                                     "verify": self.verify, "mode": self.toggle_mode}
        if event.button.id in handlers:
            handlers[event.button.id]()

    def call_selected(self) -> None:
        name = self.query_one("#tool-select", Select).value
        if not isinstance(name, str):
            self.warn("Pick a tool first.")
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
            self.warn("No live episode yet: start a task (Ctrl+N) or wait for the free-play episode.")
            return
        self.show(Text(f"calling {name}…", "dim"))
        began = time.perf_counter()
        try:
            result = await self.session.call_tool(name, arguments)
        except Exception as exc:
            ms = (time.perf_counter() - began) * 1000
            self.show(Text(f"{name} failed: {error_text(exc)}", "red"))
            self.notify(f"{name} failed: {error_text(exc)}", severity="error")
            self.post_message(self.Called(CallRecord(self.session.label, name, arguments, False, round(ms, 2),
                                                     {"error": error_text(exc)})))
            return
        ms = (time.perf_counter() - began) * 1000
        self.last_result = result
        self.show(call_result(name, result, ms), (f"the result of {name}", mcp_json(result)))
        self.post_message(self.Called(CallRecord(self.session.label, name, arguments, not result.is_error,
                                                 round(ms, 2), mcp_json(result))))
        self.post_message(self.EpisodeChanged())

    def start_selected(self) -> None:
        task = self.query_one("#task-select", Select).value
        if not isinstance(task, str):
            self.warn("Pick a task first.")
            return
        self.start_task(task)

    @work(group="console", exit_on_error=False)
    async def start_task(self, task: str | None) -> None:
        if self._disconnected():
            return
        if not self.session.is_world:
            self.warn("Only worlds have task episodes.")
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
        self.sync_episode()
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
            self.warn("No live episode to verify.")
            return
        if self.session.task is None:
            self.warn("This is a free-play episode: start a task (Ctrl+N) to verify it.")
            return
        answer = self.query_one("#answer", Input).value.strip() or None
        try:
            result = await self.session.verify(answer)
        except Exception as exc:
            self.show(Text(f"verify failed: {error_text(exc)}", "red"))
            self.notify(f"verify failed: {error_text(exc)}", severity="error")
            return
        self.last_verdict = result.verdict
        self.show(verdict_text(result.verdict), ("the verdict", mcp_json(result)))
        self.notify("Verdict: passed" if result.verdict.passed else "Verdict: failed",
                    severity="information" if result.verdict.passed else "warning")
        self.post_message(self.EpisodeChanged())
