"""A tap on a client transport's streams: every JSON-RPC message, as sent and as received, reaches a hook.

`tap(transport, hook)` wraps any MCP client transport (an async context manager yielding the read and write
streams), so the TUI's log shows what actually crossed the wire (ids, `_meta`, the handshake, notifications)
rather than what the UI meant to send.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal

import anyio
from mcp.shared.message import SessionMessage

Direction = Literal["sent", "received"]
Hook = Callable[[Direction, SessionMessage | Exception], None]


class _TappedRead:
    """The read stream, calling `hook("received", item)` for each item before the session sees it."""

    def __init__(self, inner: Any, hook: Hook):
        self.inner, self.hook = inner, hook

    @property
    def last_context(self) -> Any:  # the SDK reads the sender's context here when the inner stream has one
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        item = await self.inner.receive()
        self.hook("received", item)
        return item

    def __aiter__(self) -> _TappedRead:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> _TappedRead:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self.inner.__aexit__(*exc)


class _TappedWrite:
    """The write stream, calling `hook("sent", message)` as each message is handed to the transport."""

    def __init__(self, inner: Any, hook: Hook):
        self.inner, self.hook = inner, hook

    async def send(self, item: SessionMessage, /) -> None:
        self.hook("sent", item)
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> _TappedWrite:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self.inner.__aexit__(*exc)


def tap(transport: AbstractAsyncContextManager[Any], hook: Hook) -> AbstractAsyncContextManager[Any]:
    """`transport` with both streams tapped; a hook that raises is the caller's bug, so keep hooks simple."""

    @asynccontextmanager
    async def tapped() -> AsyncIterator[tuple[_TappedRead, _TappedWrite]]:
        async with transport as (read, write):
            yield _TappedRead(read, hook), _TappedWrite(write, hook)

    return tapped()


def message_json(item: SessionMessage | Exception) -> dict[str, Any]:
    """The JSON-RPC message as the JSON object it is on the wire (an exception as a transport error)."""
    if isinstance(item, Exception):
        return {"transportError": f"{type(item).__name__}: {item}"}
    return item.message.model_dump(mode="json", by_alias=True, exclude_unset=True)  # as the transports send it
