"""Serving an ASGI app over HTTP: `serve` (the process a server command runs: request-head deadlines and size
limits, direct dispatch to the MCP endpoints, the port check, workers), and `serve_in_thread` (an app on a local
port in a background thread: arena, replay LLM, tests). Stdio is `core/stdio.py`; blocking tool calls are
`core/blocking.py`."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import uvicorn

logger = logging.getLogger(__name__)


@contextmanager
def serve_in_thread(app: Any, port: int, startup_timeout_s: float = 30.0) -> Iterator[str]:
    """Serve `app` on 127.0.0.1:port until the block ends; yields the base URL once the server accepts."""
    server = uvicorn.Server(config(app, host="127.0.0.1", port=port))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    if not server.started:
        server.should_exit = True
        raise RuntimeError(f"server on 127.0.0.1:{port} did not start within {startup_timeout_s:g}s")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


# -- serving on a port: one process or `--workers N` ------------------------------------------------------

def listening_socket(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """A TCP socket listening on host:port (SO_REUSEADDR as uvicorn binds; SO_REUSEPORT for `--workers`)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise SystemExit(f"error: cannot listen on {host}:{port} ({exc.strerror}); pass --port to pick another") \
            from None
    sock.listen(2048)
    sock.set_inheritable(False)
    return sock


# A connection must start and finish each request head this soon (from connecting, or from its first byte after
# a response); MCPWORLD_HTTP_HEAD_TIMEOUT_S sets it. Idle keep-alive connections are closed by uvicorn (5 s).
HEAD_DEADLINE_S = float(os.environ.get("MCPWORLD_HTTP_HEAD_TIMEOUT_S") or 30.0)
# The most a request head may take (request line and headers). Why a size as well as a time: the parser copies a
# header value again on every packet that extends it, so one value streamed without end within the deadline cost
# the server quadratic time and stalled every other client (16 of 18 health probes timed out, issue 30).
MAX_HEAD_BYTES = 64 * 1024
_HEAD_TOO_LARGE = json.dumps({"error": f"request head over {MAX_HEAD_BYTES // 1024} KiB (request line and headers): "
                              "send large data in the body", "status": 431}).encode()


class _OneWrite:
    """A response's transport, as its request cycle sees it: the head is held until the body's first write (or
    the end of this turn of the event loop, for a response whose body comes later), so a small response leaves
    in one send() and one TCP segment instead of two. uvicorn writes them apart: a client waiting on one answer
    (concurrency 1) was woken for the head, then again for the body (docs/benchmarks.md, "one write per
    answer")."""

    __slots__ = ("_transport", "_cycle", "_loop", "_held", "_head_seen")

    def __init__(self, transport: Any, cycle: Any, loop: Any):
        self._transport, self._cycle, self._loop = transport, cycle, loop
        self._held: bytes | None = None
        self._head_seen = False

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
        elif not self._head_seen and self._cycle.response_started:  # the head (a 100 Continue comes before it)
            self._head_seen = True
            self._held = data
            self._loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def _flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def guarded_protocol() -> type:
    """uvicorn's HTTP protocol, plus the deadline it lacks: a connection that sends no request, or starts a request
    head and does not finish it (slowloris), within HEAD_DEADLINE_S is closed. So thousands of idle connections
    are not held for long, while a busy server's backlog (seconds at c=1024) never cuts a client's first request."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol  # httptools when installed (a dependency), else h11

    class Guarded(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _head_timer: Any = None
        _head_bytes = 0  # bytes of a request head received so far, while one is incomplete

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._head_timer = self.loop.call_later(HEAD_DEADLINE_S, self._head_overdue, None)

        def data_received(self, data: bytes) -> None:
            before = self.cycle
            if self._head_bytes > MAX_HEAD_BYTES:
                return  # refused already: the connection is closing
            super().data_received(data)
            if self.cycle is not before or self.transport.is_closing():
                self._head_bytes = 0
                if self._head_timer is not None:  # a request head completed
                    self._head_timer.cancel()
                    self._head_timer = None
            elif before is None or before.response_complete:  # still inside a request head
                self._head_bytes += len(data)
                if self._head_bytes > MAX_HEAD_BYTES:
                    self._head_too_large()
                elif self._head_timer is None:
                    self._head_timer = self.loop.call_later(HEAD_DEADLINE_S, self._head_overdue, before)

        def _head_too_large(self) -> None:
            logger.info("refusing a request head over %d bytes", MAX_HEAD_BYTES)
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            self.transport.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
                                 b"content-length: %d\r\nconnection: close\r\n\r\n" % len(_HEAD_TOO_LARGE)
                                 + _HEAD_TOO_LARGE)
            self.transport.close()

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            cycle = getattr(self, "cycle", None)
            if cycle is not None and type(cycle.transport) is not _OneWrite:
                cycle.transport = _OneWrite(cycle.transport, cycle, self.loop)

        def on_header(self, name: bytes, value: bytes) -> None:  # httptools keeps OWS; RFC 9110 §5.5 drops it
            super().on_header(name, value.strip(b" \t"))

        def _head_overdue(self, cycle: Any) -> None:
            self._head_timer = None
            if self.cycle is cycle and not self.transport.is_closing():
                logger.info("closing a connection that sent no whole request head within %gs", HEAD_DEADLINE_S)
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            super().connection_lost(exc)

    return Guarded


class DirectEndpoints:
    """ASGI: a request for one of `mounts`' MCP endpoints (`/worlds/airline/mcp`) goes straight to that endpoint,
    past the app's router and middleware; everything else (and the lifespan) goes to `app`.

    Why: the endpoints answer nearly every request of a training run, and Starlette's router matches a path
    against every route in turn (one mount per world, then the registry's), wrapping each request in its
    middleware layers; for a small tool call that was about 6 % of the server's time (docs/benchmarks.md,
    "Serving"). What the skipped layers did is the endpoint's own job already: each endpoint is guarded by its
    `Exposure` (Host/Origin, the token) and answers its own errors. A request with an `Origin` header (a browser)
    still takes the full stack, so CORS is as the app configures it. The mounts are handed in by whoever composed
    the app (`episode_server.endpoint_app`), never read back off its router.
    """

    def __init__(self, app: Any, mounts: Iterable[Any]):
        self.app = app
        self.endpoints: dict[str, tuple[str, Any]] = {}  # path -> (mount prefix, endpoint app)
        for mount in mounts:
            self.add(mount)

    def add(self, mount: Any) -> None:
        """Answer `mount`'s MCP endpoint directly too (a Mount the composer adds while serving)."""
        from mcpworld.core.streamable import StreamableHTTP

        inner = mount.app
        transport = inner if isinstance(inner, StreamableHTTP) else getattr(inner, "app", None)  # past a guard
        if isinstance(transport, StreamableHTTP):
            self.endpoints.setdefault(mount.path + transport.path, (mount.path, inner))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            hit = self.endpoints.get(scope["path"])
            if hit is not None and b"origin" not in dict(scope["headers"]):
                await hit[1]({**scope, "root_path": hit[0]}, receive, send)
                return
        await self.app(scope, receive, send)


def _when_started(server: Any, then: Callable[[], None]) -> None:
    """Run `then()` once `server` has started (its lifespan done, its sockets served); never if it stops first."""
    while not server.started:
        if server.should_exit:
            return
        time.sleep(0.02)
    then()


def raise_descriptor_limit(cap: int = 1 << 20) -> int:
    """Let this process hold as many sockets as the hard limit allows (up to `cap`); returns the soft limit.

    Why: the common soft limit is 1,024 descriptors, and about 1,100 idle connections (closed only after the head
    deadline) denied every other client (issue 30); the hard limit is usually far higher."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
    return soft


def config(app: Any, log_level: str = "warning", **options: Any) -> Any:
    """The uvicorn configuration every mcpworld HTTP server runs with."""
    import uvicorn

    raise_descriptor_limit()
    # An access line only where the log level shows it (uvicorn otherwise builds it per request, to be dropped);
    # no `server: uvicorn` header (it tells a client nothing it needs, and costs each response two regex checks).
    options.setdefault("access_log", log_level in ("info", "debug", "trace"))
    options.setdefault("server_header", False)
    return uvicorn.Config(app, log_level=log_level, http=guarded_protocol(), backlog=2048,  # loop: uvloop if there
                          **options)


# Python's cyclic collector, as a server process runs it (young passes every 50,000 new objects, not 700).
COLLECTOR_THRESHOLDS = (50_000, 50, 100)


def settle_collector() -> None:
    """Once the app is built: freeze what start-up made (modules, worlds, their ORM mappings) out of the cyclic
    collector's passes, and run young passes every 50,000 new objects instead of 700.

    Why: at 1,024 live episodes the collector took 28% of a world server's CPU (a full pass ~170 ms), while a
    request and a closed episode leave no reference cycles for it to find (tests/core/test_serving_collector.py):
    each pass only rescanned what was alive. Cycles made elsewhere (an exception's traceback) are still
    collected, by the next young pass."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)


def _exit_cleanly_on_sigterm() -> None:
    """uvicorn re-raises SIGTERM once it has shut down; under Python's default handler that kills the process
    before any `finally` runs (`up` would leave its up.json behind). Exit through the `finally` blocks instead."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))


def serve(build: Callable[[], Any], host: str, port: int, workers: int = 1, log_level: str = "warning",
          on_ready: Callable[[], None] | None = None) -> None:
    """Serve the ASGI app `build()` makes on host:port: in this process, or as `workers` processes (this one then
    supervises: it re-runs this same command line in each worker, restarts a worker that dies, stops them all on
    Ctrl-C or SIGTERM). `on_ready()` runs once the port answers (every worker started): a banner that says "up"
    before then sent clients to a refused connection."""
    import uvicorn

    from mcpworld.core.workers import Supervisor, WorkerRouter, current

    worker = current()
    _exit_cleanly_on_sigterm()
    if worker is None and workers <= 1:
        app = build()
        settle_collector()
        server = uvicorn.Server(config(app, log_level))
        if on_ready is not None:
            threading.Thread(target=_when_started, args=(server, on_ready), daemon=True).start()
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises Ctrl-C once it has shut down cleanly
            server.run(sockets=[listening_socket(host, port)])
        return
    if worker is None:
        Supervisor(host, port, workers).run(on_ready)
        return
    tcp = listening_socket(host, port, reuse_port=True)
    path = worker.socket_path(worker.index)
    path.unlink(missing_ok=True)
    uds = socket.socket(socket.AF_UNIX)
    uds.bind(str(path))
    uds.listen(2048)
    app = build()
    settle_collector()
    server = uvicorn.Server(config(WorkerRouter(app, worker), log_level))
    ready = worker.directory / f"ready-{worker.index}.{worker.generation}"

    async def main() -> None:
        import anyio

        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: server.serve(sockets=[tcp, uds]))
            while not server.started and not server.should_exit:
                await anyio.sleep(0.02)
            ready.write_text(str(os.getpid()))


    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(main)
