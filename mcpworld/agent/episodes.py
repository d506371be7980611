"""One server's episodes for every worker of a run: one shared connection, opened on first use and again after
it breaks. `runner.run` and `list_tasks` both go through it.

The connection is `open_episodes`' (a pooled sessionless client over HTTP, else one `mcp.Client`), held open by a
task of this client's own: the SDK ties a connection to the task that entered it and cancels that task when the
transport dies, so no worker's task ever holds it. A request in flight on an SDK connection that dies ends at
once with `ConnectionError` (an infrastructure error to the runner), and the next `control()` reconnects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcpworld.core.models import TaskInfo
from mcpworld.core.protocol import EpisodeControl
from mcpworld.registry.connect import open_episodes
from mcpworld.registry.sessionless import SessionlessClient

T = TypeVar("T")
_UNSET: Any = object()


class _Link:
    """One opened connection: its control, and an event set once it is gone (closed, or died under us)."""

    def __init__(self) -> None:
        self.ctl: EpisodeControl | None = None
        self.failure: BaseException | None = None
        self.gone = anyio.Event()
        self.release = anyio.Event()

    @property
    def dead(self) -> bool:
        """Gone, or let go after its transport ended: no new request may start on it."""
        return self.gone.is_set() or self.release.is_set()

    async def hold(self, target: str | dict[str, Any], options: dict[str, Any], ready: anyio.Event) -> None:
        try:
            async with open_episodes(target, **options) as ctl:
                self.ctl = ctl if isinstance(ctl.client, SessionlessClient) else \
                    EpisodeControl(_Guarded(ctl.client, self), ctl.timeout_s)
                ready.set()
                await self.release.wait()
        except Exception as exc:  # could not connect, or the transport died (the SDK's task group raises here)
            self.failure = exc
        finally:
            self.gone.set()
            ready.set()


class _Guarded:
    """An SDK client shared by many tasks: a request fails with ConnectionError as soon as its connection dies."""

    def __init__(self, client: Any, link: _Link):
        self._client, self._link = client, link

    @property
    def session(self) -> _Guarded:
        return self

    async def send_request(self, request: Any, result_type: type[T], timeout: float | None = None) -> T:
        return await self._guard(lambda: self._client.session.send_request(request, result_type, timeout))

    async def call_tool(self, *args: Any, **kwargs: Any) -> types.CallToolResult:
        return await self._guard(lambda: self._client.call_tool(*args, **kwargs))

    async def list_tools(self) -> types.ListToolsResult:
        return await self._guard(self._client.list_tools)

    async def _guard(self, make: Callable[[], Awaitable[T]]) -> T:
        result: Any = _UNSET
        error: Exception | None = None
        if not self._link.dead:
            async with anyio.create_task_group() as tg:
                async def watch() -> None:
                    await self._link.gone.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(watch)
                try:
                    result = await make()
                except Exception as exc:  # raised below, unwrapped by the task group
                    error = exc
                tg.cancel_scope.cancel()
        if error is not None:
            if _closed(error):  # the SDK saw the transport end: let the holder go, the next control() reconnects
                self._link.release.set()
            raise error
        if result is _UNSET:
            raise ConnectionResetError(f"connection lost: {self._link.failure or 'the MCP connection closed'}")
        return result


def _closed(exc: BaseException) -> bool:
    """Whether `exc` says the connection itself is over (not one request's failure)."""
    if isinstance(exc, MCPError):
        return exc.error.code == types.CONNECTION_CLOSED
    return isinstance(exc, (ConnectionError, EOFError, anyio.ClosedResourceError, anyio.BrokenResourceError,
                            anyio.EndOfStream))


class EpisodeClient:
    """A reconnecting client for one server's episodes; use as an async context manager.

    `control()` gives the live connection's `EpisodeControl` (connecting when there is none, or the last one
    died); every caller shares it. Options are `open_episodes`': `registry`, `timeout`, `prefer`, `token`,
    `limit`. Failures to connect raise (`ConnectError`, ...): the caller decides what an outage costs.
    """

    def __init__(self, target: str | dict[str, Any], **options: Any):
        self.target, self.options = target, options
        self._link: _Link | None = None
        self._lock = anyio.Lock()
        self._tg: Any = None

    async def __aenter__(self) -> EpisodeClient:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._link is not None:
            self._link.release.set()
        await self._tg.__aexit__(None, None, None)  # the body's own exception, if any, propagates unwrapped

    async def control(self) -> EpisodeControl:
        """The shared connection's control, (re)connecting first when it is not open."""
        async with self._lock:
            link = self._link
            if link is None or link.dead:
                if self._tg is None:
                    raise RuntimeError("EpisodeClient is used outside `async with`")
                self._link = link = _Link()  # kept before it opens, so that closing this client releases it
                ready = anyio.Event()
                self._tg.start_soon(link.hold, self.target, self.options, ready)
                await ready.wait()
                if link.ctl is None:
                    raise link.failure or ConnectionError("the MCP connection closed while opening")
            assert link.ctl is not None
            return link.ctl

    async def tasks(self, split: str | None = None) -> list[TaskInfo]:
        """The server's tasks (instructions only: references stay on the server)."""
        return (await (await self.control()).tasks(split)).tasks
