"""The TUI driven by Textual pilots against a real `mcpworld up` (registry + worlds) started by this module.

Assertions read what the screens render (the compositor's text at 80x24) and the widgets' state; snapshot
tests at the end compare SVG screenshots when pytest-textual-snapshot is installed. Every wait is for a
condition (`until`), never for a time: a loaded machine only makes them slower, never wrong.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import httpx
import pytest

pytest.importorskip("textual")

from rich.console import Console  # noqa: E402
from textual import events  # noqa: E402
from textual.app import App, ComposeResult  # noqa: E402
from textual.widgets import DataTable, Input, OptionList, Select, Static, TextArea  # noqa: E402

from mcpworld.agent.policies import OraclePolicy  # noqa: E402
from mcpworld.agent.runner import RunSpec, list_tasks, run  # noqa: E402
from mcpworld.agent.trajectory import TrajectoryWriter, read_trajectories  # noqa: E402
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http  # noqa: E402
from mcpworld.tui.app import MCPWorldApp  # noqa: E402
from mcpworld.tui.registry import fetch_servers  # noqa: E402
from mcpworld.tui.render import plain  # noqa: E402
from mcpworld.tui.screens.help import HelpScreen  # noqa: E402
from mcpworld.tui.screens.rollouts import RolloutsScreen  # noqa: E402
from mcpworld.tui.screens.server import ServerScreen  # noqa: E402
from mcpworld.tui.screens.servers import ServersScreen  # noqa: E402
from mcpworld.tui.screens.trajectories import TrajectoriesScreen  # noqa: E402
from mcpworld.tui.widgets.console import ToolConsole  # noqa: E402
from mcpworld.tui.widgets.rpc_log import RpcLogView  # noqa: E402
from mcpworld.tui.widgets.schema_form import FormError, SchemaForm, fields_of  # noqa: E402

SIZE = (80, 24)
FOCUS_BARS = "▊▎▏█▌▐"  # the bar a focused list or table draws at its left edge


# -- fixtures --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mcpworld up` as a real process (as in tests/app/test_up.py); yields the registry URL once every world is up."""
    home = tmp_path_factory.mktemp("tui-up-home")
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(home), "MCPWORLD_REGISTRY": f"http://127.0.0.1:{port}"}
    proc = subprocess.Popen(mcpworld_cmd("up", "--port", str(port), "--health-interval", "1"), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/healthz", proc)
        deadline = time.monotonic() + 30
        while not all(e.health == "up" for e in fetch_servers(base) if e.kind == "world"):  # shown in the table
            assert time.monotonic() < deadline, "worlds never became healthy"
            time.sleep(0.2)
        yield base
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=20)


@pytest.fixture(scope="module")
def oracle_file(up: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Trajectories of the oracle on two airline tasks, made by the agent runner against the same server."""
    out = tmp_path_factory.mktemp("tui-traj") / "oracle.jsonl"
    tasks = [t for t in anyio.run(list_tasks, "airline", up, None) if t.id in ("cancel-within-24h", "flight-status")]
    spec = RunSpec(server="airline", tasks=tasks, output=out, registry=up)
    anyio.run(lambda: run(spec, lambda i: OraclePolicy()))
    return out


# -- helpers ---------------------------------------------------------------------------------------------

def screen_text(app: App) -> str:
    """What the terminal shows now, as text (the same render `export_screenshot` uses, without the SVG)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, record=True,
                      color_system="truecolor", legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


async def until(pilot, predicate: Callable[[], object], what: str, timeout: float = 90.0) -> None:
    """Let the app run until `predicate()` holds; fail with the screen's text if it never does.

    The timeout only bounds a failure (generous, for loaded machines); a passing wait ends when the condition
    holds. Conditions on what the screen shows are checked against a fresh render each time.
    """
    deadline = time.monotonic() + timeout
    await pilot.pause()
    while not predicate():
        if not pilot.app.is_running:  # it crashed or quit: waiting longer cannot help, and says nothing
            raise AssertionError(f"the app stopped (return code {pilot.app.return_code}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; the screen shows:\n{screen_text(pilot.app)}")
        await pilot.pause(0.02)
    await pilot.pause()  # let the screen repaint before anyone reads it


async def focus(pilot, widget) -> None:
    """Focus `widget` and wait until it has focus: keys sent before that would land on the old one."""
    widget.focus()
    await until(pilot, lambda: pilot.app.focused is widget, f"focus on {widget!r}")


async def focused(pilot, selector: str) -> None:
    """Wait until the widget matching `selector` on the current screen has focus (a key moved it there).

    `pilot.press` only waits until the process looks idle, which on a loaded machine can be before a focus
    change queued by the previous key has run: keys that depend on where focus is wait for it with this.
    """
    await until(pilot, lambda: any(w is pilot.app.focused for w in pilot.app.screen.query(selector)),
                f"focus on {selector}")


async def shows(pilot, *texts: str, what: str | None = None) -> str:
    """Wait until the screen shows every one of `texts`; return the screen's text."""
    await until(pilot, lambda: all(t in screen_text(pilot.app) for t in texts), what or f"the screen to show {texts}")
    return screen_text(pilot.app)


async def open_airline(pilot, app: MCPWorldApp) -> ServerScreen:
    await until(pilot, lambda: isinstance(app.screen, ServersScreen) and app.screen.loaded, "the servers list")
    servers = app.screen
    servers.query_one("#search", Input).value = "airline"  # typing into the filter is tested on its own
    await until(pilot, lambda: [e.short_name for e in servers.shown] == ["airline"], "the airline row")
    await focused(pilot, "#servers")
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, ServerScreen) and app.screen.loaded, "airline to load")
    screen = app.screen
    assert isinstance(screen, ServerScreen)
    await until(pilot, lambda: screen.session.episode is not None, "the free-play episode")
    return screen


def result_text(screen: ServerScreen) -> str:
    return plain(screen.query_one("#result", Static).content)


# -- servers ---------------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_servers_listed_and_filterable(up: str, tmp_path: Path) -> None:
    registered = httpx.get(up + "/v0/servers", params={"version": "latest"}).json()["servers"]
    names = sorted(s["server"]["name"] for s in registered)
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ServersScreen) and app.screen.loaded, "the servers list")
        screen = app.screen
        assert sorted(e.name for e in screen.shown) == names
        airline = next(s["server"] for s in registered if s["server"]["name"] == "io.mcpworld/airline")
        facts = airline["_meta"]["io.mcpworld/server"]
        expected = ["airline", "world", "up", str(facts["tools"]), str(facts["tasks"])]

        def airline_row() -> str:
            lines = [line.strip(" " + FOCUS_BARS) for line in screen_text(app).splitlines()]
            rows = [line for line in lines if line.startswith("airline")]
            return rows[0] if rows else ""

        # the table sizes its columns after the rows land: wait for the row as a person would read it
        await until(pilot, lambda: airline_row().split()[:5] == expected and "travel, booking" in airline_row(),
                    "the airline row with every column")

        await pilot.press("slash")
        await focused(pilot, "#search")
        await pilot.press(*"travel")  # a tag
        await until(pilot, lambda: [e.short_name for e in screen.shown] == ["airline"], "the tag filter")
        assert screen.query_one("#servers", DataTable).row_count == 1
        await pilot.press(*[" "] + list("bank"))  # every word must match: nothing has both
        await until(pilot, lambda: not screen.shown, "an empty result")
        await shows(pilot, "No server matches 'travel bank'")

        worlds = sorted(s["server"]["name"] for s in registered if s["server"]["_meta"]["io.mcpworld/server"]["kind"]
                        == "world")
        search = screen.query_one("#search", Input)
        search.value = "kind:world health:up"
        await until(pilot, lambda: sorted(e.name for e in screen.shown) == worlds, "the kind filter")
        search.value = "tag:refunds"
        await until(pilot, lambda: {e.short_name for e in screen.shown} == {"airline", "shop"}, "the tag filter")
        search.value = ""
        await pilot.press("escape")  # back to the table, then refresh from the registry
        await focused(pilot, "#servers")
        await pilot.press("r")
        await until(pilot, lambda: len(screen.shown) == len(names), "the refresh")
        assert app.focused is screen.query_one("#servers", DataTable)


@pytest.mark.anyio
async def test_unreachable_registry_is_reported_not_raised(tmp_path: Path) -> None:
    app = MCPWorldApp(registry=f"http://127.0.0.1:{free_port()}", workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        error = app.screen.query_one("#servers-error", Static)
        await until(pilot, lambda: error.display, "the registry error")
        await shows(pilot, "unreachable")
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        await shows(pilot, "keyboard first", "Ctrl+Q")
        page = plain(app.screen.query_one("#help-text", Static).content)
        assert all(k in page for k in ("Ctrl+R", "Ctrl+G", "Ctrl+S", "open the finished run's trajectories"))
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ServersScreen), "help to close")


# -- a server, its console and its log -------------------------------------------------------------------

@pytest.mark.anyio
async def test_console_plays_cancel_within_24h_to_a_passing_verdict(up: str, tmp_path: Path) -> None:
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_airline(pilot, app)
        tools = screen.query_one("#tools-list", OptionList)
        assert tools.option_count == 16 == len(screen.tools)  # the world's 14, submit_answer and decline
        await shows(pilot, "cancel_reservation", "input schema")

        await pilot.press("alt+3")  # resources: the schema, the policy and one per table
        await until(pilot, lambda: app.focused is screen.query_one("#resources-list"), "the resources tab")
        assert screen.query_one("#resources-list", OptionList).option_count == 9
        await pilot.press("enter")  # read world://airline/schema
        body = screen.query_one("#resource-body", Static)
        await until(pilot, lambda: "CREATE TABLE" in plain(body.content), "the schema resource")

        await pilot.press("alt+2")  # tasks: pick cancel-within-24h and start it
        table = screen.query_one("#tasks-table", DataTable)
        await until(pilot, lambda: app.focused is table, "the tasks tab")
        table.move_cursor(row=table.get_row_index("cancel-within-24h"))
        await pilot.press("enter")
        await until(pilot, lambda: screen.session.task == "cancel-within-24h", "the task episode")
        console = screen.query_one(ToolConsole)
        await until(pilot, lambda: "Started task cancel-within-24h" in result_text(screen), "the instruction")
        await shows(pilot, "ZFA04Y an hour ago")

        # get_reservation with pasted JSON arguments: the box starts empty, so the paste is the whole text
        console.select_tool("get_reservation")
        await until(pilot, lambda: console.form_tool == "get_reservation", "the get_reservation form")
        await pilot.press("ctrl+t")
        area = screen.query_one("#json-args", TextArea)
        await until(pilot, lambda: app.focused is area, "the JSON box")
        assert area.text == ""
        app.post_message(events.Paste('{"reservation_id": "ZFA04Y"}'))  # what a terminal paste sends
        await until(pilot, lambda: "ZFA04Y" in area.text, "the paste")
        assert json.loads(area.text) == {"reservation_id": "ZFA04Y"}
        await pilot.press("ctrl+r")
        await until(pilot, lambda: console.last_result is not None, "get_reservation's result")
        assert not console.last_result.is_error
        assert console.last_result.structured_content["status"] == "booked"
        assert '"status": "booked"' in result_text(screen)
        await pilot.press("ctrl+o")  # copy the result as JSON: what the server sent, in MCP's shape
        copied = json.loads(app.clipboard)
        assert copied["structuredContent"]["status"] == "booked" and copied["isError"] is False

        # cancel_reservation through the generated form
        await pilot.press("ctrl+t")
        console.select_tool("cancel_reservation")
        await until(pilot, lambda: console.form_tool == "cancel_reservation", "the cancel_reservation form")
        form = screen.query_one(SchemaForm)
        await focus(pilot, form.widget_for("reservation_id"))
        await pilot.press(*"ZFA04Y")
        reason = form.widget_for("reason")
        assert isinstance(reason, Select)
        reason.value = form.fields[1].enum.index("change_of_plan")
        console.last_result = None
        await pilot.press("ctrl+r")
        await until(pilot, lambda: console.last_result is not None, "cancel_reservation's result")
        assert not console.last_result.is_error, result_text(screen)

        await pilot.press("ctrl+g")
        await until(pilot, lambda: console.last_verdict is not None, "the verdict")
        assert console.last_verdict.passed
        shown = result_text(screen)
        assert shown.startswith("PASSED")
        assert "✓ reservation[ZFA04Y] updated" in shown and "status: \"booked\" → \"cancelled\"" in shown
        await shows(pilot, "PASSED")
        await pilot.press("ctrl+o")  # the verdict, copied as JSON
        assert json.loads(app.clipboard)["verdict"]["passed"] is True

        await pilot.press("escape", "alt+4")  # leave the text box; the verdict ended the episode: the state tab
        state_title = screen.query_one("#state-title", Static)  # shows the changes its verdict kept
        await until(pilot, lambda: "which its verdict ended" in plain(state_title.content), "the state diff")
        await until(pilot, lambda: "cancelled" in plain(screen.query_one("#state-diff", Static).content), "the diff")

        session = screen.session
        await pilot.press("ctrl+w")  # close the server: its episode, then its connection
        await until(pilot, lambda: isinstance(app.screen, ServersScreen), "going back")
        await until(pilot, lambda: session.finished.is_set(), "the connection to close")
        assert session.error is None and session.episode is None
        # the verdict ended the episode: nothing was left to close before the connection
        assert session.log.entries[-1].method == "io.mcpworld/episode/verify"
        assert session.log.entries[-1].response is not None and session.log.entries[-1].ok
        assert app.open_servers == ()


@pytest.mark.anyio
async def test_json_rpc_log_records_searches_copies_and_saves(up: str, tmp_path: Path) -> None:
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_airline(pilot, app)
        console = screen.query_one(ToolConsole)
        console.set_json({"email": "alan@example.com"})
        console.call_tool("find_customer", console.arguments())
        await until(pilot, lambda: console.last_result is not None, "find_customer")
        console.set_json({"reservation_id": "NOPE00"})
        console.call_tool("get_reservation", console.arguments())
        await until(pilot, lambda: sum(e.method == "tools/call" for e in screen.session.log.entries) == 2, "2 calls")

        await pilot.press("alt+6")
        view = screen.query_one(RpcLogView)
        table = screen.query_one("#log-table", DataTable)
        entries = screen.session.log.entries
        methods = [e.method for e in entries]
        # off the wire: the handshake the SDK made (the UI never asked for it), then what the screen asked
        assert methods[0] in ("server/discover", "initialize") and entries[0].direction == "sent"
        assert "io.mcpworld/episode" in entries[0].result["capabilities"]["extensions"]
        assert methods[1:3] == ["tools/list", "io.mcpworld/episode/tasks"]
        assert "io.mcpworld/episode/start" in methods
        await until(pilot, lambda: table.row_count == len(entries), "every message in the table")
        await shows(pilot, "episode/start")

        await pilot.press("slash")
        await focused(pilot, "#log-search")
        await pilot.press(*"NOPE00")
        await until(pilot, lambda: view.query_text == "NOPE00", "the search")
        assert [e.method for e in view.shown] == ["tools/call"] and table.row_count == 1
        entry = view.shown[0]
        assert entry.params["arguments"] == {"reservation_id": "NOPE00"}
        assert entry.params["_meta"]["io.mcpworld/episode"] == screen.session.episode
        assert "io.modelcontextprotocol/protocolVersion" in entry.params["_meta"]  # what the SDK adds on the wire
        assert entry.result["isError"] is True and entry.response["id"] == entry.rpc_id

        await pilot.press("enter")  # to the table, then copy the entry
        await focused(pilot, "#log-table")
        await pilot.press("c")
        copied = json.loads(app.clipboard)
        assert copied["request"]["method"] == "tools/call" and copied["request"]["id"] == entry.rpc_id
        assert copied["response"]["result"]["isError"] is True and copied["direction"] == "sent"

        await pilot.press("ctrl+s")
        await until(pilot, lambda: view.saved_path is not None, "the saved log")
        saved = json.loads(view.saved_path.read_text())
        assert view.saved_path.parent == tmp_path and len(saved) == 1
        assert saved[0]["request"]["params"]["arguments"]["reservation_id"] == "NOPE00"

        await pilot.press("slash")  # clear the search: everything is back
        await focused(pilot, "#log-search")
        await pilot.press("ctrl+u")
        await until(pilot, lambda: table.row_count == len(screen.session.log.entries), "the unfiltered log")


@pytest.mark.anyio
async def test_console_errors_are_shown_not_raised(up: str, tmp_path: Path) -> None:
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_airline(pilot, app)
        console = screen.query_one(ToolConsole)
        console.select_tool("get_reservation")
        await until(pilot, lambda: console.form_tool == "get_reservation", "the form")
        await pilot.press("ctrl+r")  # required field left empty
        await until(pilot, lambda: "reservation_id is required" in result_text(screen), "the form error")
        console.set_json({})
        screen.query_one("#json-args", TextArea).text = "{not json"
        await pilot.press("ctrl+r")
        await until(pilot, lambda: "not valid JSON" in result_text(screen), "the JSON error")
        await pilot.press("ctrl+g")  # a free-play episode has nothing to verify: said, not raised
        await until(pilot, lambda: "free-play episode" in result_text(screen), "the free-play warning")
        assert console.last_verdict is None and app.is_running

        dead = {"name": "io.example/dead", "remotes": [{"type": "streamable-http",
                                                         "url": f"http://127.0.0.1:{free_port()}/mcp"}]}
        await app.push_screen(ServerScreen(dead, up, "dead"))
        error = app.screen.query_one("#server-error", Static)
        await until(pilot, lambda: error.display, "the connection error")
        await shows(pilot, "Cannot connect to io.example/dead")


@pytest.mark.anyio
async def test_a_plain_mcp_server_works_without_episodes(up: str, tmp_path: Path) -> None:
    """The registry's own MCP server is not a world: tools are called without an episode."""
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(ServerScreen(up + "/registry/mcp", up, "registry"))
        screen = app.screen
        await until(pilot, lambda: isinstance(screen, ServerScreen) and screen.loaded, "the registry server")
        assert not screen.session.is_world and screen.session.episode is None
        console = screen.query_one(ToolConsole)
        assert not screen.query_one("#task-bar").display
        console.select_tool("search_servers")
        await until(pilot, lambda: console.form_tool == "search_servers", "the form")
        screen.query_one(SchemaForm).set_values({"query": "airline"})
        await pilot.press("ctrl+r")
        await until(pilot, lambda: console.last_result is not None, "search_servers")
        assert [s["name"] for s in console.last_result.structured_content["result"]] == ["io.mcpworld/airline"]
        call = next(e for e in screen.session.log.entries if e.method == "tools/call")
        assert "io.mcpworld/episode" not in call.params.get("_meta", {})


# -- daily use: pasting, focus, keys, history, copying, saved and several servers ------------------------

def last_call(screen: ServerScreen) -> dict:
    """The arguments of the last tools/call, as they went over the wire."""
    return [e for e in screen.session.log.entries if e.method == "tools/call"][-1].params["arguments"]


@pytest.mark.anyio
async def test_pasted_json_arguments_can_be_edited_and_called(up: str, tmp_path: Path) -> None:
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_airline(pilot, app)
        console = screen.query_one(ToolConsole)
        area = screen.query_one("#json-args", TextArea)
        console.select_tool("get_reservation")
        await until(pilot, lambda: console.form_tool == "get_reservation", "the form")

        # a paste while no text box has focus (the tool picker here) becomes the arguments, in the JSON box
        await focus(pilot, screen.query_one("#tool-select", Select))
        app.post_message(events.Paste('{"reservation_id": "ZFA0"}'))
        await until(pilot, lambda: console.mode == "json" and app.focused is area, "the JSON box with the paste")
        assert json.loads(area.text) == {"reservation_id": "ZFA0"}
        # laid out one key a line, the cursor at the end: three steps left is just before the closing quote
        assert area.cursor_location == area.document.end
        await pilot.press("left", "left", "left", "4", "Y")
        assert json.loads(area.text) == {"reservation_id": "ZFA04Y"}
        await pilot.press("ctrl+r")
        await until(pilot, lambda: console.last_result is not None, "the call")
        assert last_call(screen) == {"reservation_id": "ZFA04Y"}

        # a box holding only {} is replaced by a paste, never becomes {…}{}
        area.set_arguments("{}")
        app.post_message(events.Paste('{"reservation_id": "NOPE01"}'))
        await until(pilot, lambda: "NOPE01" in area.text, "the second paste")
        assert json.loads(area.text) == {"reservation_id": "NOPE01"}
        # in a box with real text a paste is inserted at the cursor, as in any editor
        area.set_arguments('{"reservation_id": ""}')
        await pilot.press("left", "left")
        app.post_message(events.Paste("ZFA04Y"))
        await until(pilot, lambda: json_ok(area.text), "the pasted id")
        assert json.loads(area.text) == {"reservation_id": "ZFA04Y"}


def json_ok(text: str) -> bool:
    try:
        return json.loads(text) == {"reservation_id": "ZFA04Y"}
    except ValueError:
        return False


def look(widget) -> tuple:
    """What focus can change about how a widget is drawn (for a Select, its visible current-value box)."""
    target = widget.query_one("SelectCurrent") if isinstance(widget, Select) else widget
    st = target.styles
    return st.background_tint, st.text_style, st.border_left, st.border


@pytest.mark.anyio
async def test_focus_is_visible_on_every_kind_of_widget(up: str, tmp_path: Path) -> None:
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_airline(pilot, app)
        console = screen.query_one(ToolConsole)
        console.select_tool("get_reservation")
        await pilot.press("alt+5")
        await until(pilot, lambda: console.form_tool == "get_reservation" and screen.query(SchemaForm), "the form")
        widgets = {
            "tool picker": screen.query_one("#tool-select", Select),
            "form field": screen.query_one(SchemaForm).widget_for("reservation_id"),
            "button": screen.query_one("#call"),
            "answer box": screen.query_one("#answer", Input),
        }
        for name, widget in widgets.items():
            screen.query_one("#task-select", Select).focus()  # somewhere else
            await until(pilot, lambda w=widget: app.focused is not w, f"{name} to lose focus")
            before = look(widget)
            widget.focus()
            await until(pilot, lambda w=widget: app.focused is w and look(w) != before, f"{name} to look focused")

        await pilot.press("escape")
        await focused(pilot, "#tool-select")
        await pilot.press("alt+1")  # a list: focused it carries a bar at its left edge
        tools = screen.query_one("#tools-list", OptionList)
        await until(pilot, lambda: app.focused is tools, "the tools list")
        assert tools.styles.border_left[0] != "blank"
        await pilot.press("alt+2")
        table = screen.query_one("#tasks-table", DataTable)
        await until(pilot, lambda: app.focused is table, "the tasks table")
        assert table.styles.border_left[0] != "blank" and tools.styles.border_left[0] == "blank"


@pytest.mark.anyio
async def test_digits_never_switch_tabs_alt_digits_always_do(up: str, tmp_path: Path) -> None:
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_airline(pilot, app)
        tabs = screen.query_one("#tabs")
        await until(pilot, lambda: app.focused is screen.query_one("#tools-list"), "the tools list")
        await pilot.press("3", "6", "2")  # outside any text box: nothing happens
        assert tabs.active == "tools" and isinstance(app.screen, ServerScreen)

        console = screen.query_one(ToolConsole)
        console.select_tool("search_flights")
        await pilot.press("alt+5")
        await until(pilot, lambda: console.form_tool == "search_flights" and screen.query(SchemaForm), "the form")
        field = screen.query_one(SchemaForm).widget_for("day")
        await focus(pilot, field)
        await pilot.press(*"2026-03-14")  # digits typed in a field go into the field
        assert field.value == "2026-03-14" and tabs.active == "console"
        await pilot.press("alt+6")  # a terminal that reports Alt (kitty's protocol) switches even from a box
        await until(pilot, lambda: tabs.active == "log", "the log tab")

        # most terminals send Alt+5 as ESC 5: what Textual's parser makes of it switches tabs too
        from textual._xterm_parser import XTermParser

        [alt5] = [e.key for e in XTermParser().feed("\x1b5")]
        await focused(pilot, "#log-table")
        await pilot.press(alt5)
        await until(pilot, lambda: tabs.active == "console", "the console tab")


@pytest.mark.anyio
async def test_call_history_reruns_copies_and_persists(up: str, tmp_path: Path, isolated_home: Path) -> None:
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_airline(pilot, app)
        console = screen.query_one(ToolConsole)
        for email in ("alan@example.com", "nobody@example.com"):
            console.set_json({"email": email})
            console.last_result = None
            console.call_tool("find_customer", console.arguments())
            await until(pilot, lambda: console.last_result is not None, f"find_customer {email}")

        await pilot.press("alt+7")
        table = screen.query_one("#history-table", DataTable)
        await until(pilot, lambda: app.focused is table and table.row_count == 2, "two calls in the history")
        await shows(pilot, "find_customer", "nobody@example.com")  # newest first, its arguments beside it
        await pilot.press("down")  # the older call
        await pilot.press("c")
        copied = json.loads(app.clipboard)
        assert copied["tool"] == "find_customer" and copied["arguments"] == {"email": "alan@example.com"}
        assert copied["ok"] is True and copied["result"]["structuredContent"]

        screen.query_one("#json-args", TextArea).load_text("")
        await pilot.press("enter")  # back to the console with that call's arguments, ready to edit
        await until(pilot, lambda: screen.query_one("#tabs").active == "console", "the console")
        area = screen.query_one("#json-args", TextArea)
        assert json.loads(area.text) == {"email": "alan@example.com"}
        assert screen.query_one("#tool-select", Select).value == "find_customer"

        history = isolated_home / "tui" / "history.jsonl"
        await until(pilot, lambda: history.is_file() and len(history.read_text().splitlines()) == 2, "the file")
        await pilot.press("ctrl+w")
        await until(pilot, lambda: isinstance(app.screen, ServersScreen), "the list")

    again = MCPWorldApp(registry=up, workdir=tmp_path)  # a new run reads the history back
    async with again.run_test(size=SIZE) as pilot:
        screen = await open_airline(pilot, again)
        await pilot.press("alt+7")
        table = screen.query_one("#history-table", DataTable)
        await until(pilot, lambda: table.row_count == 2, "the saved history")


@pytest.mark.anyio
async def test_saved_servers_persist_and_several_stay_open(up: str, tmp_path: Path, isolated_home: Path) -> None:
    saved_file = isolated_home / "tui" / "servers.json"
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ServersScreen) and app.screen.loaded, "the servers list")
        servers = app.screen
        await focused(pilot, "#servers")
        await pilot.press("a")  # a bad URL is explained and nothing is saved
        await until(pilot, lambda: app.focused is not None and app.focused.id == "add-name", "the dialog")
        await pilot.press(*"mine", "enter")
        await focused(pilot, "#add-url")
        await pilot.press(*"localhost:1", "enter")
        error = app.screen.query_one("#add-error", Static)
        await until(pilot, lambda: "is not an MCP URL" in plain(error.content), "the URL error")
        assert not saved_file.exists() and app.screen.query_one("#add-name", Input).value == "mine"
        app.screen.query_one("#add-url", Input).value = up + "/registry/mcp"
        await focused(pilot, "#add-url")
        await pilot.press("enter")
        await until(pilot, lambda: servers.loaded and any(e.kind == "saved" for e in servers.shown), "the saved row")
        assert json.loads(saved_file.read_text()) == [{"name": "mine", "url": up + "/registry/mcp"}]
        await shows(pilot, "mine", "saved")

        # open airline, go back (it stays open), open the saved server: two live connections at once
        servers.query_one("#search", Input).value = "airline"
        await until(pilot, lambda: [e.short_name for e in servers.shown] == ["airline"], "the airline row")
        await focused(pilot, "#servers")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ServerScreen) and app.screen.loaded, "airline")
        airline = app.screen
        await until(pilot, lambda: airline.session.episode is not None, "airline's episode")
        episode = airline.session.episode
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is servers, "the list")
        await shows(pilot, "● airline")
        servers.query_one("#search", Input).value = "kind:saved"
        await until(pilot, lambda: [e.name for e in servers.shown] == ["mine"], "the saved server")
        await focused(pilot, "#servers")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ServerScreen) and app.screen.loaded, "the saved server")
        mine = app.screen
        assert mine is not airline and not mine.session.is_world and mine.query_one("#tools-list").option_count
        assert app.open_servers == ("io.mcpworld/airline", "mine")
        assert not airline.session.finished.is_set()  # still connected, episode and all

        await pilot.press("f2")  # the next open server: the same screen and episode as before
        await until(pilot, lambda: app.screen is airline, "airline again")
        assert airline.session.episode == episode
        await pilot.press("ctrl+w")
        await until(pilot, lambda: app.open_servers == ("mine",) and airline.session.finished.is_set(), "closed")
        assert not mine.session.finished.is_set()

    again = MCPWorldApp(registry=up, workdir=tmp_path)  # saved servers come back in a new run; x deletes one
    async with again.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(again.screen, ServersScreen) and again.screen.loaded, "the list")
        servers = again.screen
        servers.query_one("#search", Input).value = "kind:saved"
        await until(pilot, lambda: [e.name for e in servers.shown] == ["mine"], "the saved server")
        await focused(pilot, "#servers")
        await pilot.press("x")
        await until(pilot, lambda: not servers.shown and json.loads(saved_file.read_text()) == [], "the deletion")


@pytest.mark.anyio
async def test_the_wire_tap_logs_a_stdio_connection_too(up: str) -> None:
    """The log is the transport's traffic whatever the transport: here airline started over stdio."""
    from mcpworld.registry.connect import connect
    from mcpworld.tui.rpclog import RpcLog
    from mcpworld.tui.wire import tap

    record = httpx.get(up + "/v0/servers/io.mcpworld%2Fairline/versions/latest").json()["server"]
    log = RpcLog()
    async with connect(record, registry=up, prefer="stdio", wrap=lambda transport: tap(transport, log.record)) as c:
        tools = await c.list_tools()
    methods = [e.method for e in log.entries]
    assert methods[0] in ("server/discover", "initialize") and "tools/list" in methods
    listed = next(e for e in log.entries if e.method == "tools/list")
    assert not listed.pending and [t["name"] for t in listed.result["tools"]] == [t.name for t in tools.tools]
    assert all(e.direction == "sent" for e in log.entries if e.is_request)


# -- trajectories and rollouts ---------------------------------------------------------------------------

@pytest.mark.anyio
async def test_trajectory_file_steps_through_turns(oracle_file: Path, tmp_path: Path) -> None:
    app = MCPWorldApp(registry="http://127.0.0.1:9", open_file=oracle_file, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, TrajectoriesScreen) and app.screen.current, "the file")
        await focused(pilot, "#episodes")  # not the path box, where n and p would be typed
        screen = app.screen
        assert len(screen.trajectories) == 2
        table = screen.query_one("#episodes", DataTable)
        table.move_cursor(row=next(i for i, t in enumerate(screen.trajectories) if t.task == "cancel-within-24h"))
        await until(pilot, lambda: screen.current.task == "cancel-within-24h", "the cancel episode")
        page = screen.query_one("#page", Static)
        assert "booked reservation ZFA04Y" in plain(page.content) and screen.page == 0

        await pilot.press("n")
        await shows(pilot, "turn 1/3")
        assert "→ call get_reservation" in plain(page.content) and '"status": "booked"' in plain(page.content)
        await pilot.press("n")
        await shows(pilot, "turn 2/3")
        assert "→ call cancel_reservation" in plain(page.content)
        await pilot.press("n", "n")
        await until(pilot, lambda: screen.page == 4, "the outcome page")
        outcome = plain(page.content)
        assert "PASSED" in outcome and "reward 1" in outcome
        assert 'status: "booked" → "cancelled"' in outcome and "refund" in outcome
        await pilot.press("n")  # past the end stays on the outcome
        assert screen.page == len(screen.pages) - 1 == 4
        await pilot.press("p")
        await until(pilot, lambda: screen.page == 3, "the previous page")

        await pilot.press("o")
        await focused(pilot, "#path")
        app.focused.value = str(tmp_path / "missing.jsonl")
        await pilot.press("enter")
        await until(pilot, lambda: "does not exist" in plain(page.content), "the missing-file error")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ServersScreen), "going back")


@pytest.mark.anyio
async def test_rollouts_screen_runs_the_oracle_and_opens_the_result(up: str, tmp_path: Path,
                                                                    isolated_home: Path) -> None:
    n = len(await list_tasks("airline", up, "test"))
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ServersScreen) and app.screen.loaded, "the servers list")
        await focused(pilot, "#servers")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, RolloutsScreen), "the rollouts screen")
        screen = app.screen
        screen.query_one("#server", Select).value = "airline"
        screen.query_one("#split", Select).value = "test"
        screen.query_one("#samples", Input).value = "2"
        box = screen.query_one("#output", Input)
        await until(pilot, lambda: Path(box.value).name.startswith("airline-oracle-"), "the default output")
        output = Path(box.value)
        assert output.parent == isolated_home / "runs"  # under $MCPWORLD_HOME, not the current folder
        await pilot.press("ctrl+r")
        await until(pilot, lambda: screen.running or screen.finished, "the run to start")
        await until(pilot, lambda: screen.finished, "the run to finish", timeout=60)
        assert screen.done == screen.total == 2 * n and screen.passed == 2 * n
        await shows(pilot, f"done: {2 * n}/{2 * n} episodes · {2 * n} passed · 0 failed · 0 errors",
                    "success rate: 100.0%")
        written = read_trajectories(output)
        assert len(written) == 2 * n and {t.sample for t in written} == {0, 1}

        await pilot.press("ctrl+o")
        await until(pilot, lambda: isinstance(app.screen, TrajectoriesScreen) and app.screen.current, "the results")
        assert len(app.screen.trajectories) == 2 * n


def test_cli_command_options(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from mcpworld.tui.cli import tui_command

    result = CliRunner().invoke(tui_command, ["--help"])
    assert result.exit_code == 0 and "--registry URL" in result.output and "--open" in result.output
    result = CliRunner().invoke(tui_command, ["--open", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_stylesheets_are_tcss_files_shipped_as_package_data() -> None:
    """The app's CSS lives in .tcss files; pyproject's package data must carry them into a (non-editable) wheel."""
    import fnmatch
    import tomllib

    import mcpworld.tui.app as app_module

    root = Path(app_module.__file__).parent
    sheets = [root / path for path in MCPWorldApp.CSS_PATH]
    assert sheets and all(sheet.is_file() and sheet.suffix == ".tcss" for sheet in sheets)
    assert {p.name for p in (root / "styles").glob("*.tcss")} == {sheet.name for sheet in sheets}  # none unused
    package_data = tomllib.loads((root.parents[1] / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]
    for sheet in sheets:
        assert any(fnmatch.fnmatch(sheet.name, glob) for glob in package_data.get("*", [])), sheet
    for cls in (ServersScreen, ServerScreen, TrajectoriesScreen, RolloutsScreen, HelpScreen, ToolConsole,
                SchemaForm, RpcLogView):  # no widget keeps CSS of its own in Python
        assert "DEFAULT_CSS" not in cls.__dict__ and "CSS" not in cls.__dict__, cls


def test_every_watcher_watches_a_reactive_and_no_worker_looks_like_one() -> None:
    """Textual calls `watch_x` when the reactive `x` changes: a `watch_`/`compute_`/`validate_` method with no
    reactive behind it (a worker once was `watch_session`) reads like a watcher and is not one."""
    import importlib
    import inspect
    import pkgutil

    from textual.dom import DOMNode

    import mcpworld.tui as tui

    checked = 0
    for info in pkgutil.walk_packages(tui.__path__, "mcpworld.tui."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if not issubclass(cls, DOMNode) or not cls.__module__.startswith("mcpworld.tui"):
                continue
            for name in vars(cls):
                for prefix in ("watch_", "compute_", "validate_"):
                    if name.startswith(prefix):
                        checked += 1
                        assert name.removeprefix(prefix) in cls._reactives, f"{cls.__name__}.{name}"
    assert checked >= 20  # the state of the screens and widgets is reactive


# -- the schema form on its own --------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "$defs": {"Reason": {"enum": ["change_of_plan", "medical"], "type": "string"}},
    "properties": {
        "id": {"type": "string"},
        "count": {"type": "integer", "default": 1},
        "price": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
        "insured": {"type": "boolean"},
        "reason": {"$ref": "#/$defs/Reason"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "reason"],
}


class FormApp(App[None]):
    def compose(self) -> ComposeResult:
        yield SchemaForm(SCHEMA)


def test_schema_fields() -> None:
    kinds = [(f.name, f.kind, f.required) for f in fields_of(SCHEMA)]
    assert kinds == [("id", "string", True), ("count", "integer", False), ("price", "number", False),
                     ("insured", "boolean", False), ("reason", "enum", True), ("tags", "json", False)]


@pytest.mark.anyio
async def test_schema_form_values_round_trip_and_errors() -> None:
    app = FormApp()
    async with app.run_test(size=SIZE) as pilot:
        form = app.query_one(SchemaForm)
        with pytest.raises(FormError, match="id is required"):
            form.values()
        args = {"id": "X1", "count": 3, "price": 9.5, "insured": False, "reason": "medical", "tags": ["a"]}
        form.set_values(args)
        await pilot.pause()
        assert form.values() == args
        form.set_values({"id": "X1", "reason": "change_of_plan"})
        await pilot.pause()
        assert form.values() == {"id": "X1", "reason": "change_of_plan"}
        form.widget_for("tags").value = "[oops"
        with pytest.raises(FormError, match="tags: .* is not a valid json"):
            form.values()


# -- snapshots (pytest-textual-snapshot) -----------------------------------------------------------------

try:
    import pytest_textual_snapshot  # noqa: F401
    HAS_SNAPSHOTS = True
except ImportError:
    HAS_SNAPSHOTS = False
snapshots = pytest.mark.skipif(not HAS_SNAPSHOTS, reason="pytest-textual-snapshot is not installed")


async def _servers_ready(pilot) -> None:
    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, ServersScreen) and app.screen.loaded, "the servers list")
    app.screen.sub_title = "registry"  # the port differs on every run
    app.clear_notifications()
    app.screen.query_one("#search", Input).value = "kind:world"  # other kinds of server come and go
    await until(pilot, lambda: all(e.kind == "world" for e in app.screen.shown), "the worlds")
    await focused(pilot, "#servers")


@snapshots
def test_snapshot_servers(up: str, snap_compare, tmp_path: Path) -> None:
    assert snap_compare(MCPWorldApp(registry=up, workdir=tmp_path), terminal_size=SIZE, run_before=_servers_ready)


@snapshots
def test_snapshot_server_tools(up: str, snap_compare, tmp_path: Path) -> None:
    async def run_before(pilot) -> None:
        await _servers_ready(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(pilot.app.screen, ServerScreen) and pilot.app.screen.loaded, "airline")
        await focused(pilot, "#tools-list")
        await pilot.press("down", "down", "down")  # search_flights

    assert snap_compare(MCPWorldApp(registry=up, workdir=tmp_path), terminal_size=SIZE, run_before=run_before)


@snapshots
def test_snapshot_help(up: str, snap_compare, tmp_path: Path) -> None:
    async def run_before(pilot) -> None:
        await _servers_ready(pilot)
        await pilot.press("f1")

    assert snap_compare(MCPWorldApp(registry=up, workdir=tmp_path), terminal_size=SIZE, run_before=run_before)


@snapshots
def test_snapshot_trajectory_outcome(up: str, oracle_file: Path, snap_compare, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    [traj] = [t for t in read_trajectories(oracle_file) if t.task == "cancel-within-24h"]
    traj.episode, traj.duration_s = "e-0", 0.0
    for step in traj.steps:  # timings differ on every run
        step.policy_ms = 0.0
        for call in step.calls:
            call.latency_ms = 0.0
    monkeypatch.chdir(tmp_path)
    TrajectoryWriter("snap.jsonl").append(traj)
    app = MCPWorldApp(registry=up, open_file="snap.jsonl", workdir=tmp_path)

    async def run_before(pilot) -> None:
        await until(pilot, lambda: isinstance(app.screen, TrajectoriesScreen) and app.screen.current, "the file")
        await focused(pilot, "#episodes")
        await pilot.press("G")
        app.clear_notifications()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


@snapshots
def test_snapshot_rollouts_form(up: str, snap_compare) -> None:
    app = MCPWorldApp(registry=up, workdir=".")

    async def run_before(pilot) -> None:
        await _servers_ready(pilot)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, RolloutsScreen), "the rollouts screen")
        output = app.screen.query_one("#output", Input)
        await until(pilot, lambda: output.value, "the default output")
        output.value = "~/.mcpworld/runs/airline-oracle-20260101-000000.jsonl"  # the home and time differ

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
