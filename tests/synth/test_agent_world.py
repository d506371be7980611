"""Agent-World environments served as worlds: every sample imports, answers tools/call over MCP, and keeps
episodes apart; their tool code runs in workers, where a runaway is killed without hurting the server."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters

from mcpworld.core.protocol import EpisodeControl
from mcpworld.synth.cli import synth_group
from mcpworld.synth.importers.agent_world import (
    PACKAGE_INIT,
    Limits,
    find_environments,
    import_environment,
    read_environment,
)
from mcpworld.synth.tasks.graph import build_graph, fill_args
from mcpworld.synth.tasks.taskspec import load_tasks
from mcpworld.worlds.audit import audit
from mcpworld.worlds.loader import load_world
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.server import WorldServer

AGENT_WORLD = Path(__file__).resolve().parents[3] / "shared/thirdparty/agent-world"
SAMPLES = [c.name.split("_")[0] for c in find_environments(AGENT_WORLD)] if AGENT_WORLD.is_dir() else []
needs_samples = pytest.mark.skipif(not SAMPLES, reason=f"Agent-World sample data not found at {AGENT_WORLD}")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("agent-world")
    return {c.name.split("_")[0]: anyio.run(lambda c=c: import_environment(c, out, n_tasks=2))
            for c in find_environments(AGENT_WORLD)}


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


@needs_samples
def test_every_sample_imports_with_typed_tasks_that_pass_the_audit(imported: dict) -> None:
    assert sorted(imported) == sorted(SAMPLES) and len(SAMPLES) >= 6
    with_tasks = [env_id for env_id, result in imported.items() if result.tasks]
    assert len(with_tasks) >= len(SAMPLES) - 1, {e: r.problems for e, r in imported.items()}
    for env_id, result in imported.items():
        schemas = read_environment(next(c for c in find_environments(AGENT_WORLD) if c.name.startswith(env_id))).tools
        assert result.tools == len(schemas)
        assert (result.path / "tasks.json").is_file() and (result.path / "environment.json").is_file()
        # the package's code is constant: nothing from the environment (its name, its ids) is pasted into it
        assert (result.path / "__init__.py").read_text() == PACKAGE_INIT
        if not result.tasks:  # an environment whose tools give no checkable question says so, and why
            assert "no honest task found" in result.problems[0], (env_id, result.problems)
            continue
        assert not result.problems, (env_id, result.problems)
        tasks = load_tasks(result.path / "tasks.json")
        assert all(t.check and t.check.parts and t.answer and len(t.answer) <= 120 for t in tasks)
        report = audit(WorldRuntime(load_world(result.path)))
        assert report.ok, (env_id, [(f.task, f.policy, f.attempt, f.detail) for f in report.failures])


@needs_samples
@pytest.mark.parametrize("env_id", SAMPLES)
def test_tools_call_through_mcp_with_isolated_episodes(imported: dict, env_id: str) -> None:
    world = load_world(imported[env_id].path)
    runtime = WorldRuntime(world)
    graph = build_graph(runtime, random.Random(0), probes_per_tool=1)
    rng = random.Random(1)
    server = WorldServer(runtime)

    async def main() -> None:
        async with Client(server.server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {t.__mcpworld_tool__.name for t in world.tools} | {"submit_answer", "decline"}
            ctl = EpisodeControl(client)
            a, b = (await ctl.start(None)).episode, (await ctl.start(None)).episode
            if world.tasks:
                first = world.tasks[0].solution[0]
                name, arguments = first.name, first.arguments
            else:  # no honest task was found for it: call a tool the graph probed successfully
                name, arguments = graph.probes[0].tool, graph.probes[0].args
            answered = await ctl.call(a, name, arguments)
            assert not answered.is_error and text(answered)
            writer = None
            for node in sorted(graph.nodes.values(), key=lambda n: n.read_only):
                args = fill_args(node, graph.pool, rng)
                if args is None:
                    continue
                await ctl.call(a, node.name, args)
                if (await ctl.state(a)).diff:
                    writer = node.name
                    break
            if writer is None:  # nothing here writes (catalogue browsers): every tool is read-only
                assert all(not t.__mcpworld_tool__.writes for t in world.tools), env_id
                return
            changed = next(iter((await ctl.state(a)).diff))
            assert (await ctl.state(b)).diff == {}, f"{writer} in episode A leaked into episode B"
            fresh = (await ctl.start(None)).episode
            assert (await ctl.state(b, changed, 1000)).rows == (await ctl.state(fresh, changed, 1000)).rows
            assert (await ctl.state(a, changed, 1000)).rows != (await ctl.state(fresh, changed, 1000)).rows

    anyio.run(main)


def runaway_env(root: Path) -> Path:
    folder = root / "environment_mix"
    (folder / "9990000").mkdir(parents=True)
    (folder / "9990000" / "counters.json").write_text(json.dumps([
        {"id": "c1", "n": 0, "status": "idle"}, {"id": "c2", "n": 5, "status": "busy"},
        {"id": "c3", "n": 12, "status": "stalled"}]))
    load = ("    import json, os\n    path = os.path.join(os.environ['MCP_DB_DIR'], 'counters.json')\n"
            "    rows = json.load(open(path))\n")
    tools = [
        {"name": "spin_forever", "description": "Never returns.", "parameters": {"type": "object", "properties": {}},
         "implementation": "def spin_forever(**_extra):\n    while True:\n        pass\n"},
        {"name": "get_status", "description": "The counter.", "parameters": {"type": "object", "properties": {}},
         "implementation": "def get_status(**_extra):\n" + load + "    return rows[0]\n"},
        {"name": "list_counters", "description": "Every counter.", "parameters": {"type": "object", "properties": {}},
         "implementation": "def list_counters(**_extra):\n" + load + "    return {'counters': rows}\n"},
        {"name": "bump_counter", "description": "Add one.", "parameters": {
            "type": "object", "properties": {"by": {"type": "integer", "minimum": 1}}, "required": ["by"]},
         "implementation": "def bump_counter(by, **_extra):\n" + load +
                           "    rows[0]['n'] += by\n    json.dump(rows, open(path, 'w'))\n    return rows[0]\n"},
    ]
    checkpoint = folder / "9990000_step4_checkpoint.json"
    checkpoint.write_text(json.dumps({"metadata": {"env_id": "9990000", "name": "Runaway Lab",
                                                   "description": "A lab whose tools misbehave."},
                                      "data": {"ToolDesignAgent": {"tool_schemas": tools}}}))
    return checkpoint


def test_runaway_implementation_is_killed_and_the_server_survives(tmp_path: Path) -> None:
    checkpoint = runaway_env(tmp_path)
    result = anyio.run(lambda: import_environment(checkpoint, tmp_path / "out", n_tasks=1,
                                                  limits=Limits(cpu_s=1, wall_s=2)))
    assert not result.problems, result.problems
    server = WorldServer(WorldRuntime(load_world(result.path)))

    async def main() -> None:
        async with Client(server.server) as client:
            ctl = EpisodeControl(client)
            a, b = (await ctl.start(None)).episode, (await ctl.start(None)).episode
            began = time.monotonic()
            spun = await ctl.call(a, "spin_forever")
            assert spun.is_error and ("CPU time limit" in text(spun) or "timed out" in text(spun)), text(spun)
            assert time.monotonic() - began < 6
            assert json.loads(text(await ctl.call(a, "bump_counter", {"by": 2})))["n"] == 2
            assert json.loads(text(await ctl.call(b, "get_status")))["n"] == 0
            assert json.loads(text(await ctl.call(a, "get_status")))["n"] == 2
            bad = await ctl.call(a, "bump_counter", {"by": 0})
            assert bad.is_error and "greater than or equal to 1" in text(bad)

    anyio.run(main)


@needs_samples
def test_installed_import_is_served_over_stdio(isolated_home: Path) -> None:
    result = CliRunner().invoke(synth_group, ["import-agent-world", str(AGENT_WORLD), "--install", "--only", "0058000",
                                              "--tasks", "1", "--registry", "http://127.0.0.1:9"])
    assert result.exit_code == 0, result.output
    assert "ok   aw-dice-roller" in result.output and "not reachable" in result.output
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcpworld", "serve", "world", "aw-dice-roller",
                                                                 "--stdio"],
                                   env={**os.environ, "MCPWORLD_HOME": str(isolated_home)})

    async def main() -> None:
        async with Client(params) as client:
            assert "roll_dice" in {t.name for t in (await client.list_tools()).tools}
            rolled = await client.call_tool("roll_dice", {"notation": "2d6+3"})
            assert not rolled.is_error and json.loads(text(rolled))["roll"]["status"] == "rolled"
            refused = await client.call_tool("get_dice_roll", {"dice_roll_id": "nope"})
            assert refused.is_error

    anyio.run(main)


def test_an_env_id_is_a_name_never_a_path(tmp_path: Path) -> None:
    """Issue 30: `metadata.env_id` named any folder, whose `*.json` and README were copied into the world."""
    from mcpworld.synth.importers.agent_world import read_environment

    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "keys.json").write_text('{"k": "s3cret"}')
    mix = tmp_path / "input" / "environment_mix"
    mix.mkdir(parents=True)
    checkpoint = mix / "x_step4_checkpoint.json"
    for env_id in ("../../elsewhere", str(secret), ".."):
        checkpoint.write_text(json.dumps({"metadata": {"env_id": env_id}, "data": {"ToolDesignAgent": {
            "tool_schemas": [{"name": "t", "description": "d", "parameters": {"type": "object"}}]}}}))
        with pytest.raises(ValueError, match="not an environment id"):
            read_environment(checkpoint)
