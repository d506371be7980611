"""Tool-graph and programmatic tasks on catalog worlds, offline: connected, reproducible, honest, solvable."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from mcpworld.llm import ChatClient
from mcpworld.llm_replay import ReplayLLM, serve
from mcpworld.protocol import EpisodeControl
from mcpworld.servers.envs.host import load_runtime
from mcpworld.servers.envs.runtime import WorldRuntime
from mcpworld.servers.envs.server import WorldServer
from mcpworld.servers.synth.cli import synth_group
from mcpworld.servers.synth.graph import build_graph, canonical, graph_tasks, leaks
from mcpworld.servers.synth.programmatic import programmatic_tasks, script_check
from mcpworld.servers.synth.taskspec import ScriptCheck, load_tasks, save_tasks, with_tasks
from mcpworld.testing import free_port

WORLDS = ["airline", "shop"]


@pytest.fixture(scope="module")
def generated() -> dict[str, list]:
    out = {}
    for name in WORLDS:
        runtime = load_runtime(name)
        out[name] = anyio.run(lambda: graph_tasks(runtime, 6, seed=3))
    return out


def outcome(runtime: WorldRuntime, task_id: str, calls: list, answer: str | None):
    episode = runtime.fork(task_id)
    for call in calls:
        assert runtime.call(episode, call.name, call.arguments).error is None
    verdict = runtime.verify(episode, answer)
    episode.close()
    return verdict


@pytest.mark.parametrize("name", WORLDS)
def test_graph_tasks_are_connected_and_honest(generated: dict, name: str) -> None:
    tasks = generated[name]
    assert len(tasks) >= 4, [t.instruction for t in tasks]
    world = load_runtime(name).world
    runtime = WorldRuntime(with_tasks(world, tasks, replace=True))
    assert any(len(t.solution) >= 3 for t in tasks) or any(len(t.solution) == 2 for t in tasks)
    for task in tasks:
        assert task.kind == "answer" and task.check.type == "mentions" and task.check.values
        assert 1 <= len(task.solution) <= 4 and len({s.name for s in task.solution}) == len(task.solution)
        assert all(not runtime.tools[s.name].meta.writes for s in task.solution)
        # parameters really connect: each later step takes a value that the previous step returned
        episode = runtime.fork()
        previous = None
        for step in task.solution:
            if previous is not None:
                text = canonical(previous).lower()
                assert any(json.dumps(v).lower().strip('"[]') in text for v in step.arguments.values()), \
                    (task.id, step)
            previous = runtime.call(episode, step.name, step.arguments).value
        # the question never gives away what the chain finds
        for value in task.check.values:
            assert value.lower() not in task.instruction.lower()
        assert outcome(runtime, task.id, task.solution, task.answer).passed
        assert not outcome(runtime, task.id, [], None).passed
        assert not outcome(runtime, task.id, task.solution, "I could not find it.").passed
        assert task.rubric and task.meta["question_by"] == "template"


def test_same_seed_same_tasks_and_files_round_trip(generated: dict, tmp_path: Path) -> None:
    again = anyio.run(lambda: graph_tasks(load_runtime("airline"), 6, seed=3))
    assert [t.id for t in again] == [t.id for t in generated["airline"]]
    path = save_tasks(tmp_path / "t.json", again)
    assert [t.model_dump() for t in load_tasks(path)] == [t.model_dump() for t in again]


def test_graph_links_ids_to_parameters() -> None:
    graph = build_graph(load_runtime("shop"), random.Random(0))
    edges = {(e["from"], e["to"], e["param"]) for e in graph.summary()["edge_list"]}
    assert ("find_customer", "list_orders", "customer_id") in edges
    assert ("list_orders", "get_order", "order_id") in edges
    assert "ada@example.com" not in graph.pool.get("customer_id", [])


def test_oracle_solves_graph_tasks_over_mcp_and_a_wrong_answer_fails(generated: dict) -> None:
    tasks = generated["shop"]
    server = WorldServer(WorldRuntime(with_tasks(load_runtime("shop").world, tasks)))

    async def main() -> list[tuple[bool, bool]]:
        out = []
        async with Client(server.server) as client:
            ctl = EpisodeControl(client)
            listed = {t.id: t for t in (await ctl.tasks(token=os.environ["MCPWORLD_REGISTRY_TOKEN"])).tasks}
            for task in tasks:
                info = listed[task.id]
                started = await ctl.start(task.id)
                for step in info.solution:
                    assert not (await ctl.call(started.episode, step.name, step.arguments)).is_error
                good = (await ctl.verify(started.episode, info.answer)).verdict.passed
                bad = (await ctl.verify(started.episode, "I don't know.")).verdict.passed
                out.append((good, bad))
        return out

    assert anyio.run(main) == [(True, False)] * len(tasks)


def test_programmatic_tasks_with_verifier_scripts() -> None:
    tasks = anyio.run(lambda: programmatic_tasks(load_runtime("shop"), 3, seed=1))
    assert tasks, "no programmatic task found in shop"
    runtime = WorldRuntime(with_tasks(load_runtime("shop").world, tasks, replace=True))
    for task in tasks:
        assert task.check.type == "script" and "for row in data" in task.check.script
        expected = task.meta["expected"]
        assert outcome(runtime, task.id, task.solution, task.answer).passed
        assert not outcome(runtime, task.id, [], None).passed
        assert not outcome(runtime, task.id, task.solution, f"It is {expected + 1}").passed
        rows = task.check.data["rows"]
        assert 2 <= len(rows) and all(len(r) <= 2 for r in rows)


def test_a_broken_verifier_script_fails_closed() -> None:
    spin = ScriptCheck(script="def verify(answer, data):\n    while True:\n        pass\n", data={})
    check = script_check(spin, "anything")
    assert not check.passed and "verifier failed" in check.detail
    raising = ScriptCheck(script="def verify(answer, data):\n    return data['missing']\n", data={})
    assert not script_check(raising, "x").passed


def test_model_written_questions_fall_back_when_unusable() -> None:
    assert leaks("The order O1002 is delivered", {"delivered", "zzz"}) == ["delivered"]
    good = {"content": '```json\n{"question": "Which status does my latest flight have?", '
                       '"rubric": ["calls the right tools", "states the status"]}\n```'}
    with serve(ReplayLLM({"[synth:question]": [good]}), free_port()) as url:
        tasks = anyio.run(lambda: graph_tasks(load_runtime("airline"), 2, seed=5,
                                              client=ChatClient(base_url=url, model="m")))
    assert tasks and all(t.meta["question_by"] == "model" for t in tasks)
    assert tasks[0].instruction == "Which status does my latest flight have?"
    with serve(ReplayLLM({"[synth:question]": [{"content": "no json here"}]}), free_port()) as url:
        fallback = anyio.run(lambda: graph_tasks(load_runtime("airline"), 2, seed=5,
                                                 client=ChatClient(base_url=url, model="m")))
    assert fallback and all(t.meta["question_by"] == "template" for t in fallback)


def test_graph_tasks_cli(tmp_path: Path) -> None:
    out = tmp_path / "bank.json"
    result = CliRunner().invoke(synth_group, ["graph-tasks", "bank", "-n", "3", "--seed", "2", "--programmatic", "1",
                                              "-o", str(out)])
    assert result.exit_code == 0, result.output
    tasks = load_tasks(out)
    assert 1 <= len(tasks) <= 4 and {t.world for t in tasks} == {"bank"}
    unknown = CliRunner().invoke(synth_group, ["graph-tasks", "no-such-world"])
    assert unknown.exit_code != 0 and "no world named" in unknown.output


def test_a_model_may_add_edges_between_real_tools_only() -> None:
    from mcpworld.servers.synth.graph import add_model_edges

    runtime = load_runtime("shop")
    graph = build_graph(runtime, random.Random(0))
    proposed = [{"from": "get_product", "field": "name", "to": "search_products", "param": "query"},
                {"from": "get_product", "field": "x", "to": "no_such_tool", "param": "query"},
                {"from": "get_order", "field": "x", "to": "get_product", "param": "not_a_param"}]
    reply = {"content": "```json\n" + json.dumps(proposed) + "\n```"}
    with serve(ReplayLLM({"[synth:edges]": [reply]}), free_port()) as url:
        added = anyio.run(lambda: add_model_edges(ChatClient(base_url=url, model="m"), runtime.world, graph))
    assert added == 1
    link = next(lk for lk in graph.edges["get_product"]["search_products"] if lk.by_model)
    assert (link.param, link.field) == ("query", "name")
