"""Chance levels: per task kind, the expected reward of a policy that does not do the job (the best constant
submission or decline, a random pick among the candidates, seed 0's episode memorised and replayed). Above
`CHANCE_WARNING`, a world pays guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpworld.worlds.answers import AnswerPart, judge_answer, read_submission, reference_submission
from mcpworld.worlds.audit.attempts import TaskContext, dump
from mcpworld.worlds.audit.values import wrong_values
from mcpworld.worlds.runtime import WorldRuntime

__all__ = ["CHANCE_WARNING", "MEMO_SEED", "ChanceLevel", "chance_levels"]


@dataclass(frozen=True)
class ChanceLevel:
    """The expected reward per task of a policy that does not do the job, on one kind of task."""

    kind: str
    tasks: int
    policy: str  # "constant" (the best single submission or decline for all tasks), "random", or "memorised"
    # (seed 0's reference, calls and submission word for word, replayed on another seed)
    level: float
    how: str = ""


CHANCE_WARNING = 0.1
MEMO_SEED = 1  # where a policy that memorised seed 0's episodes is tried


def _passes(parts: list[AnswerPart], answer: Any) -> bool:
    try:
        values = read_submission(parts, answer)
    except ValueError:  # of another type: refused, and the guess does not count
        return False
    return all(c.passed for c in judge_answer(parts, values))


def chance_levels(runtime: WorldRuntime, contexts: list[TaskContext], noop: dict[str, bool]) -> list[ChanceLevel]:
    """Per task kind, the expected reward of the best constant policy and of a random one (see the module doc).

    Answers: the constant is the best single value over every candidate the audit generated for the world's
    answer tasks (each task's right and wrong values); random picks uniformly among a task's candidates of each
    part. Refusals: the constant declines citing the most common rule; random cites any rule. State tasks: the
    constant does nothing (the noop policy's pass rate); random is the random policy's. Every kind: "memorised"
    replays seed 0's reference word for word on seed MEMO_SEED (1.0 where the world's seeds do not vary its data,
    and for what a seed cannot rename: counts, amounts, a refusal's rule).
    """
    out: list[ChanceLevel] = []
    answers = [c for c in contexts if c.task.expect or c.task.kind == "answer"]
    refusals = [c for c in contexts if c.task.kind == "refusal"]
    states = [c for c in contexts if not c.task.expect and c.task.kind == "state"]
    if answers:
        pool: list[Any] = []
        odds = 0.0
        for ctx in answers:
            parts = list(ctx.task.expect)
            p = 1.0 if parts else 0.0  # an answer nobody typed is never judged right
            for part in parts:
                wrong = wrong_values(ctx, part)
                p /= 1 + len(wrong)
                if len(parts) == 1:
                    pool += [*wrong, reference_submission(parts)]
            odds += p
        best, best_value = 0, None
        for value in {dump(v): v for v in pool}.values():
            hits = sum(bool(ctx.task.expect) and _passes(list(ctx.task.expect), value) for ctx in answers)
            if hits > best:
                best, best_value = hits, value
        out.append(ChanceLevel("answer", len(answers), "constant", best / len(answers),
                               f"submits {dump(best_value)} every time" if best_value is not None else "none passes"))
        out.append(ChanceLevel("answer", len(answers), "random", odds / len(answers),
                               "a uniform pick among each part's candidates"))
    rules = [r.id for r in runtime.world.rules]
    if refusals and rules:
        counts = {r: sum(c.task.reason == r for c in refusals) for r in rules}
        top = max(counts, key=lambda r: counts[r])
        out.append(ChanceLevel("refusal", len(refusals), "constant", counts[top] / len(refusals),
                               f"declines citing {top} every time"))
        out.append(ChanceLevel("refusal", len(refusals), "random", 1 / len(rules), f"cites one of {len(rules)} rules"))
    if states:
        passed = sum(noop.get(c.task.id, False) for c in states)
        out.append(ChanceLevel("state", len(states), "constant", passed / len(states), "does nothing"))
    for kind, group in (("answer", answers), ("refusal", refusals), ("state", states)):
        if group:
            hits = sum(runtime.judge.play(c.task.id, c.task.answer, runtime.solution(c.task), seed=MEMO_SEED).passed
                       for c in group)
            out.append(ChanceLevel(kind, len(group), "memorised", hits / len(group),
                                   f"seed 0's calls and submission, replayed on seed {MEMO_SEED}"))
    return out
