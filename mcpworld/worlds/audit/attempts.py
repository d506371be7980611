"""What an attack plays: an `Attempt` (calls, an optional direct edit, a final answer), the `TaskContext` attacks are
derived from (the task, its starting rows, its reference played once), and `play`, which runs one attempt on a
fresh fork with seed 0 and judges it as an agent's episode.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcpworld.core.models import Check, ToolCall
from mcpworld.worlds.diff import Row, StateDiff
from mcpworld.worlds.reference import Canonical, canonical, mismatches
from mcpworld.worlds.runtime import CallResult, Episode, WorldRuntime
from mcpworld.worlds.world import Task

SEED = 0


class Skip(Exception):
    """An attempt that turned out not to apply (no row to edit, a perturbation with no effect)."""


@dataclass
class Attempt:
    """One episode to play: calls, an optional direct edit of the database, then a final answer.

    `answer` may be a function of the calls' results (for policies that dump what they saw). With
    `must_differ`, an attempt whose final state equals the reference's exactly (free fields included) is
    dropped: it did nothing wrong (a perturbed argument the tool ignores, a prefix that skips only reads).
    """

    label: str
    calls: list[ToolCall] = field(default_factory=list)
    answer: str | None | Callable[[list[CallResult]], str | None] = None
    edit: Callable[[Episode], str] | None = None
    must_differ: bool = False
    wording: bool = False  # a perturbation of text the agent words itself: a difference only in free fields is fine


@dataclass
class Outcome:
    """What one attempt got: its label, whether it passed, the checks, and the answer it gave."""

    label: str
    passed: bool
    checks: list[Check]
    answer: str | None
    evidence: dict[str, Any] | None = None  # the verdict's evidence (a τ² world's `tau2` reward: AuditReport.tau2)


@dataclass
class TaskContext:
    """What the policies may look at for one task: the runtime, the task, its starting rows, its reference."""

    runtime: WorldRuntime
    task: Task
    initial: dict[str, dict[str, Row]]
    reference_results: list[CallResult]
    reference_diff: StateDiff
    reference_raw: list[Canonical]  # every reference's final state, free fields included

    @property
    def world(self):  # type: ignore[no-untyped-def]
        return self.runtime.world

    @classmethod
    def build(cls, runtime: WorldRuntime, task: Task) -> TaskContext:
        initial = runtime.initial_rows(runtime.template(task))
        raw: list[Canonical] = []
        results: list[CallResult] = []
        diff = StateDiff({})
        for i, solution in enumerate([task.solution, *task.alternatives]):
            episode = runtime.fork(task.id, seed=SEED)
            try:
                out = [runtime.step(episode, s) for s in solution]
                d = runtime.diff(episode)
                raw.append(canonical(d, episode.generated, {}))
                if i == 0:
                    results, diff = out, d
            finally:
                episode.close()
        return cls(runtime, task, initial, results, diff, raw)

    def resolve(self, ref: str) -> list[str]:
        try:
            return self.runtime.column_values(self.runtime.template(self.task), ref)
        except KeyError:  # an unknown table has no candidates to try
            return []


def play(ctx: TaskContext, attempt: Attempt) -> Outcome | None:
    """Play `attempt` on a fresh fork and judge it; None when it does not apply (see `Attempt.must_differ`)."""
    runtime = ctx.runtime
    episode = runtime.fork(ctx.task.id, seed=SEED)
    label = attempt.label
    answer: str | None = None
    try:
        results = [runtime.step(episode, c) for c in attempt.calls]
        if attempt.edit is not None:
            label = f"{label}: {attempt.edit(episode)}" if label else attempt.edit(episode)
        if attempt.must_differ:
            mine = canonical(runtime.diff(episode), episode.generated, {})
            if any(not mismatches(mine, ref) for ref in ctx.reference_raw):
                return None
            if attempt.wording:
                worded = canonical(runtime.diff(episode), episode.generated, runtime.world.free_fields)
                if any(not mismatches(worded, ref) for ref in runtime.judge.reference_states(ctx.task, SEED)):
                    return None
        answer = attempt.answer(results) if callable(attempt.answer) else attempt.answer
        verdict = runtime.verify(episode, answer)
        return Outcome(label, verdict.passed, verdict.checks, answer, verdict.evidence)
    except Skip:
        return None
    except Exception as exc:  # the audit reports what broke instead of stopping at the first world bug
        return Outcome(label, False, [Check(name="episode ran", passed=False,
                                             detail=f"{type(exc).__name__}: {exc}")], answer)
    finally:
        episode.close()


def dump(value: Any) -> str:
    """A value as attack labels and chance levels show it: compact, sorted JSON."""
    return json.dumps(value, default=str, separators=(", ", ": "), ensure_ascii=False, sort_keys=True)
