"""Tool-graph task synthesis (Agent-World): chains of tools whose parameters really connect, run for real.

1. Build a graph from the world's tool schemas: an edge A -> B when a field A returns (seen by calling A
   on a fork, or read from the SQLModel columns A is annotated to return) has the name of a parameter of B
   (`customer_id`, or `id` inside a `customer`). A model may add edges when one is configured.
2. Draw weighted random walks of 2-4 read-only tools, executing each step on a fork and feeding the real
   value forward; errors, empty and repeated results end the walk.
3. Write a question that does not leak what the chain finds (templated offline, or by a model with a leak
   check), a reference answer and a rubric; the verifier checks the answer mentions the final value(s).
4. Replay the chain on a clean fork with another seed and keep the task only if every step agrees, then
   check every task fails a no-op and passes its reference, as `mcpworld world validate` does.
"""

from __future__ import annotations

import hashlib
import random

from mcpworld.llm import ChatClient
from mcpworld.servers.envs.runtime import WorldRuntime
from mcpworld.servers.envs.world import World
from mcpworld.servers.synth import prompts
from mcpworld.servers.synth.questions import answer_choice, leaks, model_question, template_question
from mcpworld.servers.synth.results import answer_text, canonical, occurrences
from mcpworld.servers.synth.taskspec import MentionsCheck, SynthTask, with_tasks
from mcpworld.servers.synth.toolgraph import Link, ToolGraph, build_graph, call_once, fill_args
from mcpworld.servers.synth.walks import Chain, replays, walk

__all__ = ["add_model_edges", "answer_text", "build_graph", "call_once", "canonical", "fill_args", "graph_tasks",
           "honest", "leaks", "occurrences"]


def honest(runtime_world: World, tasks: list[SynthTask]) -> list[SynthTask]:
    """Keep tasks whose reference passes and whose no-op fails (the checks `world validate` makes)."""
    from mcpworld.servers.envs.validate import task_problems

    runtime = WorldRuntime(with_tasks(runtime_world, tasks, replace=True))
    return [t for t in tasks if not task_problems(runtime, runtime.tasks[t.id], "")]


async def graph_tasks(world: World | WorldRuntime, n: int = 20, seed: int = 0, *, client: ChatClient | None = None,
                      split: str = "train", boost: dict[str, float] | None = None, guidance: str | None = None,
                      model_edges: bool = False, max_walks: int | None = None,
                      min_steps: int = 2) -> list[SynthTask]:
    """Up to `n` reproducible, honest answer tasks drawn from tool chains of `world`.

    `boost` weights tools (the arena's weak spots); `guidance` goes to the model's question prompt.
    """
    runtime = world if isinstance(world, WorldRuntime) else WorldRuntime(world)
    world = runtime.world
    rng = random.Random(seed)
    graph = build_graph(runtime, rng)
    if client is not None and model_edges:
        await add_model_edges(client, world, graph)
    boost = boost or {}
    tasks: list[SynthTask] = []
    seen: set[str] = set()
    for _ in range(max_walks or n * 12):
        if len(tasks) >= n:
            break
        length = rng.choice([2, 2, 3, 3, 4]) if min_steps > 1 else 1
        chain = walk(graph, runtime, rng, length, boost)
        if chain is None or len(chain.steps) < min_steps or chain.signature in seen:
            continue
        seen.add(chain.signature)
        task = await _make_task(runtime, chain, rng, client, split, guidance)
        if task is not None and task.id not in {t.id for t in tasks}:
            tasks.append(task)
    if not tasks and min_steps > 1:  # a world whose tools never connect still gets one-step questions
        return await graph_tasks(runtime, n, seed, client=client, split=split, boost=boost, guidance=guidance,
                                 max_walks=max_walks, min_steps=1)
    return honest(world, tasks)


async def _make_task(runtime: WorldRuntime, chain: Chain, rng: random.Random, client: ChatClient | None,
                     split: str, guidance: str | None) -> SynthTask | None:
    draft = answer_choice(chain, rng)
    if draft is None:
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
        check=MentionsCheck(values=draft.answer_values, unchanged=chain.unchanged), source="graph",
        world=runtime.world.name, meta={"tools": [s.tool for s in chain.steps], "question_by": written_by},
    )


async def add_model_edges(client: ChatClient, world: World, graph: ToolGraph) -> int:
    """Let a model tag dependencies the names miss; only edges between known tools and params are kept."""
    try:
        completion = await client.complete(prompts.edge_messages(world, graph))
        proposed = prompts.parse_json(completion.message.get("content") or "")
    except Exception:
        return 0
    added = 0
    for edge in proposed if isinstance(proposed, list) else proposed.get("edges", []):
        a, b, param, out = edge.get("from"), edge.get("to"), edge.get("param"), edge.get("field")
        if a in graph.nodes and b in graph.nodes and a != b and param in graph.nodes[b].params and out:
            graph.edges.setdefault(a, {}).setdefault(b, []).append(Link(param, str(out), False, by_model=True))
            added += 1
    return added
