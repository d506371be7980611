"""Best-of-N with SWR: score every candidate patch k times, average, keep the best; ties broken by a fixed seed.

Two ways in: `select_patch` over (instance, candidate patches), and `SWRSelector` over trajectories, whose
`score` plugs into `mcpworld.agent.runner.best_of_n(trajectories, score=selector.score)` once `prepare` has run.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from mcpworld.agent.runner import best_of_n
from mcpworld.agent.trajectory import Trajectory
from mcpworld.swe.instances import Instance
from mcpworld.swe.workspace import WorkspaceError
from mcpworld.worldmodels.swr import SWRResult, SWRScorer
from mcpworld.worldmodels.trajectories import submitted_patch

TIE_SCALE = 1e-6  # far below the smallest gap between two means of up to 1000 samples
UNSCORED = -1.0  # invalid or missing SWR results rank below every real score


def tie_break(seed: int, instance_id: str, index: int) -> float:
    """A deterministic jitter in [0, TIE_SCALE) per (seed, instance, candidate): a seeded tie break."""
    return random.Random(f"{seed}:{instance_id}:{index}").random() * TIE_SCALE


def pick(instance_id: str, scores: Sequence[float | None], seed: int = 0) -> int | None:
    """Index of the best score (None for invalid ones), ties broken by `seed`; None when nothing was scored."""
    ranked = [(s + tie_break(seed, instance_id, i), i) for i, s in enumerate(scores) if s is not None]
    return max(ranked)[1] if ranked else None


@dataclass
class Selection:
    instance_id: str
    best: int | None
    results: list[SWRResult]

    @property
    def scores(self) -> list[float | None]:
        return [r.score for r in self.results]


async def _score_all(scorer: SWRScorer, items: list[tuple[Instance | str, str | None]], k: int | None,
                     concurrency: int) -> list[SWRResult]:
    results: list[SWRResult | None] = [None] * len(items)
    limiter = anyio.CapacityLimiter(max(1, concurrency))

    async def one(i: int) -> None:
        async with limiter:
            instance, patch = items[i]
            try:
                results[i] = await scorer.score(instance, patch, k)
            except (KeyError, WorkspaceError, OSError) as exc:  # an unscorable candidate ranks last, never crashes
                iid = instance if isinstance(instance, str) else instance.instance_id
                results[i] = SWRResult(iid, "invalid", None, errors=[f"{type(exc).__name__}: {exc}"])

    async with anyio.create_task_group() as tg:
        for i in range(len(items)):
            tg.start_soon(one, i)
    return [r for r in results if r is not None]


async def select_patch(scorer: SWRScorer, instance: Instance | str, patches: Sequence[str | None],
                       k: int | None = None, seed: int = 0, concurrency: int = 4) -> Selection:
    """Score each candidate patch with SWR and pick the best (standalone best-of-N)."""
    inst = scorer.instance(instance) if isinstance(instance, str) else instance
    results = await _score_all(scorer, [(inst, p) for p in patches], k, concurrency)
    return Selection(inst.instance_id, pick(inst.instance_id, [r.score for r in results], seed), results)


@dataclass
class SWRSelector:
    """SWR mean scores for trajectories' submitted patches, as a sync `score` for `best_of_n`."""

    scorer: SWRScorer
    k: int | None = None
    seed: int = 0
    concurrency: int = 4
    results: dict[tuple[str, str, int], SWRResult] = field(default_factory=dict)

    async def prepare(self, trajectories: Sequence[Trajectory]) -> None:
        """Score every trajectory not scored yet (no submitted patch scores 0 without a model call)."""
        todo = [t for t in trajectories if t.key not in self.results]
        results = await _score_all(self.scorer, [(t.task, submitted_patch(t) or "") for t in todo], self.k,
                                   self.concurrency)
        for t, r in zip(todo, results):
            self.results[t.key] = r

    def score(self, t: Trajectory) -> float:
        """The SWR mean plus the seeded tie break; UNSCORED when invalid or not prepared."""
        result = self.results.get(t.key)
        base = result.score if result is not None and result.score is not None else UNSCORED
        return base + tie_break(self.seed, t.task, t.sample)

    async def select(self, trajectories: Sequence[Trajectory]) -> dict[str, Trajectory]:
        await self.prepare(trajectories)
        return best_of_n(list(trajectories), score=self.score)
