"""Serving helpers: an ASGI app on a local port in a background thread (arena, replay LLM, tests), and the
checked stdio transport every mcpworld stdio server runs on (`stdio_streams`, `run_stdio`)."""

from __future__ import annotations

import contextlib
import contextvars
import io
import json
import logging
import re
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import uvicorn

logger = logging.getLogger(__name__)


@contextmanager
def serve_in_thread(app: Any, port: int, startup_timeout_s: float = 30.0) -> Iterator[str]:
    """Serve `app` on 127.0.0.1:port until the block ends; yields the base URL once the server accepts."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
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


# -- stdio: every line is checked before the SDK sees it -------------------------------------------------------

MAX_JSON_DEPTH = 128  # deeper than any real MCP message; far below where a parser's recursion runs out
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _depth(line: str) -> int:
    """Deepest bracket nesting of a JSON text, strings ignored (cheap unless the line has many brackets)."""
    if line.count("[") + line.count("{") <= MAX_JSON_DEPTH:
        return 0
    depth = deepest = 0
    for m in _BRACKETS.finditer(_STRING.sub('""', line)):
        depth += 1 if m.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _request_id(message: Any) -> str | int | None:
    """The id of a (possibly invalid) request, when it is a usable JSON-RPC id."""
    rid = message.get("id") if isinstance(message, dict) else None
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        return None
    if isinstance(rid, str):
        try:
            rid.encode("utf-8")
        except UnicodeEncodeError:
            return None
    return rid


def check_jsonrpc_line(line: str) -> tuple[int, str, str | int | None] | None:
    """None when `line` is one well-formed JSON-RPC message the SDK can take; else (code, message, id) to reply.

    Refused: text that is not JSON (-32700), nesting deeper than MAX_JSON_DEPTH, batches (MCP 2025-11-25 has
    no batching), lone UTF-16 surrogates (not Unicode: the reply could not even be encoded), and anything
    that is not a JSON-RPC request, notification or response (-32600).
    """
    import mcp_types as types

    depth = _depth(line)
    try:
        message = json.loads(line)
    except RecursionError:
        return types.PARSE_ERROR, f"Parse error: JSON nested deeper than {MAX_JSON_DEPTH} levels", None
    except ValueError as exc:
        return types.PARSE_ERROR, f"Parse error: {exc}", None
    if depth > MAX_JSON_DEPTH:
        return (types.INVALID_REQUEST, f"Invalid request: JSON nested {depth} levels deep (max {MAX_JSON_DEPTH})",
                _request_id(message))
    if isinstance(message, list):
        return (types.INVALID_REQUEST, "Invalid request: JSON-RPC batches are not supported; send one message a line",
                None)
    if not isinstance(message, dict):
        return types.INVALID_REQUEST, "Invalid request: a JSON-RPC message is a JSON object", None
    if _SURROGATE_ESCAPE.search(line):
        try:
            json.dumps(message, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return (types.INVALID_REQUEST, "Invalid request: the message contains a lone UTF-16 surrogate (e.g. "
                    "\\ud800), which is not valid Unicode", _request_id(message))
    try:
        types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    except Exception as exc:  # pydantic's ValidationError, or anything else the SDK would choke on
        first = str(exc).splitlines()[0][:200]
        return types.INVALID_REQUEST, f"Invalid request: not a JSON-RPC 2.0 message ({first})", _request_id(message)
    return None


def error_line(code: int, message: str, rid: str | int | None) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}},
                      separators=(",", ":")) + "\n"


class _LineWriter:
    """stdout for the SDK's writer and ours: each line is written and flushed whole, under one lock."""

    def __init__(self, out: Any):
        self._out = out
        self._lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self._lock:
            await self._out.write(text)
            await self._out.flush()

    async def flush(self) -> None:  # each write flushed already
        return None


class _CheckedLines:
    """stdin for the SDK: yields the lines that are valid messages; answers the others itself and reads on."""

    def __init__(self, lines: Any, out: _LineWriter):
        self._lines = lines
        self._out = out

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._lines:
            if not line.strip():
                continue  # a blank line is framing, not a message
            problem = check_jsonrpc_line(line)
            if problem is None:
                yield line
                continue
            logger.warning("stdio: refused a message: %s", problem[1])
            await self._out.write(error_line(*problem))


class _Unowned(io.TextIOWrapper):
    """A text layer whose close never closes the descriptor under it (a reader thread may still block on it)."""

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            self.detach()


def _claim(fd: int, stream: Any, mode: str) -> tuple[Any, Any]:
    """The SDK's claim on fd 0/1 (stray prints and child processes miss the wire), else the stream in place."""
    from mcp.server import stdio as sdk_stdio

    claim = getattr(sdk_stdio, "_claim_fd", None)
    if claim is not None:
        diversion = sdk_stdio._open_stdin_diversion if fd == 0 else sdk_stdio._open_stdout_diversion
        try:
            return claim(fd, stream, mode, diversion)  # RuntimeError (fd already claimed) propagates, as in the SDK
        except TypeError:  # a changed private signature: serve in place rather than not at all
            logger.debug("mcp.server.stdio._claim_fd changed; serving fd %d in place", fd)
    return stream.buffer, None


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport over this process's stdin/stdout, with every incoming line checked first.

    A line that is not one valid JSON-RPC message gets a JSON-RPC error written back (-32700 or -32600, with
    the request's id when it can be read) and is never handed on, so the server keeps serving the next line.
    Every mcpworld stdio server runs on this.
    """
    from mcp.server.stdio import stdio_server

    stdin_buffer, restore_stdin = _claim(0, sys.stdin, "rb")
    try:
        stdout_buffer, restore_stdout = _claim(1, sys.stdout, "wb")
    except BaseException:
        if restore_stdin is not None:
            restore_stdin()
        raise
    try:
        out = _LineWriter(anyio.wrap_file(_Unowned(stdout_buffer, encoding="utf-8")))
        lines = _CheckedLines(anyio.wrap_file(_Unowned(stdin_buffer, encoding="utf-8", errors="replace")), out)
        async with stdio_server(stdin=lines, stdout=out) as streams:  # type: ignore[arg-type]
            yield streams
    finally:
        if restore_stdout is not None:
            restore_stdout()
        if restore_stdin is not None:
            restore_stdin()


def run_stdio(server: Any) -> None:
    """Run a low-level MCP `Server` on stdin/stdout (checked lines) until the client hangs up."""

    async def main() -> None:
        async with stdio_streams() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


# -- tool calls that may block: off the event loop, with a deadline ----------------------------------------------

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
