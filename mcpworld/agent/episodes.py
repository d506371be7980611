"""One server's episodes for every worker of a run: one shared connection, opened on first use and again after
it breaks. `runner.run` and `list_tasks` both go through it.

The connection is `open_episodes`' (a pooled sessionless client over HTTP, else one `mcp.Client`), held open by a
task of this client's own: the SDK ties a connection to the task that entered it and cancels that task when the
transport dies, so no worker's task ever holds it. A request in flight on an SDK connection that dies ends at
once with `ConnectionError` (an infrastructure error to the runner), and the next `control()` reconnects.

A record with several HTTP remotes (replicas: `mcpworld up --ray`, or URLs listed by hand) gets one connection per
replica, and successive `control()` calls (one per episode) go round-robin over them, so a run spreads over every
replica with no configuration. An episode stays on the replica that started it (its id names its holder: no
router). The record is read from the registry again every `REFRESH_S`, and at once when no replica can be
reached, so replicas that join are used and replicas the health checks drop (or a dead one that comes back at a
new address) are left; an episode lost on a dead replica is the caller's infrastructure error, and its retry goes
to the next replica.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcpworld.core.models import TaskInfo
from mcpworld.core.protocol import EpisodeControl
from mcpworld.registry.connect import ConnectError, fetch_record, open_episodes
from mcpworld.registry.sessionless import SessionlessClient

T = TypeVar("T")
_UNSET: Any = object()
REFRESH_S = 5.0  # how often a client reads a named server's record (its replicas) again
SUSPECT_S = 3.0  # a replica that could not be reached gets no new episode for this long (while others can)


class _Link:
    """One opened connection: its control, and an event set once it is gone (closed, or died under us)."""

    def __init__(self) -> None:
        self.ctl: EpisodeControl | None = None
        self.failure: BaseException | None = None
        self.gone = anyio.Event()
        self.release = anyio.Event()
        self.suspect_until = -math.inf  # a request could not reach the server: skip it until then if others can

    @property
    def dead(self) -> bool:
        """Gone, or let go after its transport ended: no new request may start on it."""
        return self.gone.is_set() or self.release.is_set()

    async def hold(self, target: str | dict[str, Any], options: dict[str, Any], ready: anyio.Event,
                   replica: bool = False) -> None:
        try:
            async with open_episodes(target, **options) as ctl:
                if not isinstance(ctl.client, SessionlessClient):
                    self.ctl = EpisodeControl(_Guarded(ctl.client, self), ctl.timeout_s)
                else:  # one replica of several: note when it cannot be reached, so new episodes go elsewhere
                    self.ctl = EpisodeControl(_Noted(ctl.client, self), ctl.timeout_s) if replica else ctl
                ready.set()
                await self.release.wait()
        except Exception as exc:  # could not connect, or the transport died (the SDK's task group raises here)
            self.failure = exc
        finally:
            self.gone.set()
            ready.set()


class _Noted:
    """A pooled sessionless client that notes on its link when a request cannot reach the server (a replica that
    died): the pool stays open for the requests of episodes still in flight, and new episodes go elsewhere."""

    def __init__(self, client: SessionlessClient, link: _Link):
        self._client, self._link = client, link

    @property
    def session(self) -> _Noted:
        return self

    async def send_request(self, request: Any, result_type: type[T], timeout: float | None = None) -> T:
        return await self._note(self._client.send_request(request, result_type, timeout))

    async def call_tool(self, *args: Any, **kwargs: Any) -> types.CallToolResult:
        return await self._note(self._client.call_tool(*args, **kwargs))

    async def list_tools(self) -> types.ListToolsResult:
        return await self._note(self._client.list_tools())

    async def _note(self, request: Awaitable[T]) -> T:
        try:
            return await request
        except (ConnectError, ConnectionError):
            self._link.suspect_until = anyio.current_time() + SUSPECT_S
            raise


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
        self._links: dict[str, _Link] = {}  # by replica URL ("" for a target that is not split)
        self._lock = anyio.Lock()
        self._tg: Any = None
        self._record: dict[str, Any] | None = None
        self._fetched = -math.inf
        self._turn = 0

    async def __aenter__(self) -> EpisodeClient:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        for link in self._links.values():
            link.release.set()
        await self._tg.__aexit__(None, None, None)  # the body's own exception, if any, propagates unwrapped

    async def _replicas(self) -> list[tuple[str, str | dict[str, Any]]]:
        """(key, target) for each replica to spread over: one per HTTP remote of a record with several, else the
        target itself."""
        target = self.target
        if isinstance(target, str) and target.startswith(("http://", "https://")):
            return [("", target)]
        if self.options.get("prefer", "http") != "http":
            return [("", target)]
        if isinstance(target, str):
            now = anyio.current_time()
            if self._record is None or now - self._fetched >= REFRESH_S:
                try:
                    fetched = await fetch_record(target, self.options.get("registry"))
                except Exception:
                    if self._record is None:
                        raise
                    fetched = self._record  # the registry blinked: keep the replicas we know
                self._record, self._fetched = fetched.get("server", fetched), now
            record = self._record
        else:
            record = target.get("server", target)
        remotes = [r for r in record.get("remotes") or [] if r.get("type") == "streamable-http"]
        if len(remotes) <= 1:
            return [("", record)]
        return [(r["url"], {**record, "remotes": [r]}) for r in remotes]

    async def control(self) -> EpisodeControl:
        """The shared connection's control, (re)connecting first when it is not open; with several replicas, the
        next one's in turn (one that cannot be reached is skipped)."""
        async with self._lock:
            if self._tg is None:
                raise RuntimeError("EpisodeClient is used outside `async with`")
            targets = await self._replicas()
            failure: BaseException | None = None
            now = anyio.current_time()
            healthy = [t for t in targets if self._links.get(t[0]) is None or self._links[t[0]].suspect_until < now]
            if healthy and len(healthy) < len(targets):  # skip the replicas that just failed a request
                targets = healthy
            for i in range(len(targets)):
                key, target = targets[(self._turn + i) % len(targets)]
                link = self._links.get(key)
                if link is None or link.dead:
                    self._links[key] = link = _Link()  # kept before it opens, so that closing this client releases it
                    ready = anyio.Event()
                    self._tg.start_soon(link.hold, target, self.options, ready, bool(key))
                    await ready.wait()
                    if link.ctl is None:
                        failure = link.failure or ConnectionError("the MCP connection closed while opening")
                        continue
                assert link.ctl is not None
                self._turn = (self._turn + i + 1) % len(targets)
                return link.ctl
            self._fetched = -math.inf  # no replica answered: ask the registry again next time
            assert failure is not None
            raise failure

    async def tasks(self, split: str | None = None) -> list[TaskInfo]:
        """The server's tasks (instructions only: references stay on the server)."""
        return (await (await self.control()).tasks(split)).tasks
