"""The trainers' one connection path to a world: a pooled `EpisodeClient` per server and event loop, shared by
every rollout (or environment) on that loop, and one background loop for trainers that call synchronously.

`SharedClient` is what the OpenRLHF bridge, the TRL adapter and the verl adapter play episodes through: the
`EpisodeClient` is entered by a task of its own (the SDK ties a connection to the task that entered it and
cancels that task when the transport dies, so no trainer's task ever holds it), each user `acquire`s it and
`release`s it when its episode is done, and the last one out closes the connection: nothing outlives a batch,
and a batch connects once, not once per rollout. A request on a connection that dies fails with
`ConnectionError` (an infrastructure error to the caller), and the next `control()` reconnects.

`run_sync` is the one bridge from a synchronous caller (TRL calls an environment's `reset`, tools and
`get_reward` from its trainer thread) onto `background_loop()`, the event loop every such caller in the process
shares, so all of a trainer's environments share one `SharedClient` per server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

from mcpworld.agent.episodes import EpisodeClient
from mcpworld.core.protocol import EpisodeControl

T = TypeVar("T")
ClientKey = tuple[str, str | None, float]  # (server, registry, timeout)
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[ClientKey, SharedClient]] = \
    weakref.WeakKeyDictionary()
_background: tuple[asyncio.AbstractEventLoop, threading.Thread] | None = None
_background_lock = threading.Lock()


class SharedClient:
    """The users' `EpisodeClient` for one server on this event loop, entered by a task of its own (the one an
    `EpisodeClient` needs for its whole life: a trainer's rollout has no context to hold it) and closed by the
    last user that leaves, so nothing outlives a batch and each batch reconnects once, not once per rollout."""

    def __init__(self, key: ClientKey):
        server, registry, timeout = key
        self.key, self.users = key, 0
        self.client = EpisodeClient(server, registry=registry, timeout=timeout)
        self.entered = asyncio.Event()
        self.stop = asyncio.Event()
        self.failure: BaseException | None = None
        self.holder = asyncio.create_task(self._hold(), name=f"mcpworld client {server}")

    @classmethod
    def acquire(cls, key: ClientKey) -> SharedClient:
        """This loop's client for `key` (started when there is none), counted as used until `release`."""
        shared = _clients.setdefault(asyncio.get_running_loop(), {})
        entry = shared.get(key)
        if entry is None or entry.holder.done():
            entry = shared[key] = cls(key)
        entry.users += 1
        return entry

    async def control(self) -> EpisodeControl:
        """The shared connection's control (connecting when it is not open); raises when it cannot."""
        await self.entered.wait()
        if self.holder.done():
            raise ConnectionError(f"the shared MCP client stopped: {self.failure or 'closed'}")
        return await self.client.control()

    async def release(self) -> None:
        """One user done with it; the last one closes the connection and waits for that."""
        self.users -= 1
        if self.users > 0:
            return
        shared = _clients.get(asyncio.get_running_loop(), {})
        if shared.get(self.key) is self:
            del shared[self.key]
        self.stop.set()
        await asyncio.wait({self.holder})

    async def _hold(self) -> None:
        try:
            async with self.client:
                self.entered.set()
                await self.stop.wait()
        except Exception as exc:  # kept for `control`: a rollout reports it as an infrastructure error
            self.failure = exc
        finally:
            self.entered.set()


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's event loop for synchronous callers, on a daemon thread started on first use."""
    global _background
    with _background_lock:
        if _background is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="mcpworld-episodes", daemon=True)
            thread.start()
            _background = (loop, thread)
        return _background[0]


def run_sync(coro: Coroutine[Any, Any, T], timeout: float) -> T:
    """Run `coro` as a task on `background_loop()` and wait for it, from any thread but that loop's own.

    Past `timeout` the task is cancelled (nothing of it keeps running on the loop) and `TimeoutError` raised; a
    task cancelled on the loop raises `ConnectionError`: both read as infrastructure errors (`infra_reason`).
    """
    loop = background_loop()
    if _background is not None and threading.current_thread() is _background[1]:
        coro.close()
        raise RuntimeError("run_sync called from the background loop itself: await the coroutine instead")
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    done, _ = concurrent.futures.wait([future], timeout)
    if not done:
        future.cancel()
        raise TimeoutError(f"no answer from the episode's server within {timeout:g}s")
    try:
        return future.result()
    except concurrent.futures.CancelledError:
        raise ConnectionError("the episode's request was cancelled on the event loop") from None
