"""One MCP episode owned by one asyncio task for its whole life: connect, start, play, verify, close.

The MCP SDK ties a connection to the task that opened it (anyio cancel scopes and a task group): when the
transport dies it cancels that task, and a scope left from another task fails ("Attempted to exit cancel scope
in a different task"). A TRL tool call, run from another thread, must see neither. So the connection, every
request on it and its closing run in one task of ours; the rollout hands it requests through a queue and gets
each answer, or a `ConnectionError` once the episode is lost: never a cancellation. It costs a connection and
a handshake per episode; the OpenRLHF bridge shares one pooled `EpisodeClient` instead (`SharedClient`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import mcp_types as types

from mcpworld.core.models import ToolCall, Verdict
from mcpworld.core.protocol import EpisodeControl
from mcpworld.registry.connect import connect


class EpisodeLost(ConnectionError):
    """The episode's connection is gone (or never came up); `cause` is what ended it, for `infra_reason`."""

    def __init__(self, cause: BaseException):
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause


def tool_text(result: types.CallToolResult) -> str:
    """A tool result's text blocks, as the model reads them."""
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent)) or "(no content)"


class EpisodeTask:
    """One episode of `task` on `server`, played through `open` / `call` / `verify` / `close` from any task."""

    def __init__(self, server: str, task: str, seed: int = 0, registry: str | None = None, timeout: float = 60.0):
        self.server, self.task, self.seed, self.registry, self.timeout = server, task, seed, registry, timeout
        self.tools: list[types.Tool] = []
        self.policy = ""  # the world's rules, as the server states them at start
        self.failure: BaseException | None = None  # what lost the episode, when something did
        self._inbox: asyncio.Queue[tuple[str, Any, asyncio.Future[Any]]] = asyncio.Queue()
        self._ready: asyncio.Future[None] | None = None
        self._runner: asyncio.Task[None] | None = None

    async def open(self) -> list[types.Tool]:
        """Connect and start the episode; the domain tools. Raises `EpisodeLost` when it cannot."""
        self._ready = asyncio.get_running_loop().create_future()
        self._runner = asyncio.create_task(self._run(self._ready), name=f"mcpworld episode {self.task}")
        await self._wait(self._ready)
        return self.tools

    async def call(self, calls: list[ToolCall]) -> list[tuple[str, bool]]:
        """Each call's (text, is_error), in order; a tool's own error is a result, a lost episode raises."""
        return await self._ask("call", calls)  # type: ignore[no-any-return]

    async def verify(self, answer: str | None) -> Verdict:
        """The verifier's verdict on the episode as it stands; the server closes the episode with it."""
        return await self._ask("verify", answer)  # type: ignore[no-any-return]

    async def close(self, timeout: float = 10.0) -> None:
        """End the episode (if still open) and the connection, in the owning task; never raises."""
        runner = self._runner
        if runner is None or runner.done():
            return
        self._inbox.put_nowait(("close", None, asyncio.get_running_loop().create_future()))
        done, _ = await asyncio.wait({runner}, timeout=timeout)
        if not done:  # the server hangs on close: give up on it (the task swallows its own cancellation)
            runner.cancel()
            await asyncio.wait({runner}, timeout=timeout)

    async def _ask(self, kind: str, arg: Any) -> Any:
        if self._runner is None or self._runner.done():
            raise EpisodeLost(self.failure or ConnectionError("the episode is closed"))
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inbox.put_nowait((kind, arg, answer))
        return await self._wait(answer)

    async def _wait(self, answer: asyncio.Future[Any]) -> Any:
        """`answer`'s result, or `EpisodeLost` as soon as the owning task is gone. A cancellation of the caller
        propagates (the trainer is stopping it); nothing else here cancels anyone."""
        assert self._runner is not None
        await asyncio.wait({answer, self._runner}, return_when=asyncio.FIRST_COMPLETED)
        if answer.done():
            return answer.result()
        raise EpisodeLost(self.failure or ConnectionError("the episode's task ended"))

    async def _run(self, ready: asyncio.Future[None]) -> None:
        """The owning task. Ends normally whatever happens: its failure is kept in `self.failure`."""
        pending: asyncio.Future[Any] | None = None
        try:
            async with connect(self.server, registry=self.registry, timeout=self.timeout) as client:
                ctl = EpisodeControl(client, self.timeout)
                self.tools = await ctl.tools()
                started = await ctl.start(self.task, self.seed)
                episode: str | None = started.episode
                self.policy = started.policy or ""
                ready.set_result(None)
                try:
                    while episode is not None:
                        kind, arg, pending = await self._inbox.get()
                        if kind == "close":
                            pending.set_result(None)
                            break
                        if kind == "call":
                            results = [await ctl.call(episode, c.name, c.arguments) for c in arg]
                            pending.set_result([(tool_text(r), bool(r.is_error)) for r in results])
                        else:
                            verified = await ctl.verify(episode, arg, close=True)
                            if verified.closed:
                                episode = None
                            pending.set_result(verified.verdict)
                        pending = None
                finally:
                    if episode is not None:  # bounded and shielded: a dying server must not hold us here
                        with anyio.move_on_after(5, shield=True):
                            try:
                                await ctl.close(episode)
                            except Exception:  # the server may be gone: the episode dies with it
                                pass
        except BaseException as exc:  # noqa: BLE001 - the SDK cancels this task when the transport dies: ours to keep
            self.failure = exc
        finally:
            lost = EpisodeLost(self.failure or ConnectionError("the episode's connection closed"))
            for future in (ready, pending):
                if future is not None and not future.done():
                    future.set_exception(lost)
            while not self._inbox.empty():
                kind, _, future = self._inbox.get_nowait()
                if not future.done():  # nobody waits on a close: it is done, whatever ended the episode
                    future.set_result(None) if kind == "close" else future.set_exception(lost)

