"""Weighted random walks over the tool graph, executed step by step on a fork with real values.

A walk starts at a read-only tool whose required arguments are known, then repeatedly follows an edge
whose output field really appears in the last result, passing that value on. Errors, empty results and
results seen before end it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from mcpworld.synth.tasks.names import looks_like_id, singular, snake, tool_noun
from mcpworld.synth.tasks.results import Occurrence, canonical, empty, occurrences, row_target
from mcpworld.synth.tasks.toolgraph import Link, ToolGraph, error_value, fill_args, suffix_match
from mcpworld.worlds.runtime import WorldRuntime


@dataclass
class Via:
    """How a step got its input: which link, from which occurrence, and how that row is singled out."""

    link: Link
    occurrence: Occurrence
    target: str  # "that result" / "the model whose author is 'Qwen'"


@dataclass
class Step:
    tool: str
    args: dict[str, Any]
    result: Any
    via: Via | None = None


@dataclass
class Chain:
    steps: list[Step]

    @property
    def signature(self) -> str:
        return canonical([(s.tool, s.args) for s in self.steps])


IDENTIFYING = ("email", "code", "name", "title", "username", "handle", "notation", "slug", "sku", "key")


def _specific(link: Link, occ: Occurrence, target: str) -> bool:
    """Identifiers link anywhere; a generic field (status, category) only within the same kind of thing."""
    param = link.param
    if looks_like_id(param, None) or param.endswith(IDENTIFYING) or link.by_model:
        return True
    return singular(snake(occ.container)) == tool_noun(target)


def walk(graph: ToolGraph, runtime: WorldRuntime, rng: random.Random, length: int,
         boost: dict[str, float]) -> Chain | None:
    """One weighted random walk, executed step by step on a single fork."""
    starts = [n for n in graph.nodes.values() if n.read_only and (graph.edges.get(n.name) or length == 1)]
    if not starts:
        return None
    start = rng.choices(starts, weights=[boost.get(n.name, 1.0) for n in starts])[0]
    args = fill_args(start, graph.pool, rng)
    if args is None:
        return None
    episode = runtime.fork(seed=0)
    try:
        first = runtime.call(episode, start.name, args)
        if first.error is not None or empty(first.value) or error_value(first.value):
            return None
        steps = [Step(start.name, args, first.value)]
        seen = {canonical(first.value)}
        while len(steps) < length:
            step = _next_step(graph, runtime, episode, rng, steps, seen, boost)
            if step is None:
                break
            steps.append(step)
            seen.add(canonical(step.result))
    finally:
        episode.close()
    return Chain(steps)


def _next_step(graph: ToolGraph, runtime: WorldRuntime, episode: Any, rng: random.Random, steps: list[Step],
               seen: set[str], boost: dict[str, float]) -> Step | None:
    current = steps[-1]
    used = {s.tool for s in steps}
    given = {str(v).lower() for s in steps for v in s.args.values()}
    options: list[tuple[float, str, Link, Occurrence]] = []
    occs = list(occurrences(current.result, tool_noun(current.tool)))
    for target, links in graph.edges.get(current.tool, {}).items():
        node = graph.nodes[target]
        if target in used or not node.read_only:
            continue
        for link in links:
            matches = [o for o in occs if (link.field in o.names or any(suffix_match(n, link.param) for n in o.names))
                       and str(o.value).lower() not in given
                       and _specific(link, o, target)]
            for occ in rng.sample(matches, min(3, len(matches))):
                weight = (2.0 if link.observed else 1.0) * boost.get(target, 1.0)
                options.append((weight, target, link, occ))
    tries = 0
    while options and tries < 6:
        tries += 1
        pick = rng.choices(range(len(options)), weights=[o[0] for o in options])[0]
        _, target, link, occ = options.pop(pick)
        node = graph.nodes[target]
        schema = node.params.get(link.param, {})
        value = [occ.value] if schema.get("type") == "array" else occ.value
        args = fill_args(node, graph.pool, rng, {link.param: value})
        if args is None:
            continue
        where = row_target(occ, current.tool, {str(occ.value).lower()})
        if where is None:
            continue
        result = runtime.call(episode, target, args)
        if result.error is not None or empty(result.value) or error_value(result.value) \
                or canonical(result.value) in seen:
            continue
        return Step(target, args, result.value, Via(link, occ, where))
    return None


def replays(runtime: WorldRuntime, chain: Chain) -> bool:
    """Run the chain again on a clean fork with another seed's generator (seed 0's data); every step must return
    the same."""
    episode = runtime.fork(seed=1, vary=False)
    try:
        for step in chain.steps:
            result = runtime.call(episode, step.tool, step.args)
            if result.error is not None or canonical(result.value) != canonical(step.result):
                return False
    finally:
        episode.close()
    return True
