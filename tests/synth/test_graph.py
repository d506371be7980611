"""Tool-graph and programmatic tasks on catalog worlds, offline: connected, reproducible, typed, audited.

Every generated task carries a typed answer and survived the reward-hacking audit; these tests check that
from the outside too: a dump of the database submitted as the answer, a list of every candidate, a wrong value
or no submission never passes, while the reference and every accepted form of the answer do.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from mcpworld.core.llm import ChatClient
from mcpworld.core.llm_replay import ReplayLLM, serve
from mcpworld.core.models import ToolCall
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.testing import free_port
from mcpworld.synth.cli import synth_group
from mcpworld.synth.tasks.graph import build_graph, canonical, graph_tasks, honest, leaks
from mcpworld.synth.tasks.programmatic import TEMPLATE, programmatic_tasks, run_script
from mcpworld.synth.tasks.taskspec import AnswerCheck, Dropped, SynthTask, load_tasks, save_tasks, with_tasks
from mcpworld.worlds.answers import Count, Entities, Number, accepted_forms, reference_submission
from mcpworld.worlds.audit import audit
from mcpworld.worlds.loader import CATALOG_DIR, load_world
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.server import WorldServer
from mcpworld.worlds.world import World

WORLDS = ["airline", "shop"]


def base(name: str) -> World:
    """A catalog world without its own tasks: synthesis must not depend on them."""
    return with_tasks(load_world(CATALOG_DIR / name), [], replace=True)


@pytest.fixture(scope="module")
def generated() -> dict[str, list[SynthTask]]:
    return {name: anyio.run(lambda: graph_tasks(base(name), 6, seed=3)) for name in WORLDS}


@pytest.fixture(scope="module")
def programmatic() -> dict[str, list[SynthTask]]:
    return {name: anyio.run(lambda: programmatic_tasks(base(name), 4, seed=1)) for name in WORLDS}


def served(name: str, tasks: list[SynthTask]) -> WorldRuntime:
    return WorldRuntime(with_tasks(base(name), tasks, replace=True))


def outcome(runtime: WorldRuntime, task_id: str, calls: list, submission: object = None):
    """`calls`, then `submission` through submit_answer (none when None), judged as an agent's episode."""
    episode = runtime.fork(task_id)
    for call in calls:
        assert runtime.call(episode, call.name, call.arguments).error is None
    if submission is not None:
        runtime.call(episode, "submit_answer", {"answer": submission})
    verdict = runtime.verify(episode, None)
    episode.close()
    return verdict


def right(task: SynthTask) -> object:
    return reference_submission(task.check.parts)


def dumps(runtime: WorldRuntime) -> list[str]:
    """Answers that dump the starting database: each column's values (as many as the cap allows), and all."""
    rows = runtime.initial_rows(runtime.template(None))
    out, everything = [], []
    cap = runtime.world.max_answer_chars
    for table in sorted(rows):
        columns = list(next(iter(rows[table].values()), {}))
        for column in columns:
            values = list(dict.fromkeys(str(r[column]) for r in rows[table].values() if r[column] is not None))
            everything += values
            text = ""
            for v in values:
                if len(text) + len(v) + 2 > cap:
                    break
                text = f"{text}, {v}" if text else v
            if text:
                out.append(text)
    return [*out, ", ".join(dict.fromkeys(everything))]


def num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}".rstrip("0")


def candidates(runtime: WorldRuntime, task_id: str, part: Entities) -> list[str]:
    if isinstance(part.among, list):
        return part.among
    return runtime.column_values(runtime.template(runtime.tasks[task_id]), part.among)


@pytest.mark.parametrize("name", WORLDS)
def test_graph_tasks_are_connected_typed_and_honest(generated: dict, name: str) -> None:
    tasks = generated[name]
    assert len(tasks) >= 4, [t.instruction for t in tasks]
    runtime = served(name, tasks)
    assert any(len(t.solution) >= 2 for t in tasks)
    for task in tasks:
        assert task.kind == "answer" and isinstance(task.check, AnswerCheck) and task.check.parts
        assert runtime.tasks[task.id].expect == task.check.parts and runtime.tasks[task.id].verify is None
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
        for part in task.check.parts:
            if isinstance(part, Entities):
                assert part.expected[0][0].lower() not in task.instruction.lower()
                assert part.among, task.id  # wrong candidates to tell a right answer from a dump
        assert len(task.answer) <= 80
        assert outcome(runtime, task.id, task.solution, right(task)).passed
        assert not outcome(runtime, task.id, [], None).passed
        assert not outcome(runtime, task.id, task.solution, None).passed  # the reads alone are no answer
        assert task.rubric and task.meta["question_by"] == "template"


@pytest.mark.parametrize("name", WORLDS)
def test_no_dump_of_the_database_passes_any_task(generated: dict, programmatic: dict, name: str) -> None:
    tasks = generated[name] + programmatic[name]
    runtime = served(name, tasks)
    answers = dumps(runtime)
    for task in tasks:
        for answer in (a for a in answers if ", " in a):  # no calls, several values of a column (one alone is a
            # constant guess: the audit's chance levels count those) or everything the database holds
            assert not outcome(runtime, task.id, [], answer).passed, (task.id, answer[:120])
            assert not outcome(runtime, task.id, [], answer.split(", ")).passed, (task.id, answer[:120])
        # the reference's own reads, dumped whole, are no answer either (nor as prose: prose is not judged)
        episode = runtime.fork(task.id)
        seen = [json.dumps(runtime.call(episode, s.name, s.arguments).value, default=str) for s in task.solution]
        runtime.call(episode, "submit_answer", {"answer": "\n".join(seen)})
        assert not runtime.verify(episode, "\n".join(seen)).passed, task.id
        episode.close()


@pytest.mark.parametrize("name", WORLDS)
def test_reference_and_accepted_forms_pass_wrong_values_fail(generated: dict, programmatic: dict,
                                                             name: str) -> None:
    tasks = generated[name] + programmatic[name]
    runtime = served(name, tasks)
    checked = 0
    for task in tasks:
        parts = task.check.parts
        if len(parts) != 1:
            continue
        part = parts[0]
        for form in accepted_forms(parts):
            assert outcome(runtime, task.id, task.solution, form).passed, (task.id, form)
        checked += 1
        if isinstance(part, (Count, Number)):
            wrong: list[object] = [part.value + 1, part.value - 1, f"{num(part.value)} or {num(part.value - 1)}"]
        elif isinstance(part, Entities):
            good = part.expected[0][0]
            other = next(c for c in candidates(runtime, task.id, part) if c.lower() != good.lower())
            wrong = [other, [good, other], f"Either {good} or {other}", f"not {good}"]
        else:
            continue
        for value in wrong:
            assert not outcome(runtime, task.id, task.solution, value).passed, (task.id, value)
    assert checked >= 3


@pytest.mark.parametrize("name", WORLDS)
def test_programmatic_tasks_compute_a_typed_number(programmatic: dict, name: str) -> None:
    tasks = programmatic[name]
    assert tasks, f"no programmatic task found in {name}"
    runtime = served(name, tasks)
    for task in tasks:
        (part,) = task.check.parts
        expected = task.meta["expected"]
        assert isinstance(part, Count if "count of" in task.meta["computation"] else Number)
        assert part.value == pytest.approx(expected)
        assert "for row in data" in task.meta["script"] and task.meta["computed_by"] == "template"
        assert outcome(runtime, task.id, task.solution, right(task)).passed
        assert not outcome(runtime, task.id, [], None).passed
        assert not outcome(runtime, task.id, task.solution, expected + 1).passed
        # the old hole: a script that accepted ANY listed number. No other number the reads show passes.
        episode = runtime.fork(task.id)
        rows = runtime.call(episode, task.solution[0].name, task.solution[0].arguments).value
        episode.close()
        for value in sorted({float(v) for v in _numbers_in(rows)} | {float(expected) + 1, 0.0}):
            if abs(value - expected) > 0.005:
                assert not outcome(runtime, task.id, task.solution, value).passed, (task.id, value)
        assert not outcome(runtime, task.id, task.solution, f"{num(expected)}, or perhaps {num(expected + 2)}").passed


def _numbers_in(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [value]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers_in(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers_in(v)]
    return []


@pytest.mark.parametrize("name", WORLDS)
def test_audit_finds_no_wrong_pass_in_what_synthesis_returns(generated: dict, programmatic: dict, name: str) -> None:
    tasks = generated[name] + programmatic[name]
    report = audit(served(name, tasks))
    assert report.tasks and report.ok, [(f.task, f.policy, f.attempt, f.detail) for f in report.failures]
    wrong = [row for row in report.table() if not row["expected_pass"]]
    assert wrong and all(row["total"].startswith("0/") for row in wrong)
    must = {row["policy"]: row["total"] for row in report.table() if row["expected_pass"]}
    assert must["reference"] == f"{len(tasks)}/{len(tasks)}"


def test_honest_drops_what_a_wrong_policy_passes_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    world = base("shop")
    runtime = WorldRuntime(world)
    rows = runtime.initial_rows(runtime.template(None))["product"]
    price = rows["P101"]["price"]
    good = SynthTask(id="t-good", instruction="Call `get_product` with product_id 'P101'. What is its price?",
                     solution=[{"name": "get_product", "arguments": {"product_id": "P101"}}],
                     answer=f"The price is {price}.", check=AnswerCheck(parts=[Number(value=price)]))
    # an entity without wrong candidates: kept now, since a typed answer is one value, never a dump of the row
    loose = SynthTask(id="t-loose", instruction="Call `get_product` with product_id 'P101'. What is its name?",
                      solution=[{"name": "get_product", "arguments": {"product_id": "P101"}}],
                      answer=f"It is {rows['P101']['name']}.",
                      check=AnswerCheck(parts=[Entities(expected=[[rows["P101"]["name"]]])]))
    wrong = good.model_copy(update={"id": "t-wrong", "solution": [ToolCall(name="get_product",
                                                                        arguments={"product_id": "P999"})]})
    dropped: list[Dropped] = []
    with caplog.at_level("WARNING", logger="mcpworld.synth"):
        kept = honest(world, [good, loose, wrong], dropped)
    assert [t.id for t in kept] == ["t-good", "t-loose"]
    why = {d.task: d for d in dropped}
    assert set(why) == {"t-wrong"}
    assert "P999" in why["t-wrong"].reason and why["t-wrong"].policy is None
    assert "t-wrong" in caplog.text


def test_same_seed_same_tasks_and_files_round_trip(generated: dict, tmp_path: Path) -> None:
    again = anyio.run(lambda: graph_tasks(base("airline"), 6, seed=3))
    assert [t.id for t in again] == [t.id for t in generated["airline"]]
    path = save_tasks(tmp_path / "t.json", again)
    assert [t.model_dump() for t in load_tasks(path)] == [t.model_dump() for t in again]
    stored = json.loads(path.read_text())[0]["check"]
    assert stored["type"] == "answer" and stored["parts"][0]["type"] in ("count", "number", "entities", "date")


def test_retired_checks_are_refused(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps([{"id": "g", "instruction": "q", "check": {"type": "mentions", "values": ["x"]}}]))
    with pytest.raises(ValueError, match="retired 'mentions' check"):
        load_tasks(old)
    short = tmp_path / "short.json"
    short.write_text(json.dumps([{"id": "g", "instruction": "q", "answer": "2",
                                  "expect": [{"type": "count", "value": 2}]}]))
    assert load_tasks(short)[0].to_task().expect == [Count(value=2)]
    with pytest.raises(ValueError, match="typed answer"):
        SynthTask(id="g", instruction="q")


def test_graph_links_ids_to_parameters() -> None:
    graph = build_graph(WorldRuntime(base("shop")), random.Random(0))
    edges = {(e["from"], e["to"], e["param"]) for e in graph.summary()["edge_list"]}
    assert ("find_customer", "list_orders", "customer_id") in edges
    assert ("list_orders", "get_order", "order_id") in edges
    assert "ada@example.com" not in graph.pool.get("customer_id", [])


def test_oracle_solves_graph_tasks_over_mcp_and_a_wrong_answer_fails(generated: dict) -> None:
    tasks = generated["shop"]
    server = WorldServer(served("shop", tasks))

    async def main() -> list[tuple[bool, bool]]:
        out = []
        async with Client(server.server) as client:
            ctl = EpisodeControl(client)
            listed = {t.id: t for t in (await ctl.tasks(token=os.environ["MCPWORLD_REGISTRY_TOKEN"])).tasks}
            for task in tasks:
                info = listed[task.id]
                started = await ctl.start(task.id)
                for step in info.solution:  # the reads, then the typed answer
                    assert not (await ctl.call(started.episode, step.name, step.arguments)).is_error
                good = (await ctl.verify(started.episode, info.answer)).verdict.passed
                wrong = await ctl.start(task.id)
                for step in info.solution[:-1]:  # the reads, then prose only: nothing typed was submitted
                    await ctl.call(wrong.episode, step.name, step.arguments)
                bad = (await ctl.verify(wrong.episode, info.answer)).verdict.passed
                out.append((good, bad))
        return out

    assert anyio.run(main) == [(True, False)] * len(tasks)


def test_model_computations_are_checked_against_the_trusted_one() -> None:
    spec = {"cat": "status", "val": "a", "num": "n", "agg": "sum", "description": "sum of n over rows with status a"}
    rows = [{"status": "a", "n": 2}, {"status": "b", "n": 5}, {"status": "a", "n": 3}]
    template = TEMPLATE.format(description=spec["description"], cat="status", val="a", num="n", agg="sum")
    assert run_script(template, rows) == (5.0, None)
    spin, error = run_script("def compute(data):\n    while True:\n        pass\n", rows)
    assert spin is None and "failed" in error
    raising, error = run_script("def compute(data):\n    return data['missing']\n", rows)
    assert raising is None and "KeyError" in error

    def made_with(*scripts: str) -> SynthTask:
        replies = [{"content": f"```python\n{s}```"} for s in scripts]
        with serve(ReplayLLM({"[synth:computation]": replies}), free_port()) as url:
            tasks = anyio.run(lambda: programmatic_tasks(base("shop"), 1, seed=1,
                                                         client=ChatClient(base_url=url, model="m")))
        assert len(tasks) == 1
        return tasks[0]

    # a script that hard-codes the value agrees on the real rows, but not on a variant of them
    expected = made_with("def compute(data):\n    return {'expected': 0}\n").meta["expected"]
    hard_coded = f"def compute(data):\n    return {{'expected': {expected!r}}}\n"
    ignores_condition = "def compute(data):\n    return {'expected': len(data['rows'])}\n"
    task = made_with(hard_coded, ignores_condition)
    assert task.meta["computed_by"] == "template"  # both model scripts were caught, and the template used
    c = task.meta["condition"]
    honest_script = TEMPLATE.format(description="mine", cat=c["cat"], val=c["val"], num=c["num"] or "", agg=c["agg"])
    again = made_with(honest_script)
    assert again.meta["computed_by"] == "model" and again.check == task.check and again.meta["script"] == honest_script


def test_model_written_questions_fall_back_when_unusable() -> None:
    assert leaks("The order O1002 is delivered", {"delivered", "zzz"}) == ["delivered"]
    good = {"content": '```json\n{"question": "What does my latest flight cost, or how many seats are left?", '
                       '"rubric": ["calls the right tools", "states the value"]}\n```'}
    with serve(ReplayLLM({"[synth:question]": [good]}), free_port()) as url:
        tasks = anyio.run(lambda: graph_tasks(base("airline"), 2, seed=5,
                                              client=ChatClient(base_url=url, model="m")))
    assert tasks and all(t.meta["question_by"] == "model" for t in tasks)
    assert tasks[0].instruction == "What does my latest flight cost, or how many seats are left?"
    with serve(ReplayLLM({"[synth:question]": [{"content": "no json here"}]}), free_port()) as url:
        fallback = anyio.run(lambda: graph_tasks(base("airline"), 2, seed=5,
                                                 client=ChatClient(base_url=url, model="m")))
    assert fallback and all(t.meta["question_by"] == "template" for t in fallback)


def test_graph_tasks_cli(tmp_path: Path) -> None:
    out = tmp_path / "bank.json"
    result = CliRunner().invoke(synth_group, ["graph-tasks", "bank", "-n", "3", "--seed", "2", "--programmatic", "1",
                                              "-o", str(out)])
    assert result.exit_code == 0, result.output
    tasks = load_tasks(out)
    assert 1 <= len(tasks) <= 4 and {t.world for t in tasks} == {"bank"}
    assert all(t.check and t.check.parts for t in tasks)
    unknown = CliRunner().invoke(synth_group, ["graph-tasks", "no-such-world"])
    assert unknown.exit_code != 0 and "no world named" in unknown.output


def test_graph_tasks_cli_says_what_it_dropped() -> None:
    result = CliRunner().invoke(synth_group, ["graph-tasks", "airline", "-n", "4", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output[result.output.index("["):])  # the tasks; with typed answers none is dropped
    assert "wrong policy" not in result.output


def test_a_model_may_add_edges_between_real_tools_only() -> None:
    from mcpworld.synth.tasks.graph import add_model_edges

    runtime = WorldRuntime(base("shop"))
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
