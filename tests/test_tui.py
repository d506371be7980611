"""The TUI driven by Textual pilots against a real `mcpworld up` (registry + worlds) started by this module.

Assertions read what the screens render (the compositor's text at 80x24) and the widgets' state; snapshot
tests at the end compare SVG screenshots when pytest-textual-snapshot is installed.
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


# -- fixtures --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mcpworld up` as a real process (as in test_up.py); yields the registry URL once every world is up."""
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


async def until(pilot, predicate: Callable[[], object], what: str, timeout: float = 15.0) -> None:
    """Let the app run until `predicate()` holds; fail with the screen's text if it never does."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; the screen shows:\n{screen_text(pilot.app)}")
        await pilot.pause(0.05)
    await pilot.pause()  # let the screen repaint before anyone reads it


async def open_airline(pilot, app: MCPWorldApp) -> ServerScreen:
    await until(pilot, lambda: isinstance(app.screen, ServersScreen) and app.screen.loaded, "the servers list")
    await pilot.press("slash", *"airline", "enter", "enter")
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
        text = screen_text(app)
        airline = next(s["server"] for s in registered if s["server"]["name"] == "io.mcpworld/airline")
        facts = airline["_meta"]["io.mcpworld/server"]
        rows = [line for line in text.splitlines() if line.strip().startswith("airline")]
        assert rows, text
        row = rows[0]
        assert row.split()[:5] == ["airline", "world", "up", str(facts["tools"]), str(facts["tasks"])]
        assert "travel, booking" in row

        await pilot.press("slash", *"travel")  # a tag
        await until(pilot, lambda: [e.short_name for e in screen.shown] == ["airline"], "the tag filter")
        assert screen.query_one("#servers", DataTable).row_count == 1
        await pilot.press(*[" "] + list("bank"))  # every word must match: nothing has both
        await until(pilot, lambda: not screen.shown, "an empty result")
        assert "No server matches 'travel bank'" in screen_text(app)

        worlds = sorted(s["server"]["name"] for s in registered if s["server"]["_meta"]["io.mcpworld/server"]["kind"]
                        == "world")
        search = screen.query_one("#search", Input)
        search.value = "kind:world health:up"
        await until(pilot, lambda: sorted(e.name for e in screen.shown) == worlds, "the kind filter")
        search.value = "tag:refunds"
        await until(pilot, lambda: {e.short_name for e in screen.shown} == {"airline", "shop"}, "the tag filter")
        search.value = ""
        await pilot.press("escape", "r")  # back to the table, refresh from the registry
        await until(pilot, lambda: len(screen.shown) == len(names), "the refresh")
        assert app.focused is screen.query_one("#servers", DataTable)


@pytest.mark.anyio
async def test_unreachable_registry_is_reported_not_raised(tmp_path: Path) -> None:
    app = MCPWorldApp(registry=f"http://127.0.0.1:{free_port()}", workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        error = app.screen.query_one("#servers-error", Static)
        await until(pilot, lambda: error.display, "the registry error")
        assert "unreachable" in screen_text(app)
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        assert "keyboard first" in screen_text(app) and "Ctrl+Q" in screen_text(app)
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
        assert tools.option_count == 14 == len(screen.tools)
        assert "cancel_reservation" in screen_text(app) and "input schema" in screen_text(app)

        await pilot.press("3")  # resources: the schema, the policy and one per table
        await until(pilot, lambda: app.focused is screen.query_one("#resources-list"), "the resources tab")
        assert screen.query_one("#resources-list", OptionList).option_count == 9
        await pilot.press("enter")  # read world://airline/schema
        body = screen.query_one("#resource-body", Static)
        await until(pilot, lambda: "CREATE TABLE" in plain(body.content), "the schema resource")

        await pilot.press("2")  # tasks: pick cancel-within-24h and start it
        table = screen.query_one("#tasks-table", DataTable)
        await until(pilot, lambda: app.focused is table, "the tasks tab")
        table.move_cursor(row=table.get_row_index("cancel-within-24h"))
        await pilot.press("enter")
        await until(pilot, lambda: screen.session.task == "cancel-within-24h", "the task episode")
        console = screen.query_one(ToolConsole)
        await until(pilot, lambda: "Started task cancel-within-24h" in result_text(screen), "the instruction")
        assert "ZFA04Y an hour ago" in screen_text(app)

        # get_reservation with pasted JSON arguments
        console.select_tool("get_reservation")
        await until(pilot, lambda: console.form_tool == "get_reservation", "the get_reservation form")
        await pilot.press("ctrl+t")
        area = screen.query_one("#json-args", TextArea)
        await until(pilot, lambda: app.focused is area, "the JSON box")
        area.text = ""
        app.post_message(events.Paste('{"reservation_id": "ZFA04Y"}'))  # what a terminal paste sends
        await until(pilot, lambda: "ZFA04Y" in area.text, "the paste")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: console.last_result is not None, "get_reservation's result")
        assert not console.last_result.is_error
        assert console.last_result.structured_content["status"] == "booked"
        assert '"status": "booked"' in result_text(screen)

        # cancel_reservation through the generated form
        await pilot.press("ctrl+t")
        console.select_tool("cancel_reservation")
        await until(pilot, lambda: console.form_tool == "cancel_reservation", "the cancel_reservation form")
        form = screen.query_one(SchemaForm)
        form.widget_for("reservation_id").focus()
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
        assert "PASSED" in screen_text(app)

        await pilot.press("escape", "4")  # leave the text box; the state tab shows the same diff, and tables
        state_title = screen.query_one("#state-title", Static)
        await until(pilot, lambda: "since it started" in plain(state_title.content), "the state diff")
        await until(pilot, lambda: "cancelled" in plain(screen.query_one("#state-diff", Static).content), "the diff")
        await pilot.press("down", "down", "down", "down")  # Δ diff, customer, payment_method, flight, reservation
        await until(pilot, lambda: "reservation:" in plain(state_title.content), "the reservation rows")
        assert screen.query_one("#state-rows", DataTable).row_count == 8

        session = screen.session
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ServersScreen), "going back")
        await until(pilot, lambda: session.finished.is_set(), "the connection to close")
        assert session.error is None and session.episode is None
        assert session.log.entries[-1].method == "io.mcpworld/episode/close"


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

        await pilot.press("6")
        view = screen.query_one(RpcLogView)
        table = screen.query_one("#log-table", DataTable)
        methods = [e.method for e in screen.session.log.entries]
        assert methods[:3] == ["connect", "tools/list", "io.mcpworld/episode/tasks"]
        assert "io.mcpworld/episode/start" in methods and table.row_count == len(methods)
        assert "episode/start" in screen_text(app)

        await pilot.press("slash", *"NOPE00")
        await until(pilot, lambda: view.query_text == "NOPE00", "the search")
        assert [e.method for e in view.shown] == ["tools/call"] and table.row_count == 1
        entry = view.shown[0]
        assert entry.params["arguments"] == {"reservation_id": "NOPE00"}
        assert entry.params["_meta"] == {"io.mcpworld/episode": screen.session.episode}
        assert entry.result["isError"] is True

        await pilot.press("enter", "c")  # to the table, copy the entry
        copied = json.loads(app.clipboard)
        assert copied["request"]["method"] == "tools/call" and copied["request"]["id"] == entry.id
        assert copied["response"]["result"]["isError"] is True

        await pilot.press("ctrl+s")
        await until(pilot, lambda: view.saved_path is not None, "the saved log")
        saved = json.loads(view.saved_path.read_text())
        assert view.saved_path.parent == tmp_path and len(saved) == 1
        assert saved[0]["request"]["params"]["arguments"]["reservation_id"] == "NOPE00"

        await pilot.press("slash", "ctrl+u")  # clear the search: everything is back
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
        await pilot.press("ctrl+g")  # a free-play episode has nothing to verify
        await pilot.pause(0.1)
        assert console.last_verdict is None and app.is_running

        dead = {"name": "io.example/dead", "remotes": [{"type": "streamable-http",
                                                         "url": f"http://127.0.0.1:{free_port()}/mcp"}]}
        await app.push_screen(ServerScreen(dead, up, "dead"))
        error = app.screen.query_one("#server-error", Static)
        await until(pilot, lambda: error.display, "the connection error")
        assert "Cannot connect to io.example/dead" in screen_text(app)


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
        assert "_meta" not in call.params


# -- trajectories and rollouts ---------------------------------------------------------------------------

@pytest.mark.anyio
async def test_trajectory_file_steps_through_turns(oracle_file: Path, tmp_path: Path) -> None:
    app = MCPWorldApp(registry="http://127.0.0.1:9", open_file=oracle_file, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, TrajectoriesScreen) and app.screen.current, "the file")
        screen = app.screen
        assert len(screen.trajectories) == 2
        table = screen.query_one("#episodes", DataTable)
        table.move_cursor(row=next(i for i, t in enumerate(screen.trajectories) if t.task == "cancel-within-24h"))
        await until(pilot, lambda: screen.current.task == "cancel-within-24h", "the cancel episode")
        page = screen.query_one("#page", Static)
        assert "booked reservation ZFA04Y" in plain(page.content) and screen.page == 0

        await pilot.press("n")
        assert "turn 1/3" in screen_text(app)
        assert "→ call get_reservation" in plain(page.content) and '"status": "booked"' in plain(page.content)
        await pilot.press("n")
        assert "→ call cancel_reservation" in plain(page.content) and "turn 2/3" in screen_text(app)
        await pilot.press("n", "n")
        outcome = plain(page.content)
        assert "PASSED" in outcome and "reward 1" in outcome
        assert 'status: "booked" → "cancelled"' in outcome and "refund" in outcome
        await pilot.press("n")  # past the end stays on the outcome
        assert screen.page == len(screen.pages) - 1 == 4
        await pilot.press("p")
        assert screen.page == 3

        await pilot.press("o")
        assert app.focused is screen.query_one("#path", Input)
        app.focused.value = str(tmp_path / "missing.jsonl")
        await pilot.press("enter")
        await until(pilot, lambda: "no such file" in plain(page.content), "the missing-file error")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ServersScreen), "going back")


@pytest.mark.anyio
async def test_rollouts_screen_runs_the_oracle_and_opens_the_result(up: str, tmp_path: Path) -> None:
    n = len(await list_tasks("airline", up, "test"))
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ServersScreen) and app.screen.loaded, "the servers list")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, RolloutsScreen), "the rollouts screen")
        screen = app.screen
        screen.query_one("#server", Select).value = "airline"
        screen.query_one("#split", Select).value = "test"
        screen.query_one("#samples", Input).value = "2"
        await pilot.pause()
        output = tmp_path / "rollouts-airline-oracle.jsonl"
        assert screen.query_one("#output", Input).value == str(output)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: screen.running or screen.finished, "the run to start")
        await until(pilot, lambda: screen.finished, "the run to finish", timeout=60)
        assert screen.done == screen.total == 2 * n and screen.passed == 2 * n
        assert f"done: {2 * n}/{2 * n} episodes · {2 * n} passed · 0 failed · 0 errors" in screen_text(app)
        assert "success rate: 100.0%" in screen_text(app)
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


@snapshots
def test_snapshot_servers(up: str, snap_compare, tmp_path: Path) -> None:
    assert snap_compare(MCPWorldApp(registry=up, workdir=tmp_path), terminal_size=SIZE, run_before=_servers_ready)


@snapshots
def test_snapshot_server_tools(up: str, snap_compare, tmp_path: Path) -> None:
    async def run_before(pilot) -> None:
        await _servers_ready(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(pilot.app.screen, ServerScreen) and pilot.app.screen.loaded, "airline")
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

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
