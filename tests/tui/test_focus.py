"""The TUI keeps focus where the user types and fits small terminals (issue 35, point 4).

Textual pilots against a real `mcpworld up` (the `up` fixture of test_app.py, started again for this module):
Enter on a tool lands in its first argument, Esc goes back one level and never to another server, the footer
fits 80x24 and 100x30, the log's status column is wide enough, trajectories open from a folder and a bad path is
explained with the keys still working, and rollouts are written under $MCPWORLD_HOME/runs.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

pytest.importorskip("textual")

from textual.widgets import DataTable, Footer, Input, OptionList, Select, Static  # noqa: E402
from textual.widgets._footer import FooterKey  # noqa: E402

from mcpworld.tui.app import MCPWorldApp  # noqa: E402
from mcpworld.tui.render import plain  # noqa: E402
from mcpworld.tui.screens.rollouts import RolloutsScreen  # noqa: E402
from mcpworld.tui.screens.server import TABS, ServerScreen  # noqa: E402
from mcpworld.tui.screens.servers import ServersScreen  # noqa: E402
from mcpworld.tui.screens.trajectories import TrajectoriesScreen  # noqa: E402
from mcpworld.tui.widgets.console import ToolConsole  # noqa: E402
from mcpworld.tui.widgets.schema_form import SchemaForm  # noqa: E402
from tests.tui import test_app  # noqa: E402
from tests.tui.test_app import SIZE, focused, open_airline, screen_text, until  # noqa: E402

up = test_app.up  # the module's `mcpworld up` and oracle trajectories, made again for this module
oracle_file = test_app.oracle_file


async def servers_ready(pilot) -> ServersScreen:
    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, ServersScreen) and app.screen.loaded, "the servers list")
    return app.screen


async def open_tool(pilot, screen: ServerScreen, name: str) -> None:
    """On the Tools tab, highlight `name` and press Enter, as a person does."""
    tools = screen.query_one("#tools-list", OptionList)
    await pilot.press("alt+1")
    await until(pilot, lambda: pilot.app.focused is tools, "the tools list")
    tools.highlighted = next(i for i, t in enumerate(screen.tools) if t.name == name)
    await pilot.press("enter")


# -- a. Enter on a tool --------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_enter_on_a_tool_focuses_its_first_argument(up: str, tmp_path: Path) -> None:
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_airline(pilot, app)
        console = screen.query_one(ToolConsole)
        await open_tool(pilot, screen, "get_reservation")
        await until(pilot, lambda: console.form_tool == "get_reservation" and screen.query(SchemaForm), "the form")
        field = screen.query_one(SchemaForm).widget_for("reservation_id")
        await until(pilot, lambda: app.focused is field, "focus on the first argument")
        await pilot.press(*"ZFA04Y")  # typing goes into the argument, no Tab needed
        assert field.value == "ZFA04Y"
        await pilot.press("ctrl+r")
        await until(pilot, lambda: "ZFA04Y" in plain(screen.query_one("#result", Static).content)
                    and "calling" not in plain(screen.query_one("#result", Static).content), "the result")

        # the same tool again (its form is already built): focus still lands in the argument
        await open_tool(pilot, screen, "get_reservation")
        await until(pilot, lambda: app.focused is screen.query_one(SchemaForm).widget_for("reservation_id"),
                    "focus on the argument of the same tool")

        # another tool: its own first argument
        await open_tool(pilot, screen, "search_flights")
        await until(pilot, lambda: console.form_tool == "search_flights", "the search_flights form")
        first = screen.query_one(SchemaForm).fields[0].name
        await until(pilot, lambda: app.focused is screen.query_one(SchemaForm).widget_for(first),
                    "focus on search_flights' first argument")


# -- b. Esc ----------------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_escape_goes_back_one_level_and_never_to_another_server(up: str, tmp_path: Path) -> None:
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        airline = await open_airline(pilot, app)
        await pilot.press("escape")
        servers = await servers_ready(pilot)
        await until(pilot, lambda: app.screen is servers, "the list")

        # open a second world by moving the cursor, as a person does (not the filter)
        servers.query_one("#search", Input).value = "kind:world"
        await until(pilot, lambda: all(e.kind == "world" for e in servers.shown) and len(servers.shown) > 1,
                    "the worlds")
        await focused(pilot, "#servers")
        table = servers.query_one("#servers", DataTable)
        row = next(i for i, e in enumerate(servers.shown) if e.name != "io.mcpworld/airline")
        other = servers.shown[row].name
        table.move_cursor(row=row)
        await until(pilot, lambda: servers.highlighted() is not None and servers.highlighted().name == other,
                    "the other world's row")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ServerScreen) and app.screen.server_key == other
                    and app.screen.loaded, "the other world")
        world = app.screen
        assert world is not airline

        # a text box: Esc leaves the box, on the same tab of the same server
        await pilot.press("alt+5")
        await until(pilot, lambda: world.query(SchemaForm), "the form")
        answer = world.query_one("#answer", Input)
        answer.focus()
        await until(pilot, lambda: app.focused is answer, "the answer box")
        await pilot.press("escape")
        await focused(pilot, "#tool-select")
        assert app.screen is world and world.query_one("#tabs").active == "console"

        # outside a text box on another tab: back to the server's Tools tab, still the same server
        await pilot.press("escape")
        await focused(pilot, "#tools-list")
        assert app.screen is world and world.query_one("#tabs").active == "tools"

        # on the Tools tab: back to the list, on this server's row; the server stays open
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is servers, "the list")
        await until(pilot, lambda: servers.highlighted() is not None and servers.highlighted().name == other,
                    "the cursor on the server just left")
        await pilot.press("escape")  # Esc on the list does nothing more
        assert app.screen is servers and servers.highlighted().name == other

        # F2 and Enter both go back to the server just left, never to the other open one
        await pilot.press("f2")
        await until(pilot, lambda: isinstance(app.screen, ServerScreen), "a server")
        assert app.screen is world
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is servers, "the list")
        await focused(pilot, "#servers")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ServerScreen), "a server")
        assert app.screen is world and app.open_servers == ("io.mcpworld/airline", other)


# -- c. the footer ---------------------------------------------------------------------------------------

ESSENTIAL = {
    ServersScreen: {"Search", "Help"},
    ServerScreen: {"Back", "Call", "Help"},
    TrajectoriesScreen: {"Back", "Open", "Help"},
    RolloutsScreen: {"Back", "Run", "Help"},
}


def footer_problems(app: MCPWorldApp, where: str) -> list[str]:
    """What the footer of the current screen cuts off, and which essential keys it lacks."""
    width = app.size.width
    keys = list(app.screen.query_one(Footer).query(FooterKey))
    problems = [f"{where}: {k.key_display} {k.description!r} ends at column {k.region.right} > {width}"
                for k in keys if k.region.right > width or k.region.width == 0]
    shown = {k.description for k in keys if k.region.width and k.region.right <= width}
    wanted = next((v for cls, v in ESSENTIAL.items() if isinstance(app.screen, cls)), set())
    problems += [f"{where}: {d!r} is not shown (shown: {sorted(shown)})" for d in wanted - shown]
    return problems


async def settled_footer(pilot) -> None:
    await until(pilot, lambda: pilot.app.screen.query_one(Footer).query(FooterKey), "the footer")
    await pilot.pause(0.05)
    await pilot.pause()


@pytest.mark.anyio
@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_footer_fits_small_terminals(up: str, tmp_path: Path, oracle_file: Path,
                                           size: tuple[int, int]) -> None:
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    problems: list[str] = []
    async with app.run_test(size=size) as pilot:
        await servers_ready(pilot)
        await settled_footer(pilot)
        problems += footer_problems(app, "servers")
        screen = await open_airline(pilot, app)
        for i, tab in enumerate(TABS):
            await pilot.press(f"alt+{i + 1}")
            await until(pilot, lambda t=tab: screen.query_one("#tabs").active == t, f"the {tab} tab")
            await settled_footer(pilot)
            problems += footer_problems(app, f"server/{tab}")
        await pilot.press("alt+5")
        await focused(pilot, "#tool-select")
        screen.query_one("#answer", Input).focus()  # a text box in focus brings its own keys
        await until(pilot, lambda: isinstance(app.focused, Input), "the answer box")
        await settled_footer(pilot)
        problems += footer_problems(app, "server/console/answer")
        await pilot.press("escape", "escape", "escape")
        await servers_ready(pilot)
        await until(pilot, lambda: isinstance(app.screen, ServersScreen), "the list")
        await focused(pilot, "#servers")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, RolloutsScreen), "the rollouts screen")
        await settled_footer(pilot)
        problems += footer_problems(app, "rollouts")
        app.push_screen(TrajectoriesScreen(oracle_file))
        await until(pilot, lambda: isinstance(app.screen, TrajectoriesScreen) and app.screen.current, "the file")
        await settled_footer(pilot)
        problems += footer_problems(app, "trajectories")
    assert not problems, "\n".join(problems)


# -- d. the log's status column ------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_log_status_column_shows_ok_whole(up: str, tmp_path: Path) -> None:
    app = MCPWorldApp(registry=up, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_airline(pilot, app)
        await pilot.press("alt+6")
        table = screen.query_one("#log-table", DataTable)
        await until(pilot, lambda: app.focused is table, "the log table")
        log = screen.session.log
        await until(pilot, lambda: any(e.is_request and not e.pending and e.ok for e in log.entries), "a response")
        await pilot.pause(0.05)
        left = table.region.x + table.region.width
        rows = [line[table.region.x:left] for line in screen_text(app).splitlines()[table.region.y:
                                                                                   table.region.bottom]]
        assert any(re.search(r"\bok\b", r) for r in rows), "\n".join(rows)
        assert not any(re.search(r"\bo\s*$", r) for r in rows), "\n".join(rows)
        # and latencies of any size fit their column: the widest value is shown whole
        widths = {str(c.key.value): c.get_render_width(table) for c in table.columns.values()}
        assert widths["status"] >= len("err") + 2 and widths["ms"] >= len("12345") + 2
        history = screen.query_one("#history-table", DataTable)  # the History tab's table, the same way
        widths = {str(c.key.value): c.get_render_width(history) for c in history.columns.values()}
        assert widths["ok"] >= len("err") + 2 and widths["ms"] >= len("12345") + 2
        assert list(widths)[-1] == "tool"


# -- e. trajectories ---------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_trajectories_open_a_folder_and_explain_a_missing_path(oracle_file: Path, tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    old, new = folder / "old.jsonl", folder / "new.jsonl"
    old.write_text(oracle_file.read_text())
    new.write_text(oracle_file.read_text().splitlines()[0] + "\n")  # one episode
    os.utime(old, (time.time() - 60, time.time() - 60))
    (folder / "notes.txt").write_text("not a trajectory")

    app = MCPWorldApp(registry="http://127.0.0.1:9", workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await servers_ready(pilot)
        await focused(pilot, "#servers")
        await pilot.press("t")
        await focused(pilot, "#path")
        screen = app.screen
        assert isinstance(screen, TrajectoriesScreen)
        page = screen.query_one("#page", Static)

        # a missing path: a clear message, no exception name; the box keeps the keys to fix it
        app.focused.value = str(tmp_path / "missing")
        await pilot.press("enter")
        await until(pilot, lambda: "does not exist" in plain(page.content), "the missing-path message")
        assert "FileNotFoundError" not in screen_text(app) and "Error" not in plain(page.content)
        await focused(pilot, "#path")
        path_box = screen.query_one("#path", Input)
        await pilot.press(*str(folder))  # the old text is selected: typing replaces it
        assert path_box.value == str(folder)

        # a folder: its trajectory files to choose from, newest first
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "ChooseFileScreen", "the file chooser")
        choices = app.screen.query_one(OptionList)
        assert [choices.get_option_at_index(i).id for i in range(choices.option_count)] == [str(new), str(old)]
        await pilot.press("down", "enter")
        await until(pilot, lambda: app.screen is screen and len(screen.trajectories) == 2, "old.jsonl")
        await focused(pilot, "#episodes")
        assert screen.path == old and path_box.value == str(old)

        # after an error, the keys still work: n turns the page of the episode still shown
        await pilot.press("o")
        await focused(pilot, "#path")
        path_box.value = str(tmp_path / "nowhere.jsonl")
        await pilot.press("enter")
        await until(pilot, lambda: "does not exist" in plain(page.content) or "does not exist" in screen_text(app),
                    "the error")
        await focused(pilot, "#episodes")  # episodes are shown: focus goes back to them
        before = screen.page
        await pilot.press("n")
        await until(pilot, lambda: screen.page == before + 1, "the next page")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ServersScreen), "going back")

        # an empty folder says so
        empty = tmp_path / "empty"
        empty.mkdir()
        app.push_screen(TrajectoriesScreen(empty))
        await until(pilot, lambda: isinstance(app.screen, TrajectoriesScreen)
                    and "no trajectory files" in plain(app.screen.query_one("#page", Static).content), "empty")


@pytest.mark.anyio
async def test_trajectories_open_the_only_file_of_a_folder(oracle_file: Path, tmp_path: Path) -> None:
    app = MCPWorldApp(registry="http://127.0.0.1:9", open_file=oracle_file.parent, workdir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, TrajectoriesScreen) and app.screen.current, "the file")
        assert app.screen.path == oracle_file


def test_cli_open_accepts_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from mcpworld.tui import cli

    opened = []
    monkeypatch.setattr(MCPWorldApp, "run", lambda self: opened.append(self.open_file))
    result = CliRunner().invoke(cli.tui_command, ["--registry", "http://127.0.0.1:9", "--open", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert opened == [tmp_path]


# -- f. rollouts -------------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_rollouts_are_written_under_the_data_home(up: str, tmp_path: Path, isolated_home: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = MCPWorldApp(registry=up)  # no workdir: as `mcpworld tui` starts it
    async with app.run_test(size=SIZE) as pilot:
        await servers_ready(pilot)
        await focused(pilot, "#servers")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, RolloutsScreen), "the rollouts screen")
        screen = app.screen
        screen.query_one("#server", Select).value = "airline"
        output = screen.query_one("#output", Input)
        await until(pilot, lambda: "airline" in output.value, "the default output")
        path = Path(output.value)
        assert path.parent == isolated_home / "runs" and path.suffix == ".jsonl", path
        assert path.name.startswith("airline-oracle-")
        assert not list(tmp_path.iterdir())  # nothing in the current folder
