"""Run an async world-model call from synchronous code: `ExecutionBackend.run` is sync, the model client is async.

The SWE server calls backends in anyio worker threads, so the call goes back to the server's own loop; a plain
thread (CLI, grading, tests) gets a private loop; a caller that is itself on a loop gets a helper thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import anyio
import anyio.from_thread

T = TypeVar("T")


def run_sync(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """`await fn(*args)` from sync code, wherever this thread is."""
    async def boxed() -> tuple[bool, Any]:
        try:
            return True, await fn(*args)
        except Exception as exc:  # carried across, so RuntimeError below means "not a worker thread"
            return False, exc

    try:
        ok, value = anyio.from_thread.run(boxed)
    except RuntimeError:  # not an anyio worker thread
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            ok, value = anyio.run(boxed)
        else:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="world-model") as pool:
                ok, value = pool.submit(anyio.run, boxed).result()
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]
