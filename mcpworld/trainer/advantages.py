"""Group-relative advantages: GRPO's group normalization and RLOO's leave-one-out baseline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

Estimator = Literal["group_norm", "rloo"]


def group_norm(rewards: Sequence[float], eps: float = 1e-6) -> list[float]:
    """(r - mean) / (std + eps) within one group of samples of the same task (GRPO)."""
    n = len(rewards)
    mean = sum(rewards) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / n)
    return [(r - mean) / (std + eps) for r in rewards]


def rloo(rewards: Sequence[float]) -> list[float]:
    """r_i minus the mean of the other samples' rewards (REINFORCE leave-one-out)."""
    n = len(rewards)
    if n < 2:
        return [0.0] * n
    total = sum(rewards)
    return [r - (total - r) / (n - 1) for r in rewards]


def advantages(rewards: Sequence[float], estimator: Estimator = "group_norm") -> list[float]:
    if not rewards:
        return []
    if estimator == "group_norm":
        return group_norm(rewards)
    if estimator == "rloo":
        return rloo(rewards)
    raise ValueError(f"unknown advantage estimator {estimator!r}; use group_norm or rloo")


def degenerate(rewards: Sequence[float]) -> bool:
    """All samples scored the same: the group carries no learning signal (dynamic filtering drops it)."""
    return len(set(rewards)) <= 1
