"""Curriculum: pass rate per task over N samples; keep the informative middle (drop all-pass and all-fail).

Episodes lost to infrastructure errors are not samples: they count neither as passes nor as failures.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcpworld.agent.trajectory import Trajectory


@dataclass
class TaskStats:
    server: str
    task: str
    samples: int
    passed: int

    @property
    def pass_rate(self) -> float:
        return self.passed / self.samples if self.samples else 0.0


def pass_rates(trajectories: list[Trajectory]) -> list[TaskStats]:
    stats: dict[tuple[str, str], TaskStats] = {}
    for t in trajectories:
        if not t.is_scored:
            continue
        s = stats.setdefault((t.server, t.task), TaskStats(t.server, t.task, 0, 0))
        s.samples += 1
        s.passed += bool(t.verdict and t.verdict.passed)
    return sorted(stats.values(), key=lambda s: (s.pass_rate, s.task))


def informative(stats: list[TaskStats], low: float = 0.0, high: float = 1.0) -> list[TaskStats]:
    """Tasks whose pass rate is strictly between `low` and `high`: solvable, not yet solved."""
    return [s for s in stats if low < s.pass_rate < high]
