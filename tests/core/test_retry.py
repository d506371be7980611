"""mcpworld.core.retry: the one backoff formula and the retry loop every infra retry runs."""

from __future__ import annotations

import anyio
import pytest

from mcpworld.core.retry import NO_WAIT, Backoff, retrying


def test_the_wait_doubles_from_the_first_and_stops_at_the_cap() -> None:
    assert [Backoff(2.0, 30.0).delay(n) for n in range(1, 7)] == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert NO_WAIT.delay(5) == 0.0


def test_a_lost_try_is_played_again_until_one_is_not_lost() -> None:
    tries: list[int] = []

    async def attempt(n: int) -> int:
        tries.append(n)
        return n

    result = anyio.run(lambda: retrying(attempt, retries=5, backoff=NO_WAIT, lost=lambda n: n < 3))
    assert result == (3, 3) and tries == [1, 2, 3]


def test_the_last_lost_try_is_returned_when_the_retries_are_spent() -> None:
    async def attempt(n: int) -> str:
        return f"lost {n}"

    assert anyio.run(lambda: retrying(attempt, retries=2, backoff=Backoff(0.001), lost=lambda _: True)) \
        == ("lost 3", 3)


def test_retries_read_after_each_try_stop_a_futile_retry() -> None:
    down = False

    async def attempt(n: int) -> int:
        nonlocal down
        down = True  # another worker learnt the server is gone
        return n

    assert anyio.run(lambda: retrying(attempt, retries=lambda: 0 if down else 9, backoff=NO_WAIT,
                                      lost=lambda _: True)) == (1, 1)


def test_an_exception_named_is_retried_and_the_last_one_raised() -> None:
    tries: list[int] = []

    async def attempt(n: int) -> int:
        tries.append(n)
        raise ConnectionResetError(n)

    with pytest.raises(ConnectionResetError):
        anyio.run(lambda: retrying(attempt, retries=2, backoff=NO_WAIT, retry_on=(ConnectionResetError,)))
    assert tries == [1, 2, 3]


def test_an_exception_not_named_is_raised_at_once() -> None:
    tries: list[int] = []

    async def attempt(n: int) -> int:
        tries.append(n)
        raise ValueError(n)

    with pytest.raises(ValueError):
        anyio.run(lambda: retrying(attempt, retries=2, backoff=NO_WAIT, retry_on=(ConnectionResetError,)))
    assert tries == [1]
