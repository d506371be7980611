"""The checked stdio transport every mcpworld stdio server runs on: each incoming line is checked before the
SDK sees it (`stdio_streams`, `run_stdio`), so one malformed line gets a JSON-RPC error back instead of ending
the session."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio

logger = logging.getLogger(__name__)


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


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport over this process's stdin/stdout, with every incoming line checked first.

    A line that is not one valid JSON-RPC message gets a JSON-RPC error written back (-32700 or -32600, with
    the request's id when it can be read) and is never handed on, so the server keeps serving the next line.
    Every mcpworld stdio server runs on this.
    """
    from mcp.server.stdio import stdio_server

    from mcpworld.core.sdk import claim_stdio_fd

    stdin_buffer, restore_stdin = claim_stdio_fd(0, sys.stdin, "rb")
    try:
        stdout_buffer, restore_stdout = claim_stdio_fd(1, sys.stdout, "wb")
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
    """Run a low-level MCP `Server` on stdin/stdout (checked lines) until the client hangs up, or Ctrl-C.

    Typed in a terminal, it says on stderr what it waits for (it looked frozen, issue 35). Ctrl-C ends it at
    once: the thread reading stdin cannot be interrupted, and waiting for it kept the process alive until
    Ctrl-D. An episode lives in memory only, so nothing is lost by not waiting."""
    if sys.stdin.isatty():
        print(f"{server.name}: an MCP server on stdin/stdout, waiting for a client (one JSON-RPC message per "
              "line). Add this command to an MCP client's configuration instead of typing here "
              "(`mcpworld registry export --help`); Ctrl-C stops it.", file=sys.stderr, flush=True)
    signal.signal(signal.SIGINT, _stop_at_once)  # set first, asyncio's runner leaves it in place

    async def main() -> None:
        async with stdio_streams() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def _stop_at_once(signum: int, frame: Any) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write("stopped (Ctrl-C)\n")
        sys.stderr.flush()
    os._exit(130)
