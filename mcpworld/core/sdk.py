"""Every use of the MCP SDK's private names, in one module.

Why: the lean transport (`core/streamable.py`) and the stdio server (`core/serving.py`) answer what the SDK
answers, and for that they lean on a few names the SDK does not promise to keep. Gathered here, a change in the
SDK shows up in one place, and `tests/core/test_sdk.py` fails on it before serving breaks silently; that test
covers the minor version `pyproject.toml` pins `mcp` to.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from mcp.server import stdio as _stdio
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.runner import _dump_result

logger = logging.getLogger(__name__)

__all__ = ["OpenTelemetryMiddleware", "claim_stdio_fd", "dump_result", "has_cleanup", "session_connection"]


def dump_result(result: Any) -> dict[str, Any]:
    """A handler's result as the SDK's runner dumps it: a model by alias, a dict copied, None as {}."""
    return _dump_result(result)


def session_connection(session: Any) -> Any:
    """The connection a request context's `ServerSession` answers on (None when it has none)."""
    return getattr(session, "_connection", None)


def has_cleanup(connection: Any) -> bool:
    """Whether a handler left cleanup on its connection's exit stack (the SDK's `serve_one` then closes it)."""
    return bool(getattr(connection.exit_stack, "_exit_callbacks", True))


def claim_stdio_fd(fd: int, stream: Any, mode: str) -> tuple[Any, Any]:
    """The SDK's claim on fd 0/1 (stray prints and child processes miss the wire): (binary stream, restore),
    else the stream in place and no restore."""
    claim = getattr(_stdio, "_claim_fd", None)
    if claim is not None:
        diversion = _stdio._open_stdin_diversion if fd == 0 else _stdio._open_stdout_diversion
        with contextlib.suppress(TypeError):  # a changed private signature: serve in place rather than not at all
            return claim(fd, stream, mode, diversion)  # RuntimeError (fd already claimed) propagates, as in the SDK
        logger.debug("mcp.server.stdio._claim_fd changed; serving fd %d in place", fd)
    return stream.buffer, None
