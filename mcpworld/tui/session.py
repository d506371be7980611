"""One live MCP connection per opened server, owned by a single coroutine.

anyio cancel scopes must be exited by the task that entered them, so `ServerSession.run()` enters
`connect(...)`, serves requests from an asyncio.Queue, and leaves the connection itself. Every other part of
the UI only enqueues work (`await session.call_tool(...)`) and awaits the future. The transport is tapped
(`mcpworld.tui.wire.tap`), so `session.log` is the JSON-RPC traffic as it crossed the wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import mcp_types as types

from mcpworld.core import protocol as p
from mcpworld.core.models import TaskInfo
from mcpworld.core.paths import registry_token
from mcpworld.registry.connect import connect
from mcpworld.tui.errors import UserError, error_text
from mcpworld.tui.rpclog import RpcLog, mcp_json
from mcpworld.tui.wire import tap

T = TypeVar("T")


class SessionClosed(UserError, ConnectionError):
    """The connection is gone (or never came up); the message says why."""


class Api:
    """What a queued job gets: the entered client and its episode control plane (the session's task only)."""

    def __init__(self, client: Any, timeout_s: float | None):
        self.client = client
        self.ctl = p.EpisodeControl(client, timeout_s)


Job = tuple[Callable[[Api], Awaitable[Any]], asyncio.Future]


class ServerSession:
    """A long-lived connection to one server, driven through a queue by `run()` (run it in one worker)."""

    def __init__(self, target: str | dict[str, Any], registry: str | None = None, timeout_s: float = 30.0):
        self.target = target
        self.registry = registry
        self.timeout_s = timeout_s
        self.log = RpcLog()
        self.queue: asyncio.Queue[Job | None] = asyncio.Queue()
        self.connected = asyncio.Event()
        self.finished = asyncio.Event()
        self.error: str | None = None
        self.is_world = False
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.episode: str | None = None
        self.task: str | None = None
        self.instruction: str = ""
        self.ended: p.VerifyResult | None = None  # the verdict that ended the last task episode
        self._current: Job | None = None
        self._closing = False

    @property
    def label(self) -> str:
        if isinstance(self.target, dict):
            return self.target.get("server", self.target).get("name", "?")
        return self.target

    async def run(self) -> None:
        """Open the connection, serve queued jobs until `close()`, then close the episode and the connection."""
        try:
            async with connect(self.target, registry=self.registry, timeout=self.timeout_s,
                               wrap=lambda transport: tap(transport, self.log.record)) as client:
                api = Api(client, self.timeout_s)
                self._record_connect(client)
                self.connected.set()
                while (job := await self.queue.get()) is not None:
                    fn, future = self._current = job
                    try:
                        result = await fn(api)
                    except Exception as exc:
                        if not future.done():
                            future.set_exception(exc)
                    else:
                        if not future.done():
                            future.set_result(result)
                    self._current = None
                if self.episode is not None:
                    try:
                        await asyncio.wait_for(api.ctl.close(self.episode), 5)
                    except Exception:
                        pass
                    self.episode = None
            if not self._closing:  # the transport died and the SDK cancelled the connection's scope
                self.error = f"the connection to {self.label} was lost"
        except Exception as exc:
            self.error = error_text(exc)
        finally:
            self.connected.set()
            self.finished.set()
            self._fail_pending()

    def _record_connect(self, client: Any) -> None:
        info = client.server_info
        self.server_info = mcp_json(info) if info is not None else {}
        caps = self.capabilities = mcp_json(client.server_capabilities)
        self.is_world = p.EXTENSION_ID in (caps.get("extensions") or {})

    def _fail_pending(self) -> None:
        error = SessionClosed(self.error or "the connection is closed")
        if self._current is not None and not self._current[1].done():
            self._current[1].set_exception(error)
        self._current = None
        while not self.queue.empty():
            job = self.queue.get_nowait()
            if job is not None and not job[1].done():
                job[1].set_exception(error)

    async def wait_connected(self) -> None:
        """Return once connected; raise SessionClosed if the connection failed."""
        await self.connected.wait()
        if self.error is not None or self.finished.is_set():
            raise SessionClosed(self.error or "the connection is closed")

    async def submit(self, fn: Callable[[Api], Awaitable[T]]) -> T:
        """Run `fn` on the session's task with its client and return its result (or raise its error)."""
        if self.finished.is_set():
            raise SessionClosed(self.error or "the connection is closed")
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        await self.queue.put((fn, future))
        return await future

    def close(self) -> None:
        """Ask `run()` to finish: it closes the live episode and leaves the connection from its own task."""
        if not self.finished.is_set() and not self._closing:
            self._closing = True
            self.queue.put_nowait(None)

    async def aclose(self, timeout_s: float = 5.0) -> None:
        self.close()
        try:
            await asyncio.wait_for(self.finished.wait(), timeout_s)
        except TimeoutError:
            pass

    # -- conveniences the screens use ------------------------------------------------------------------

    async def list_tools(self) -> list[types.Tool]:
        async def every_page(api: Api) -> list[types.Tool]:
            tools: list[types.Tool] = []
            cursor: str | None = None
            while True:
                page = await api.client.list_tools(cursor=cursor, cache_mode="bypass")
                tools += page.tools
                if not (cursor := page.next_cursor):
                    return tools

        return await self.submit(every_page)

    async def list_prompts(self) -> list[types.Prompt]:
        return (await self.submit(lambda api: api.client.list_prompts(cache_mode="bypass"))).prompts

    async def list_resources(self) -> list[types.Resource]:
        return (await self.submit(lambda api: api.client.list_resources(cache_mode="bypass"))).resources

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        return await self.submit(lambda api: api.client.read_resource(uri))

    async def tasks(self) -> list[TaskInfo]:
        return (await self.submit(lambda api: api.ctl.tasks())).tasks

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        episode = self.episode if self.is_world else None
        if episode is None:
            return await self.submit(lambda api: api.client.call_tool(name, arguments))
        return await self.submit(lambda api: api.ctl.call(episode, name, arguments))

    async def start(self, task: str | None, seed: int = 0) -> p.StartResult:
        """Start an episode (closing the previous one) and make it the live one."""
        async def go(api: Api) -> p.StartResult:
            started = await api.ctl.start(task, seed)
            if self.episode is not None and self.episode != started.episode:
                try:
                    await api.ctl.close(self.episode)
                except Exception:
                    pass
            self.episode, self.task, self.instruction = started.episode, started.task, started.instruction
            self.ended = None
            return started

        return await self.submit(go)

    async def verify(self, answer: str | None = None) -> p.VerifyResult:
        """Judge the live episode, which ends it (one verdict per episode). A person at their own terminal is
        the harness: the verdict comes in full, with the local registry token."""
        episode = self._live()
        token = registry_token(None)[0]
        result = await self.submit(lambda api: api.ctl.verify(episode, answer, token=token))
        if result.closed and self.episode == episode:
            self.episode, self.ended = None, result
        return result

    async def state(self, table: str | None = None, limit: int = 100) -> p.StateResult:
        episode = self._live()
        return await self.submit(lambda api: api.ctl.state(episode, table, limit))

    def _live(self) -> str:
        if self.episode is None:
            raise SessionClosed("no live episode: start one first")
        return self.episode
