"""`SWRReward`: the trainer's RewardFn from SWR, so SWE rollouts can be rewarded without running tests.

Format errors stay -1 (as every reward in the trainer); no submitted patch is 0; an SWR result that is invalid
falls back to the verifier's reward and says so in the evidence, like the judge reward does: never a made-up score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpworld.agent.trajectory import Trajectory
from mcpworld.swe.workspace import WorkspaceError
from mcpworld.trainer.rewards import Reward, format_penalty, verifier_reward
from mcpworld.worldmodels.swr import SWRScorer
from mcpworld.worldmodels.trajectories import submitted_patch


@dataclass
class SWRReward:
    """Reward = SWR's mean over k samples of the submitted patch (or 1/0 around `threshold` when given)."""

    scorer: SWRScorer
    k: int | None = None
    threshold: float | None = None

    async def __call__(self, t: Trajectory) -> Reward:
        if (penalty := format_penalty(t)) is not None:  # raises for infra errors: they are never scored
            return penalty
        patch = submitted_patch(t)
        if patch is None:
            return Reward(0.0, "swr", "no_patch", {"reason": "the agent never called submit"})
        if t.task not in self.scorer.instances:
            return await _fallback(t, "swr_error", [f"unknown SWE instance {t.task!r}"])
        try:
            result = await self.scorer.score(t.task, patch, self.k)
        except (WorkspaceError, OSError) as exc:  # an exception here would crash a training step
            return await _fallback(t, "swr_error", [f"{type(exc).__name__}: {exc}"])
        if result.score is None:
            return await _fallback(t, "swr_invalid", result.errors)
        value = result.score if self.threshold is None else float(result.score >= self.threshold)
        evidence: dict[str, Any] = {"status": result.status, "mean": result.score, "valid": result.valid,
                                    "invalid": result.invalid,
                                    "rewards": [s.reward for s in result.samples],
                                    "test_report": result.samples[0].test_report[-4000:] if result.samples else ""}
        label = "empty_patch" if result.status == "empty_patch" else ("resolved" if result.score >= 0.5 else
                                                                      "unresolved")
        return Reward(value, "swr", label, evidence)


async def _fallback(t: Trajectory, label: str, errors: list[str]) -> Reward:
    fallback = await verifier_reward(t)
    return Reward(fallback.value, "verifier", label, {"swr_errors": errors, **fallback.evidence})
