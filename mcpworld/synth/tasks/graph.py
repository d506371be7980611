"""Tool-graph task synthesis (Agent-World): chains of tools whose parameters really connect, run for real.

1. Build a graph from the world's tool schemas: an edge A -> B when a field A returns (seen by calling A
   on a fork, or read from the SQLModel columns A is annotated to return) has the name of a parameter of B
   (`customer_id`, or `id` inside a `customer`). A model may add edges when one is configured.
2. Draw weighted random walks of 2-4 read-only tools, executing each step on a fork and feeding the real
   value forward; errors, empty and repeated results end the walk.
3. Write a question that does not leak what the chain finds (templated offline, or by a model with a leak
   check), a short reference answer and a rubric. The answer is typed (`Task.expect`): a `Count`/`Number`,
   a `DateAnswer`, or `Entities` whose wrong candidates are the other rows' values of the field and the
   database column it comes from.
4. Replay the chain on a clean fork with another seed and keep the task only if every step agrees, then
   check every task as `mcpworld world validate` does and play the reward-hacking audit on it (`mcpworld
   world audit`): a task that any attack passes, or whose reference or accepted answer forms fail, is dropped.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from mcpworld.core.llm import ChatClient
from mcpworld.synth.chat import parse_json
from mcpworld.synth.tasks.questions import answer_choices, leaks, model_question, template_question, typed_answer
from mcpworld.synth.tasks.results import answer_text, canonical, occurrences
from mcpworld.synth.tasks.taskspec import AnswerCheck, Dropped, SynthTask, audit_problems, report_dropped, with_tasks
from mcpworld.synth.tasks.toolgraph import Link, ToolGraph, build_graph, call_once, fill_args
from mcpworld.synth.tasks.walks import Chain, replays, walk
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.world import World

__all__ = ["Dropped", "add_model_edges", "answer_text", "build_graph", "call_once", "canonical", "fill_args",
           "graph_tasks", "honest", "leaks", "occurrences"]


def honest(runtime_world: World, tasks: list[SynthTask], dropped: list[Dropped] | None = None) -> list[SynthTask]:
    """The tasks that validate and survive the reward-hacking audit; the others are dropped, saying why.

    A task is dropped when `world validate` finds a problem with it (its reference fails, a no-op passes), or
    when the audit finds a wrong policy that passes it (a DB dump, a blind crawler, a wrong number...) or a
    reference or paraphrase that fails. Each drop is logged as a warning and appended to `dropped`.
    """
    from mcpworld.worlds.validate import task_problems

    if not tasks:
        return []
    runtime = WorldRuntime(with_tasks(runtime_world, tasks, replace=True))
    problems: dict[str, Dropped] = {}
    for t in tasks:
        found = task_problems(runtime, runtime.tasks[t.id], "")
        if found:
            problems[t.id] = Dropped(t.id, "; ".join(f"{p.field}: {p.message}" for p in found))
    audited = [t.id for t in tasks if t.id not in problems]
    problems.update(audit_problems(runtime, audited) if audited else {})
    lost = [problems[t.id] for t in tasks if t.id in problems]
    report_dropped(runtime_world.name, lost)
    if dropped is not None:
        dropped += lost
    return [t for t in tasks if t.id not in problems]


async def graph_tasks(world: World | WorldRuntime, n: int = 20, seed: int = 0, *, client: ChatClient | None = None,
                      split: str = "train", boost: dict[str, float] | None = None, guidance: str | None = None,
                      model_edges: bool = False, max_walks: int | None = None, min_steps: int = 2,
                      dropped: list[Dropped] | None = None) -> list[SynthTask]:
    """Up to `n` reproducible, honest answer tasks drawn from tool chains of `world`.

    Candidates are made in batches and screened by `honest` (validation and the audit); walking goes on
    until `n` are kept or the walks run out. Tasks that were dropped are appended to `dropped`.
    `boost` weights tools (the arena's weak spots); `guidance` goes to the model's question prompt.
    """
    runtime = world if isinstance(world, WorldRuntime) else WorldRuntime(world)
    world = runtime.world
    rng = random.Random(seed)
    graph = build_graph(runtime, rng)
    if client is not None and model_edges:
        await add_model_edges(client, world, graph)
    boost = boost or {}
    kept: list[SynthTask] = []
    seen: set[str] = set()
    ids: set[str] = set()
    walks = max_walks or n * 12
    while len(kept) < n and walks > 0:
        batch: list[SynthTask] = []
        while len(kept) + len(batch) < n and walks > 0:
            walks -= 1
            length = rng.choice([2, 2, 3, 3, 4]) if min_steps > 1 else 1
            chain = walk(graph, runtime, rng, length, boost)
            if chain is None or len(chain.steps) < min_steps or chain.signature in seen:
                continue
            seen.add(chain.signature)
            task = await _make_task(runtime, chain, rng, client, split, guidance)
            if task is not None and task.id not in ids:
                ids.add(task.id)
                batch.append(task)
        kept += honest(world, batch, dropped)
    if not kept and min_steps > 1:  # a world whose tools never connect still gets one-step questions
        return await graph_tasks(runtime, n, seed, client=client, split=split, boost=boost, guidance=guidance,
                                 max_walks=max_walks, min_steps=1, dropped=dropped)
    return kept


async def _make_task(runtime: WorldRuntime, chain: Chain, rng: random.Random, client: ChatClient | None,
                     split: str, guidance: str | None) -> SynthTask | None:
    for draft in answer_choices(chain, rng):
        parts = typed_answer(runtime, draft)
        if parts:
            break
    else:
        return None
    question, rubric = template_question(draft)
    if leaks(question, draft.secrets):
        return None
    written_by = "template"
    if client is not None:
        better = await model_question(client, runtime.world, draft, guidance)
        if better is not None:
            question, rubric = better
            written_by = "model"
    if not replays(runtime, chain):
        return None
    digest = hashlib.sha1((chain.signature + draft.answer_field).encode()).hexdigest()[:10]
    steps = len(chain.steps)
    noun = draft.answer_field.replace("_", " ")
    return SynthTask(
        id=f"graph-{digest}", instruction=question, kind="answer",
        solution=[{"name": s.tool, "arguments": s.args} for s in chain.steps],  # type: ignore[misc]
        answer=f"The {noun} is {', '.join(draft.answer_values)}.", rubric=rubric, split=split,  # type: ignore[arg-type]
        difficulty="easy" if steps <= 2 else "medium" if steps == 3 else "hard",
        check=AnswerCheck(parts=parts), source="graph", world=runtime.world.name,
        meta={"tools": [s.tool for s in chain.steps], "question_by": written_by},
    )


def edge_messages(world: World, graph: ToolGraph) -> list[dict[str, Any]]:
    """The prompt for dependencies between tools that their names alone do not show."""
    tools = [{"name": n.name, "description": n.description, "parameters": sorted(n.params),
              "returns": sorted(graph.outputs.get(n.name, set()))[:40]} for n in graph.nodes.values()]
    user = "\n".join([
        f"[synth:edges] {world.name}: {world.scenario}", "",
        json.dumps(tools, ensure_ascii=False, indent=1), "",
        "List dependencies between these tools: a value one tool returns (field) that another tool takes as a "
        "parameter (param), where the names alone do not show it. Reply with one ```json block: "
        '[{"from": tool, "field": output field, "to": tool, "param": parameter}]',
    ])
    return [{"role": "system", "content": "You analyse APIs."}, {"role": "user", "content": user}]


async def add_model_edges(client: ChatClient, world: World, graph: ToolGraph) -> int:
    """Let a model tag dependencies the names miss; only edges between known tools and params are kept."""
    try:
        completion = await client.complete(edge_messages(world, graph))
        proposed = parse_json(completion.message.get("content") or "")
    except Exception:
        return 0
    added = 0
    for edge in proposed if isinstance(proposed, list) else proposed.get("edges", []):
        a, b, param, out = edge.get("from"), edge.get("to"), edge.get("param"), edge.get("field")
        if a in graph.nodes and b in graph.nodes and a != b and param in graph.nodes[b].params and out:
            graph.edges.setdefault(a, {}).setdefault(b, []).append(Link(param, str(out), False, by_model=True))
            added += 1
    return added
