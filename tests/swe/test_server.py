"""The SWE MCP server through real clients: in memory and over stdio, with the episode-control extension."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from mcpworld.app.up import swe_record
from mcpworld.core.protocol import EpisodeControl
from mcpworld.swe.builder import build_instances
from mcpworld.swe.instances import load_instances
from mcpworld.swe.server import SWEOptions, SWEServer

pytestmark = pytest.mark.anyio
DOMAIN_TOOLS = {"str_replace_editor", "bash", "search", "lsp", "submit"}

TOKEN = os.environ["MCPWORLD_REGISTRY_TOKEN"]  # set by conftest: unlocks reference solutions


@pytest.fixture(scope="module")
def instances_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_instances(tmp_path_factory.mktemp("swe-built"))


@pytest.fixture
def sw(instances_file: Path) -> SWEServer:
    server = SWEServer(load_instances(instances_file), options=SWEOptions(warm=0, command_timeout_s=5))
    yield server
    server.close_all()


def _root(instruction: str) -> Path:
    return Path(re.search(r"checked out at (\S+) \(", instruction).group(1))  # type: ignore[union-attr]


async def test_reference_solution_resolves_and_workspace_goes_away(sw: SWEServer) -> None:
    async with Client(sw.server) as client:
        assert {t.name for t in (await client.list_tools()).tools} == DOMAIN_TOOLS
        ctl = EpisodeControl(client)
        tasks = {t.id: t for t in (await ctl.tasks(token=os.environ["MCPWORLD_REGISTRY_TOKEN"])).tasks}
        assert len(tasks) >= 5 and all(t.answer is None and t.solution for t in tasks.values())
        task = tasks["mcpworld__textkit-3"]
        started = await ctl.start(task.id, seed=1)
        root = _root(started.instruction)
        issue = sw.instances[task.id].problem_statement.rstrip()
        assert task.instruction.startswith(issue) and "`pwd` prints its absolute path" in task.instruction
        assert started.instruction.startswith(issue) and root.is_dir()
        for step in task.solution:
            result = await ctl.call(started.episode, step.name, step.arguments)
            assert not result.is_error, result.content[0].text
        assert "+            prev_lower" in result.structured_content["patch"]  # the last step is submit
        verdict = (await ctl.verify(started.episode)).verdict
        assert verdict.passed and verdict.score == 1.0
        assert verdict.evidence["report"][task.id]["resolved"] is True
        assert verdict.evidence["patch_source"] == "submit"
        assert (await ctl.close(started.episode)).closed
        assert not root.exists()
        assert not (await ctl.close(started.episode)).closed


async def test_agent_edits_partial_fix_and_no_op(sw: SWEServer) -> None:
    async with Client(sw.server) as client:
        ctl = EpisodeControl(client)
        noop = await ctl.start("mcpworld__minicalc-2")
        partial = await ctl.start("mcpworld__minicalc-2")
        assert _root(noop.instruction) != _root(partial.instruction)
        path = str(_root(partial.instruction) / "minicalc" / "numbers.py")
        view = await ctl.call(partial.episode, "str_replace_editor", {"command": "view", "path": path})
        assert "     9\t        return lo" in view.content[0].text
        edit = await ctl.call(partial.episode, "str_replace_editor", {
            "command": "str_replace", "path": path, "old_str": "        return lo\n    return x",
            "new_str": "        return hi\n    return x"})
        assert not edit.is_error, edit.content[0].text
        verdict = (await ctl.verify(partial.episode)).verdict
        assert not verdict.passed and verdict.score == 0.5
        assert verdict.evidence["report"]["mcpworld__minicalc-2"]["resolution"] == "PARTIAL"
        assert verdict.evidence["patch_source"] == "workspace"
        nothing = (await ctl.verify(noop.episode)).verdict
        assert not nothing.passed and nothing.score == 0.0
        assert nothing.evidence["report"]["mcpworld__minicalc-2"]["patch_exists"] is False
        state = await ctl.state(partial.episode)
        assert "+        return hi" in state.diff["patch"]


async def test_lsp_definition_references_and_symbols_on_a_shipped_repo(sw: SWEServer) -> None:
    async with Client(sw.server) as client:
        ctl = EpisodeControl(client)
        ep = (await ctl.start("mcpworld__minicalc-1")).episode
        root = sw.get(ep).workspace.root
        stats = str(root / "minicalc" / "stats.py")
        t = time.monotonic()
        got = await ctl.call(ep, "lsp", {"command": "definition", "file_path": stats, "symbol": "require_numbers",
                                         "line": 8})
        text = got.content[0].text
        assert not got.is_error, text
        assert f"{root}/minicalc/util.py:6 (function require_numbers, lines 6-14)" in text
        assert "     6\tdef require_numbers(values, what=\"values\"):" in text and "    14\t    return items" in text
        refs = (await ctl.call(ep, "lsp", {"command": "references", "file_path": str(root / "minicalc/util.py"),
                                           "symbol": "require_numbers", "line": 6})).content[0].text
        assert f"{root}/minicalc/stats.py:8:" in refs and f"{root}/minicalc/stats.py:14:" in refs
        hover = (await ctl.call(ep, "lsp", {"command": "hover", "file_path": stats, "symbol": "require_numbers",
                                            "line": 8})).content[0].text
        assert "def require_numbers" in hover
        symbols = (await ctl.call(ep, "lsp", {"command": "document_symbols", "file_path": stats})).content[0].text
        assert "function mean  (lines 6-9)" in symbols and "function median" in symbols
        found = (await ctl.call(ep, "lsp", {"command": "workspace_symbols", "query": "chunk"})).content[0].text
        assert f"{root}/minicalc/chunks.py:4" in found
        missing = await ctl.call(ep, "lsp", {"command": "definition", "file_path": stats, "symbol": "nope",
                                             "line": 8})
        assert missing.is_error and "Symbol `nope` not found on line 8" in missing.content[0].text
        escape = await ctl.call(ep, "lsp", {"command": "document_symbols", "file_path": "/etc/hosts"})
        assert escape.is_error and "outside the repository" in escape.content[0].text
        assert time.monotonic() - t < 30


async def test_tools_refuse_escapes_bad_arguments_and_runaways(sw: SWEServer) -> None:
    async with Client(sw.server) as client:
        ctl = EpisodeControl(client)
        ep = (await ctl.start("mcpworld__textkit-1")).episode
        root = sw.get(ep).workspace.root
        cases = [
            ("str_replace_editor", {"command": "view", "path": str(root / ".." / "..")}, "outside the repository"),
            ("str_replace_editor", {"command": "create", "path": "/tmp/escaped-by-agent.py", "file_text": "x"},
             "outside the repository"),
            ("str_replace_editor", {"command": "view"},
             "invalid arguments for str_replace_editor: path: Field required"),
            ("str_replace_editor", {"command": "view", "path": str(root), "bogus": 1},
             "bogus: Extra inputs are not permitted"),
            ("str_replace_editor", {"command": "peek", "path": str(root)}, "command: Input should be 'view', 'create'"),
            ("bash", {"command": "true", "timeout": 0}, "timeout: Input should be greater than or equal to 1"),
            ("search", {"pattern": "x", "path": "/etc"}, "outside the repository"),
            ("bash", {"command": "vim textkit/slug.py"}, "Interactive command refused"),
            ("bash", {"command": "sleep 30", "timeout": 1}, "timed out after 1 seconds"),
            ("nope", {}, "unknown tool 'nope'"),
        ]
        for tool, arguments, message in cases:
            result = await ctl.call(ep, tool, arguments)
            assert result.is_error and message in result.content[0].text, (tool, result.content[0].text)
        assert not Path("/tmp/escaped-by-agent.py").exists()
        ok = await ctl.call(ep, "bash", {"command": "python -m unittest tests.test_slug 2>&1 | tail -1; exit 4"})
        assert not ok.is_error and ok.content[0].text.endswith("OK\n[exit code: 4]")
        found = await ctl.call(ep, "search", {"pattern": "def slugify", "include": "*.py"})
        assert f"{root}/textkit/slug.py:9:def slugify" in found.content[0].text


async def test_plain_client_gets_a_default_episode_and_unknown_ids_are_clear(sw: SWEServer) -> None:
    async with Client(sw.server) as client:
        first = await client.call_tool("bash", {"command": "pwd"})
        again = await client.call_tool("bash", {"command": "echo hi > mark.txt; pwd"})
        assert first.content[0].text.split("\n")[0] == again.content[0].text.split("\n")[0]
        assert len(sw) == 1
        ctl = EpisodeControl(client)
        result = await ctl.call("swe-404", "bash", {"command": "true"})
        assert result.is_error and "unknown episode 'swe-404'" in result.content[0].text
        with pytest.raises(Exception, match="unknown task 'nope'"):
            await ctl.start("nope")
        prompts = (await client.list_prompts()).prompts
        assert {p.name for p in prompts} == set(sw.instances)


async def test_close_all_removes_every_workspace(instances_file: Path) -> None:
    server = SWEServer(load_instances(instances_file), options=SWEOptions(warm=1))
    async with Client(server.server) as client:
        ctl = EpisodeControl(client)
        roots = [_root((await ctl.start(None, seed=i)).instruction) for i in range(3)]
        server.pool.wait_ready()
        assert all(r.is_dir() for r in roots)
    server.close_all()
    assert not any(r.parent.exists() for r in roots)
    leftovers = [ws for lst in server.pool._ready.values() for ws in lst]
    assert leftovers == []


def test_swe_record_is_a_valid_server_json() -> None:
    from mcpworld.registry.records import local_stdio_args, record_kind, validate_record

    record = validate_record(swe_record("http://127.0.0.1:8765"))
    assert record["remotes"][0]["url"] == "http://127.0.0.1:8765/swe/mcp"
    assert local_stdio_args(record) == ["serve", "swe", "--stdio"]
    assert record_kind(record) == "swe" and record["name"] == "io.mcpworld/swe"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_process_runs_an_episode(instances_file: Path, mode: str) -> None:
    params = StdioServerParameters(
        command=sys.executable, env=dict(os.environ),
        args=["-m", "mcpworld.swe", "serve", "--stdio", "--instances", str(instances_file), "--warm", "0"])
    async with Client(params, mode=mode) as client:
        assert {t.name for t in (await client.list_tools()).tools} == DOMAIN_TOOLS
        ctl = EpisodeControl(client)
        task = next(t for t in (await ctl.tasks(token=TOKEN)).tasks if t.id == "mcpworld__minicalc-3")
        started = await ctl.start(task.id)
        root = _root(started.instruction)
        for step in task.solution:
            assert not (await ctl.call(started.episode, step.name, step.arguments)).is_error
        verdict = (await ctl.verify(started.episode)).verdict
        assert verdict.passed, verdict.evidence.get("log_tail")
        other = await ctl.start("mcpworld__textkit-2")
        other_root = _root(other.instruction)
        assert (await ctl.close(started.episode)).closed and not root.exists()
        assert other_root.is_dir()
    deadline = time.monotonic() + 10
    while other_root.exists() and time.monotonic() < deadline:  # removed when the server shuts down
        time.sleep(0.1)
    assert not other_root.exists()


async def test_agent_oracle_policy_solves_an_instance(sw: SWEServer) -> None:
    from mcpworld.agent.loop import run_episode
    from mcpworld.agent.policies import OraclePolicy

    async with Client(sw.server) as client:
        ctl = EpisodeControl(client)
        task = next(t for t in (await ctl.tasks(token=TOKEN)).tasks if t.id == "mcpworld__textkit-2")
        traj = await run_episode(ctl, "swe", task, OraclePolicy())
        assert traj.reward == 1.0 and traj.verdict is not None and traj.verdict.passed, traj.error
    assert len(sw) == 0  # the loop closed its episode, and the workspace with it


async def test_a_closed_http_session_frees_its_workspace_at_once(instances_file: Path) -> None:
    """Plain clients (2025-11-25 sessions) one after another: each deleted session frees its workspace, so a
    server capped at 3 episodes serves a 4th, 5th... client instead of refusing it until the idle TTL."""
    import contextlib

    from starlette.applications import Starlette

    from mcpworld.core.serving import serve_in_thread
    from mcpworld.core.testing import free_port
    from mcpworld.swe.server import running_swe, swe_routes

    sw = SWEServer(load_instances(instances_file), options=SWEOptions(warm=0, max_episodes=3, ttl_s=3600))

    @contextlib.asynccontextmanager
    async def lifespan(app: object):  # type: ignore[no-untyped-def]
        async with running_swe(sw):
            yield

    with serve_in_thread(Starlette(routes=swe_routes(sw), lifespan=lifespan), free_port()) as base:
        for n in range(5):
            async with Client(f"{base}/swe/mcp", mode="legacy") as client:
                result = await client.call_tool("bash", {"command": "pwd"})
                assert not result.is_error, (n, result.content[0].text)
                root = Path(result.content[0].text.split("\n")[0])
                assert root.is_dir() and len(sw) == 1
            deadline = time.monotonic() + 10
            while (root.exists() or len(sw)) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not root.exists() and len(sw) == 0, f"client {n}: the workspace outlived its session"


async def test_an_unexpected_failure_is_a_tool_error_that_says_what_happened(sw: SWEServer) -> None:
    async with Client(sw.server) as client:
        ctl = EpisodeControl(client)
        doomed = (await ctl.start("mcpworld__textkit-1")).episode
        other = (await ctl.start("mcpworld__textkit-1")).episode
        gone = await ctl.call(doomed, "bash", {"command": 'rm -rf "$PWD"'})  # the agent deletes its own checkout
        assert not gone.is_error, gone.content[0].text
        result = await ctl.call(doomed, "submit")
        text = result.content[0].text
        assert result.is_error and "tool 'submit' failed unexpectedly: " in text and "fault of the server" in text
        assert "Error" in text.split("failed unexpectedly: ")[1].split(":")[0]  # the exception's type is named
        fine = await ctl.call(other, "submit")  # the other episode, and the server, are unaffected
        assert not fine.is_error and fine.structured_content == {"patch": ""}


async def test_tools_keep_swe_agents_names_arguments_and_texts(sw: SWEServer) -> None:
    """Typed tools, listed as SWE-agent lists them: the same names, arguments, enums, bounds and required sets."""
    async with Client(sw.server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    editor = tools["str_replace_editor"].input_schema
    assert list(editor["properties"]) == ["command", "path", "file_text", "old_str", "new_str", "insert_line",
                                          "view_range"]
    assert editor["required"] == ["command", "path"] and editor["additionalProperties"] is False
    assert editor["properties"]["command"]["enum"] == ["view", "create", "str_replace", "insert", "undo_edit"]
    assert editor["properties"]["file_text"] == {"type": "string", "title": "File Text",
                                                 "description": "Content of the file to create (`create`)."}
    assert editor["properties"]["view_range"]["minItems"] == editor["properties"]["view_range"]["maxItems"] == 2
    assert tools["str_replace_editor"].description.startswith("Custom editing tool for viewing, creating and editing")
    bash = tools["bash"].input_schema
    assert bash["required"] == ["command"] and bash["properties"]["timeout"]["minimum"] == 1
    search = tools["search"].input_schema["properties"]
    assert search["kind"]["default"] == "content" and search["max_results"]["maximum"] == 1000
    assert tools["lsp"].input_schema["required"] == ["command"]
    assert tools["submit"].input_schema["properties"] == {}
    assert tools["search"].annotations.read_only_hint and not tools["bash"].annotations.read_only_hint
