"""Rollout collection for RL: tasks x G samples through the agent, rewarded, grouped by task, resumable.

Episodes lost to infrastructure errors, or to the model endpoint failing, never enter a group: they are no
sample of the policy. The runner retries infra errors; those it could not play are counted in `Groups.lost`
and played by the next collect. Model errors are counted in `Groups.model_errors`.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpworld.agent.policies import Policy
from mcpworld.agent.runner import RunSpec, Summary, run
from mcpworld.agent.trajectory import Trajectory, read_trajectories
from mcpworld.trainer.advantages import Estimator, advantages, degenerate
from mcpworld.trainer.rewards import Reward, RewardFn, verifier_reward


@dataclass
class Group:
    """All samples of one task: their rewards, advantages, and whether the group teaches anything."""

    server: str
    task: str
    trajectories: list[Trajectory]
    rewards: list[Reward]
    advantages: list[float]
    degenerate: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"server": self.server, "task": self.task, "degenerate": self.degenerate,
                "rewards": [r.value for r in self.rewards], "advantages": self.advantages,
                "labels": [r.label for r in self.rewards],
                "samples": [json.loads(t.model_dump_json()) for t in self.trajectories]}


class Groups(list[Group]):
    """The groups of a collect, and what they lack: `lost` samples (and why) that infrastructure errors took."""

    def __init__(self, groups: list[Group], lost: int = 0, lost_reasons: dict[str, int] | None = None,
                 summary: Summary | None = None):
        super().__init__(groups)
        self.lost, self.lost_reasons, self.summary = lost, lost_reasons or {}, summary
        self.model_errors = 0


async def make_groups(trajectories: list[Trajectory], reward: RewardFn = verifier_reward,
                      estimator: Estimator = "group_norm") -> list[Group]:
    """Group by task and score; infra errors are left out: they have no reward and are not policy samples."""
    by_task: dict[tuple[str, str], list[Trajectory]] = {}
    for t in sorted(trajectories, key=lambda t: t.sample):
        if not t.is_scored:  # infra and model-endpoint errors: no sample of the policy
            continue
        by_task.setdefault((t.server, t.task), []).append(t)
    groups = []
    for (server, task), trajs in by_task.items():
        rewards = [await reward(t) for t in trajs]
        values = [r.value for r in rewards]
        groups.append(Group(server, task, trajs, rewards, advantages(values, estimator), degenerate(values)))
    return groups


def write_groups(path: Path, groups: list[Group], drop_degenerate: bool = False) -> int:
    """Write groups as JSONL via a temp file and rename, so readers never see a half-written file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    kept = [g for g in groups if not (drop_degenerate and g.degenerate)]
    with open(tmp, "w") as f:
        for g in kept:
            f.write(json.dumps(g.to_json()) + "\n")
    os.replace(tmp, path)
    return len(kept)


async def collect(spec: RunSpec, make_policy: Callable[[int], Policy], reward: RewardFn = verifier_reward,
                  estimator: Estimator = "group_norm",
                  on_done: Callable[[Trajectory], Any] | None = None) -> Groups:
    """Run (resumably, into spec.output) and group every trajectory in the output by task.

    Infra errors are left out of the groups; `Groups.lost` counts the (task, sample) pairs that have nothing
    but infra errors (the runner already retried them): collect again, once the server is back, to play them.
    """
    results, summary = await run(spec, make_policy, on_done=on_done)
    trajectories = read_trajectories(spec.output) if spec.output else results
    wanted = {t.id for t in spec.tasks}
    mine = [t for t in trajectories if t.task in wanted]
    played = {t.key for t in mine if not t.is_infra}
    lost: dict[tuple[str, str, int], Trajectory] = {t.key: t for t in mine if t.is_infra and t.key not in played
                                                    and t.sample < spec.samples}
    groups = await make_groups(mine, reward, estimator)
    reasons = Counter(t.infra_reason or "server error" for t in lost.values())
    out = Groups(groups, len(lost), dict(reasons), summary)
    out.model_errors = sum(t.termination == "model_error" for t in mine)
    return out
