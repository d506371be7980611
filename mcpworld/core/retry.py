"""Retry with backoff, owned once: the wait formula (a first wait, doubled each try, capped) and the loop that
plays a try again while its outcome is lost. The agent's runner, every trainer's rollout replay and the
sessionless client's ask-again run this loop, each with its own knobs (how many retries, how long to wait).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Seconds to wait after a lost try: `first_s` after the first, doubled after each further one, at most
    `cap_s`. `Backoff(0)` asks again at once."""

    first_s: float = 1.0
    cap_s: float = 30.0

    def delay(self, attempt: int) -> float:
        """The wait after failed try number `attempt` (1 for the first try)."""
        return min(self.first_s * 2 ** max(attempt - 1, 0), self.cap_s)


NO_WAIT = Backoff(0.0)


def _never(result: object) -> bool:
    return False


async def retrying(attempt: Callable[[int], Awaitable[T]], *, retries: int | Callable[[], int], backoff: Backoff,
                   lost: Callable[[T], bool] = _never,
                   retry_on: tuple[type[BaseException], ...] = ()) -> tuple[T, int]:
    """Await `attempt(n)` for n = 1, 2, ... until a try is not lost, or `retries` tries after the first are spent;
    wait `backoff.delay(n)` after each lost try. A try is lost when `lost(result)` says so, or when it raises one
    of `retry_on` (the last try's exception is the caller's). `retries` may be a callable, read after each lost
    try (a caller that learns mid-way that retrying is futile). Returns the last try's result and its number."""
    n = 1
    while True:
        try:
            result = await attempt(n)
        except retry_on:
            if n > _count(retries):
                raise
        else:
            if not lost(result) or n > _count(retries):
                return result, n
        delay = backoff.delay(n)
        if delay > 0:
            await anyio.sleep(delay)
        n += 1


def _count(retries: int | Callable[[], int]) -> int:
    return retries() if callable(retries) else retries
