"""Programmatic tasks: conditions and loops over tool results, answered with one typed number.

From a real list a read-only tool returned ("the orders of customer CU04"), pick a condition on one field
and an aggregate over another ("sum total over orders with status delivered"). A small Python script
(templated, or written by a model) loops over the captured rows, applies the condition and COMPUTES the
expected value, `{"expected": value}`; it runs in a limited worker, and its value must equal the trusted
computation made here (on the rows and on a variant of them) or it is rejected. The task then carries the
value as a typed part (`Count` or `Number`): the runtime judges the agent's answer with it, so an answer
that lists several numbers fails. Judging an episode needs no script and no worker; the script is kept in
the task's `meta` as provenance.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from typing import Any

from mcpworld.core.llm import ChatClient
from mcpworld.synth.chat import clip, extract_block, retry_message
from mcpworld.synth.sandbox.worker import Limits, shared_worker
from mcpworld.synth.tasks.graph import honest
from mcpworld.synth.tasks.names import NOISE_FIELDS, looks_like_id, singular, snake, tool_noun
from mcpworld.synth.tasks.results import SELECTOR_FIELDS, answer_text, canonical, occurrences
from mcpworld.synth.tasks.taskspec import AnswerCheck, Dropped, SynthTask
from mcpworld.synth.tasks.toolgraph import build_graph, call_once
from mcpworld.worlds.answers import AnswerPart, Count, Number
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.world import World

SCRIPT_LIMITS = Limits(cpu_s=2, wall_s=5, memory_mb=512)
AGGREGATES = ("sum", "count", "max", "min")

TEMPLATE = '''def compute(data):
    # {description}
    values = []
    for row in data["rows"]:
        if str(row.get({cat!r})) == {val!r}:
            values.append(row.get({num!r}))
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if {agg!r} == "count":
        return {{"expected": len(values)}}
    if not numbers:
        return {{"expected": None}}
    if {agg!r} == "sum":
        expected = sum(numbers)
    elif {agg!r} == "max":
        expected = max(numbers)
    else:
        expected = min(numbers)
    return {{"expected": round(expected, 2)}}
'''


def run_script(script: str, rows: list[dict[str, Any]]) -> tuple[float | None, str | None]:
    """Run a computation script on `rows` in a limited worker: (its expected value, or None and why)."""
    result = shared_worker(SCRIPT_LIMITS).run("mcpworld.synth.sandbox.jobs:run_computation",
                                              {"script": script, "data": {"rows": rows}})
    if not result.ok:
        return None, f"the script failed: {result.error}"
    value = (result.value or {}).get("expected")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, f"compute(data) returned expected={value!r}; it must be a number"
    return float(value), None


def _lists(result: Any, tool: str, min_rows: int = 3) -> list[tuple[str, list[dict[str, Any]]]]:
    """Lists of at least `min_rows` objects (with their container names) inside a result."""
    found: dict[int, tuple[str, list[dict[str, Any]]]] = {}
    for occ in occurrences(result, tool_noun(tool)):
        if occ.siblings and len(occ.siblings) >= min_rows and all(isinstance(s, dict) for s in occ.siblings):
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
    """(field, value) conditions that match some rows but not all.

    A field whose values are all different is a name, not a category; in a list of two rows, a short one-word
    field (a fare, a kind, a flag) still counts.
    """
    keys = set().union(*(r.keys() for r in rows))
    out = []
    for key in sorted(keys):
        values = [r.get(key) for r in rows]
        if key in NOISE_FIELDS or looks_like_id(key, None) or not all(isinstance(v, (str, bool)) for v in values):
            continue
        counts = Counter(str(v) for v in values)
        pair = len(rows) == 2 and key not in SELECTOR_FIELDS and all(re.fullmatch(r"[\w-]{1,20}", c) for c in counts)
        if 2 <= len(counts) < len(rows) or (pair and len(counts) == 2):
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


def computation_messages(world: World, spec: dict[str, Any], rows_sample: list[Any]) -> list[dict[str, Any]]:
    """The prompt for a `compute(data)` script that loops over the rows and returns the expected value."""
    user = "\n".join([
        f"[synth:computation] {world.name}: {spec['question']}", "",
        "Rows (sample): " + clip(rows_sample, 1500),
        "Computation: " + json.dumps({k: v for k, v in spec.items() if k != 'question'}, default=str), "",
        "Write a Python function `compute(data)` where data = {\"rows\": [...]} holds every row. It must loop "
        "over the rows, apply the condition, and return {\"expected\": number}: the value the question asks for "
        "(a count as an integer, other numbers rounded to 2 decimals). It is run on these rows and on others, and "
        "must agree with an independent computation on all of them. Reply with one ```python block.",
    ])
    return [{"role": "system", "content": "You write exact, small Python computations."},
            {"role": "user", "content": user}]


async def _script(client: ChatClient | None, world: World, spec: dict[str, Any], rows: list[dict[str, Any]],
                  expected: float) -> tuple[str, str]:
    """A script that computes `expected` from the rows (and agrees on a variant of them); model first."""
    template = TEMPLATE.format(description=spec["description"], cat=spec["cat"], val=spec["val"],
                               num=spec["num"] or "", agg=spec["agg"])
    if client is not None:
        messages = computation_messages(world, spec, rows[:5])
        for _ in range(2):
            try:
                reply = (await client.complete(messages)).message.get("content") or ""
            except Exception:
                break
            script = extract_block(reply)
            problem = _script_problem(script, rows, spec)
            if problem is None:
                return script, "model"
            messages = [*messages, {"role": "assistant", "content": reply}, retry_message(problem)]
    problem = _script_problem(template, rows, spec)
    if problem is not None:
        raise ValueError(f"the templated computation failed its own checks: {problem}")
    return template, "template"


def _variant(rows: list[dict[str, Any]], spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows reversed, plus one more matching row whose number moves every aggregate: a script that
    hard-codes its answer, or ignores the condition, disagrees with the trusted computation here."""
    first = next(r for r in rows if str(r.get(spec["cat"])) == spec["val"])
    extra = dict(first)
    num = spec["num"]
    if num and isinstance(first.get(num), (int, float)) and not isinstance(first.get(num), bool):
        extra[num] = first[num] - 1000 if spec["agg"] == "min" else first[num] + 1000
    return [*rows[::-1], extra]


def _script_problem(script: str, rows: list[dict[str, Any]], spec: dict[str, Any]) -> str | None:
    """Why a script's computation can't be trusted (None: it agrees with ours on the rows and on a variant)."""
    for label, data in (("the rows", rows), ("a variant of the rows", _variant(rows, spec))):
        want = _expected(data, spec["cat"], spec["val"], spec["num"], spec["agg"])
        got, error = run_script(script, data)
        if error is not None:
            return f"on {label}: {error}"
        if want is None or got is None or abs(got - want) > 0.005:
            return f"on {label}: compute(data) returned expected={got}, but the {spec['agg']} is {want}"
    return None


def typed_expected(agg: str, expected: float) -> AnswerPart:
    """The typed part an answer is judged by: a whole `Count`, or a `Number` (money and the like)."""
    return Count(value=int(expected)) if agg == "count" else Number(value=expected)


async def programmatic_tasks(world: World | WorldRuntime, n: int = 5, seed: int = 0, *,
                             client: ChatClient | None = None, split: str = "train",
                             boost: dict[str, float] | None = None,
                             dropped: list[Dropped] | None = None) -> list[SynthTask]:
    """Up to `n` honest tasks that need a loop and a condition over one tool's list result.

    Candidates are screened like graph tasks (`honest`: validation and the audit); dropped ones are
    appended to `dropped`, and more candidates are tried until `n` are kept.
    """
    runtime = world if isinstance(world, WorldRuntime) else WorldRuntime(world)
    rng = random.Random(seed)
    graph = build_graph(runtime, rng)
    candidates: list[Any] = []
    for min_rows in (3, 2):  # lists of two rows only where a world's tools never return more
        for probe in graph.probes:
            for container, rows in _lists(probe.result, probe.tool, min_rows):
                for cat, val in _categorical(rows):
                    for num in [None, *_numeric(rows)]:
                        for agg in (("count",) if num is None else AGGREGATES[:1] + AGGREGATES[2:]):
                            candidates.append((probe, container, rows, cat, val, num, agg))
        if candidates:
            break
    rng.shuffle(candidates)
    distinct = {id(c[2]): {} for c in candidates}
    for c in candidates:
        distinct[id(c[2])].setdefault(c[3], len({str(r.get(c[3])) for r in c[2]}))
    candidates.sort(key=lambda c: (-(boost or {}).get(c[0].tool, 1.0), distinct[id(c[2])][c[3]] > 4))
    kept: list[SynthTask] = []
    seen: set[str] = set()
    pending = iter(candidates)
    while len(kept) < n:
        batch: list[SynthTask] = []
        for probe, container, rows, cat, val, num, agg in pending:
            expected = _expected(rows, cat, val, num, agg)
            key = canonical([probe.tool, probe.args, cat, val, num, agg])
            per_tool = sum(1 for t in [*kept, *batch] if t.solution[0].name == probe.tool)
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
            spec = {"question": question, "description": description, "cat": cat, "val": val, "num": num,
                    "agg": agg}
            script, by = await _script(client, runtime.world, spec, slim, expected)
            digest = hashlib.sha1(key.encode()).hexdigest()[:10]
            batch.append(SynthTask(
                id=f"prog-{digest}", instruction=question, kind="answer",
                solution=[{"name": probe.tool, "arguments": probe.args}],  # type: ignore[list-item]
                answer=f"The answer is {shown}.",
                rubric=[f"calls {probe.tool}", f"keeps only rows with {cat} == {val!r}",
                        f"computes the {agg}: {shown}"],
                split=split, difficulty="medium",  # type: ignore[arg-type]
                check=AnswerCheck(parts=[typed_expected(agg, expected)]), source="programmatic",
                world=runtime.world.name,
                meta={"computed_by": by, "expected": expected, "computation": description,
                      "condition": {k: spec[k] for k in ("cat", "val", "num", "agg")}, "script": script},
            ))
            if len(kept) + len(batch) >= n:
                break
        if not batch:
            break
        kept += honest(runtime.world, batch, dropped)
    return kept
