"""How a response leaves the server: uvicorn's HTTP protocol as mcpworld runs it (`serving.guarded_protocol`), fed
a request's bytes, its writes recorded at the socket's edge. A small answer goes out in one write (a client waiting
on it is woken once), a streamed one's head is not held back for its body, and nothing is lost when the
connection closes with the head unsent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcpworld.core import serving


class Recording:
    """The socket's end of a transport: what the protocol wrote, in order, and whether it closed."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        if data:
            self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8765), "peername": ("127.0.0.1", 5555)}.get(name, default)

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


def request(path: str, body: bytes = b"{}", extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:8765\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


async def wait_for(condition: Any, what: str) -> None:
    for _ in range(10_000):  # turns of the loop, not seconds: the protocol's work is all on this loop
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def connected(app: Any) -> tuple[Any, Recording]:
    import uvicorn
    from uvicorn.server import ServerState

    config = uvicorn.Config(app, http=serving.guarded_protocol(), log_level="critical", lifespan="off")
    config.load()
    protocol = config.http_protocol_class(config=config, server_state=ServerState(), app_state={})
    transport = Recording()
    protocol.connection_made(transport)
    return protocol, transport


def test_a_small_answer_leaves_in_one_write() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        answer = b'{"got": %d}' % len(message["body"])
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(answer))]})
        await send({"type": "http.response.body", "body": answer})

    async def main() -> None:
        protocol, transport = await connected(app)
        protocol.data_received(request("/mcp", b'{"x": 1}'))
        await wait_for(lambda: transport.writes, "an answer")
        await asyncio.sleep(0)  # a turn more: nothing else follows
        assert len(transport.writes) == 1, transport.writes
        head, _, body = transport.writes[0].partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"content-length: 10" in head and body == b'{"got": 8}'
        protocol.data_received(request("/mcp"))  # the next request on the connection: one write again
        await wait_for(lambda: len(transport.writes) == 2, "a second answer")
        assert transport.writes[1].startswith(b"HTTP/1.1 200") and transport.writes[1].endswith(b'{"got": 2}')
        protocol.connection_lost(None)

    asyncio.run(main())


def test_a_streamed_answer_shows_its_head_before_its_body() -> None:
    release = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await release.wait()  # the body comes later (an SSE stream): the client must see the head meanwhile
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": False})

    async def main() -> None:
        protocol, transport = await connected(app)
        protocol.data_received(request("/stream"))
        await wait_for(lambda: transport.writes, "the head")
        assert transport.writes[0].startswith(b"HTTP/1.1 200") and transport.writes[0].endswith(b"\r\n\r\n")
        release.set()
        await wait_for(lambda: len(transport.writes) == 2, "the body")
        assert b"data: 1" in transport.writes[1]
        protocol.connection_lost(None)

    asyncio.run(main())


def test_a_head_is_written_before_the_connection_closes() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"2"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": b"{}"})

    async def main() -> None:
        protocol, transport = await connected(app)
        protocol.data_received(request("/mcp"))
        await wait_for(lambda: transport.closed, "the close")
        assert len(transport.writes) == 1 and transport.writes[0].endswith(b"\r\n\r\n{}")

    asyncio.run(main())


def test_an_app_failing_after_its_head_still_sends_the_head_then_closes() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"100")]})
        raise RuntimeError("the app broke mid-answer")

    async def main() -> None:
        protocol, transport = await connected(app)
        protocol.data_received(request("/mcp"))
        await wait_for(lambda: transport.closed, "the close")
        assert transport.writes and transport.writes[0].startswith(b"HTTP/1.1 200")

    asyncio.run(main())


@pytest.mark.parametrize("expect", [True, False])
def test_100_continue_is_not_held(expect: bool) -> None:
    """A client that sends `Expect: 100-continue` waits for it before sending its body: it must go out at once."""
    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": message["body"][:2]})

    async def main() -> None:
        protocol, transport = await connected(app)
        head = request("/mcp", b"{}", "Expect: 100-continue\r\n" if expect else "")
        protocol.data_received(head[:-2])  # the head only
        if expect:
            await wait_for(lambda: transport.writes, "100 Continue")
            assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
        protocol.data_received(b"{}")
        await wait_for(lambda: any(w.startswith(b"HTTP/1.1 200") for w in transport.writes), "the answer")
        assert transport.writes[-1].endswith(b"\r\n\r\n{}")
        protocol.connection_lost(None)

    asyncio.run(main())
