"""Tool calls that may block, run off the event loop with a deadline (`call_blocking`): a slow tool holds a
worker thread, never the loop every other world on the server answers on."""

from __future__ import annotations

import contextvars
import threading
import time
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread

BLOCKING_ATTR = "__mcpworld_blocking__"  # on a tool function: its per-call timeout in seconds (it may block)
_abandoned: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("mcpworld_call_abandoned",
                                                                                    default=None)
_limiter: anyio.lowlevel.RunVar[anyio.CapacityLimiter] = anyio.lowlevel.RunVar("mcpworld_blocking_calls")


class CallTimeout(TimeoutError):
    """A blocking call did not finish within its timeout; its late result, if any, is discarded."""


def blocking_timeout(fn: Any) -> float | None:
    """The per-call timeout of a tool function marked as blocking, else None (call it directly)."""
    value = getattr(fn, BLOCKING_ATTR, None)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def call_abandoned() -> bool:
    """Inside a blocking call: whether its caller gave up waiting (the call must not commit its effects)."""
    event = _abandoned.get()
    return event is not None and event.is_set()


def _lock_of(key: Any) -> threading.Lock:
    return key.__dict__.setdefault("_mcpworld_call_lock", threading.Lock())


async def call_blocking(fn: Any, timeout_s: float, key: Any = None) -> Any:
    """Run `fn()` in a worker thread, so the event loop (and every other world on it) keeps serving.

    Calls sharing `key` (an episode) run one at a time. After `timeout_s` the caller gets CallTimeout; the
    thread is left to finish on its own and sees `call_abandoned()` true, so it can drop what it would change.
    """
    abandoned = threading.Event()
    deadline = time.monotonic() + timeout_s
    lock = _lock_of(key) if key is not None else None

    def run() -> Any:
        _abandoned.set(abandoned)
        if lock is None:
            return fn()
        if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise CallTimeout(f"the episode was still busy with an earlier call after {timeout_s:g}s")
        try:
            if abandoned.is_set():
                raise CallTimeout(f"gave up after {timeout_s:g}s")
            return fn()
        finally:
            lock.release()

    try:
        limiter = _limiter.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(64)
        _limiter.set(limiter)
    try:
        with anyio.fail_after(timeout_s):
            return await anyio.to_thread.run_sync(run, abandon_on_cancel=True, limiter=limiter)
    except TimeoutError as exc:
        abandoned.set()
        if isinstance(exc, CallTimeout):
            raise
        raise CallTimeout(f"no answer within {timeout_s:g}s") from None
