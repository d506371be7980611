"""Programmatic tasks: conditions and loops over tool results, checked by a generated verifier script.

From a real list a read-only tool returned ("the orders of customer CU04"), pick a condition on one field
and an aggregate over another ("sum total over orders with status delivered"). The verifier is a small
Python script (templated, or written by a model and then tested) that loops over the captured rows,
applies the condition and checks the number in the agent's answer. It always runs in a limited worker.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from typing import Any

from mcpworld.llm import ChatClient
from mcpworld.models import Check
from mcpworld.servers.envs.runtime import WorldRuntime
from mcpworld.servers.envs.world import World
from mcpworld.servers.synth import prompts
from mcpworld.servers.synth.graph import honest
from mcpworld.servers.synth.names import NOISE_FIELDS, looks_like_id, singular, snake, tool_noun
from mcpworld.servers.synth.results import answer_text, canonical, occurrences
from mcpworld.servers.synth.taskspec import ScriptCheck, SynthTask
from mcpworld.servers.synth.toolgraph import build_graph, call_once
from mcpworld.servers.synth.worker import Limits, shared_worker

VERIFIER_LIMITS = Limits(cpu_s=2, wall_s=5, memory_mb=512)
AGGREGATES = ("sum", "count", "max", "min")

TEMPLATE = '''def verify(answer, data):
    # {description}
    values = []
    for row in data["rows"]:
        if str(row.get({cat!r})) == {val!r}:
            values.append(row.get({num!r}))
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if {agg!r} == "count":
        expected = len(values)
    elif not numbers:
        return {{"passed": False, "expected": None}}
    elif {agg!r} == "sum":
        expected = sum(numbers)
    elif {agg!r} == "max":
        expected = max(numbers)
    else:
        expected = min(numbers)
    expected = round(expected, 2)
    stated = [float(x) for x in re.findall(r"-?\\d+(?:\\.\\d+)?", (answer or "").replace(",", ""))]
    return {{"passed": any(abs(x - expected) <= 0.01 for x in stated), "expected": expected}}
'''


def script_check(check: ScriptCheck, answer: str | None) -> Check:
    """Run a task's verifier script on the agent's answer, in a limited worker."""
    result = shared_worker(VERIFIER_LIMITS).run("mcpworld.servers.synth.jobs:run_verifier",
                                                {"script": check.script, "answer": answer, "data": check.data})
    name = check.description or "verifier script"
    if not result.ok:
        return Check(name=name, passed=False, detail=f"verifier failed: {result.error}")
    value = result.value or {}
    return Check(name=name, passed=bool(value.get("passed")),
                 detail="" if value.get("passed") else f"expected {value.get('expected')}")


def _lists(result: Any, tool: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """Lists of objects (with their container names) inside a result."""
    found: dict[int, tuple[str, list[dict[str, Any]]]] = {}
    for occ in occurrences(result, tool_noun(tool)):
        if occ.siblings and len(occ.siblings) >= 3 and all(isinstance(s, dict) for s in occ.siblings):
            found.setdefault(id(occ.siblings), (occ.container, occ.siblings))
    return list(found.values())


def _numeric(rows: list[dict[str, Any]]) -> list[str]:
    keys = set().union(*(r.keys() for r in rows))
    out = []
    for key in sorted(keys):
        values = [r.get(key) for r in rows]
        nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if key not in NOISE_FIELDS and not looks_like_id(key, None) and len(nums) >= 0.8 * len(rows) \
                and len(set(nums)) > 1:
            out.append(key)
    return out


def _categorical(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(field, value) conditions that match some rows but not all."""
    keys = set().union(*(r.keys() for r in rows))
    out = []
    for key in sorted(keys):
        values = [r.get(key) for r in rows]
        if key in NOISE_FIELDS or looks_like_id(key, None) or not all(isinstance(v, (str, bool)) for v in values):
            continue
        counts = Counter(str(v) for v in values)
        if 2 <= len(counts) < len(rows):
            out += [(key, v) for v, n in counts.items() if 1 <= n < len(rows) and len(v) <= 40]
    return out


def _expected(rows: list[dict[str, Any]], cat: str, val: str, num: str | None, agg: str) -> float | None:
    values = [r.get(num) if num else 1 for r in rows if str(r.get(cat)) == val]
    if agg == "count":
        return float(len(values))
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not numbers:
        return None
    return round({"sum": sum, "max": max, "min": min}[agg](numbers), 2)


def _question(tool: str, args: dict[str, Any], noun: str, cat: str, val: str, num: str | None, agg: str) -> str:
    given = ", ".join(f"{k} {v!r}" for k, v in args.items())
    call = f"Call `{tool}`" + (f" with {given}" if given else "")
    shown = val.lower() if val in ("True", "False") else repr(val)
    where = f"whose {cat.replace('_', ' ')} is {shown}"
    if agg == "count":
        return f"{call}. Going through every {noun} it lists, how many are there {where}?"
    phrase = {"sum": "total", "max": "largest", "min": "smallest"}[agg]
    return f"{call}. Looking only at the {noun}s it lists {where}, what is the {phrase} " \
           f"{num.replace('_', ' ')}?"  # type: ignore[union-attr]


async def _script(client: ChatClient | None, world: World, spec: dict[str, Any], rows: list[dict[str, Any]],
                  reference: str, expected: float) -> tuple[str, str]:
    """A verifier script that passes the reference and fails a no-op and a wrong number; model first."""
    template = TEMPLATE.format(description=spec["description"], cat=spec["cat"], val=spec["val"],
                               num=spec["num"] or "", agg=spec["agg"])
    if client is not None:
        messages = prompts.verifier_messages(world, spec, rows[:5])
        for _ in range(2):
            try:
                reply = (await client.complete(messages)).message.get("content") or ""
            except Exception:
                break
            script = prompts.extract_block(reply)
            problem = _script_problem(script, rows, reference, expected)
            if problem is None:
                return script, "model"
            messages = [*messages, {"role": "assistant", "content": reply}, prompts.retry_message(problem)]
    problem = _script_problem(template, rows, reference, expected)
    if problem is not None:
        raise ValueError(f"templated verifier failed its own checks: {problem}")
    return template, "template"


def _script_problem(script: str, rows: list[dict[str, Any]], reference: str, expected: float) -> str | None:
    check = ScriptCheck(script=script, data={"rows": rows})
    wrong = answer_text(round(expected * 2 + 7, 2))
    for answer, should in ((reference, True), (None, False), ("", False), (f"The answer is {wrong}.", False)):
        verdict = script_check(check, answer)
        if verdict.passed != should:
            return f"verify({answer!r}) returned passed={verdict.passed}, expected {should}: {verdict.detail}"
    return None


async def programmatic_tasks(world: World | WorldRuntime, n: int = 5, seed: int = 0, *,
                             client: ChatClient | None = None, split: str = "train",
                             boost: dict[str, float] | None = None) -> list[SynthTask]:
    """Up to `n` honest tasks that need a loop and a condition over one tool's list result."""
    runtime = world if isinstance(world, WorldRuntime) else WorldRuntime(world)
    rng = random.Random(seed)
    graph = build_graph(runtime, rng)
    candidates = []
    for probe in graph.probes:
        for container, rows in _lists(probe.result, probe.tool):
            for cat, val in _categorical(rows):
                for num in [None, *_numeric(rows)]:
                    for agg in (("count",) if num is None else AGGREGATES[:1] + AGGREGATES[2:]):
                        candidates.append((probe, container, rows, cat, val, num, agg))
    rng.shuffle(candidates)
    distinct = {id(c[2]): {} for c in candidates}
    for c in candidates:
        distinct[id(c[2])].setdefault(c[3], len({str(r.get(c[3])) for r in c[2]}))
    candidates.sort(key=lambda c: (-(boost or {}).get(c[0].tool, 1.0), distinct[id(c[2])][c[3]] > 4))
    tasks: list[SynthTask] = []
    seen: set[str] = set()
    for probe, container, rows, cat, val, num, agg in candidates:
        if len(tasks) >= n:
            break
        expected = _expected(rows, cat, val, num, agg)
        key = canonical([probe.tool, probe.args, cat, val, num, agg])
        per_tool = sum(1 for t in tasks if t.solution[0].name == probe.tool)
        if expected is None or key in seen or per_tool >= max(1, n // 2):
            continue
        seen.add(key)
        noun = singular(snake(container)).replace("_", " ") if container else tool_noun(probe.tool)
        question = _question(probe.tool, probe.args, noun, cat, val, num, agg)
        shown = answer_text(expected)
        if re.search(rf"(?<![\d.]){re.escape(shown)}(?![\d.])", question):
            continue
        if call_once(runtime, probe.tool, probe.args, seed=1) != probe.result:  # must replay identically
            continue
        keep = sorted({cat, *([num] if num else [])})
        slim = [{k: r.get(k) for k in keep} for r in rows]
        description = f"{agg} of {num or 'rows'} over {noun}s with {cat} == {val!r}".replace("\n", " ")
        reference = f"The answer is {shown}."
        spec = {"question": question, "description": description, "cat": cat, "val": val, "num": num, "agg": agg}
        script, by = await _script(client, runtime.world, spec, slim, reference, expected)
        digest = hashlib.sha1(key.encode()).hexdigest()[:10]
        tasks.append(SynthTask(
            id=f"prog-{digest}", instruction=question, kind="answer",
            solution=[{"name": probe.tool, "arguments": probe.args}],  # type: ignore[list-item]
            answer=reference, rubric=[f"calls {probe.tool}", f"keeps only rows with {cat} == {val!r}",
                                      f"computes the {agg}: {shown}"],
            split=split, difficulty="medium",  # type: ignore[arg-type]
            check=ScriptCheck(script=script, data={"rows": slim}, description=description,
                              unchanged=_unchanged(runtime, probe.tool, probe.args)),
            source="programmatic", world=runtime.world.name, meta={"verifier_by": by, "expected": expected},
        ))
    return honest(runtime.world, tasks)


def _unchanged(runtime: WorldRuntime, tool: str, args: dict[str, Any]) -> bool:
    episode = runtime.fork()
    try:
        runtime.call(episode, tool, args)
        return runtime.diff(episode).is_empty
    finally:
        episode.close()
