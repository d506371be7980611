"""SWR as the SWE server's grader in simulated mode: `episode/verify` without running the tests.

Async: the SWE server awaits it on its event loop, where the model client lives. An invalid SWR result is a failed
verdict whose evidence says `invalid` (a verdict must carry a score); `SWRReward` is the reward that treats invalid
separately.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcpworld.core.models import Check, Verdict
from mcpworld.swe.instances import Instance
from mcpworld.worldmodels.swr import SWRResult, SWRScorer


def swr_verdict(result: SWRResult, threshold: float = 0.5) -> Verdict:
    """passed when SWR's mean reaches `threshold`; score = the mean; the samples' reports as evidence."""
    evidence = {"swr": {**result.to_dict(), "samples": [
        {"reward": s.reward, "test_report": s.test_report[-4000:], "reasoning": s.reasoning[-2000:]}
        for s in result.samples]}}
    if result.score is None:
        return Verdict(passed=False, score=0.0, evidence=evidence, checks=[
            Check(name="SWR result valid", passed=False, detail="; ".join(result.errors)[:500])])
    passed = result.score >= threshold
    detail = f"mean {result.score:.3f} over {result.valid} samples ({result.invalid} invalid); status {result.status}"
    return Verdict(passed=passed, score=result.score, evidence=evidence,
                   checks=[Check(name="SWR", passed=passed, detail=detail)])


@dataclass
class SWRGrader:
    """`grader(instance, patch) -> Verdict` for the SWE server (see docs/world-models.md, simulated mode)."""

    scorer: SWRScorer
    k: int | None = None
    threshold: float = 0.5

    async def __call__(self, instance: Instance, patch: str | None) -> Verdict:
        return swr_verdict(await self.scorer.score(instance, patch, self.k), self.threshold)
