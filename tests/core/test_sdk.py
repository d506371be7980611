"""A canary for the MCP SDK internals mcpworld leans on (`mcpworld/core/sdk.py`, and the SDK `Server`
attributes the lean transport reads): it fails when an SDK release moves or changes them, before serving breaks
silently. It also holds `pyproject.toml`'s pin of `mcp` to the minor version these checks were written for.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import inspect
import re
import tomllib
from pathlib import Path

import mcp_types as types
from mcp.server import stdio
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.session import ServerSession

from mcpworld.core import sdk

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _mcp_requirement() -> str:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    return next(d for d in deps if re.match(r"mcp\b(?![-_])", d))


def test_mcp_is_pinned_to_the_minor_version_this_canary_covers() -> None:
    spec = _mcp_requirement()
    found = re.fullmatch(r"mcp>=(\d+)\.(\d+)(?:\.\d+)?,<(\d+)\.(\d+)", spec.replace(" ", ""))
    assert found, f"pin mcp to one minor version (mcp>=X.Y,<X.Y+1), not {spec!r}"
    major, minor, up_major, up_minor = map(int, found.groups())
    assert (up_major, up_minor) == (major, minor + 1), f"{spec!r} allows more than one minor version"
    installed = tuple(int(x) for x in importlib.metadata.version("mcp").split(".")[:2])
    assert installed == (major, minor), f"installed mcp {installed} is not the pinned {major}.{minor}"
    assert importlib.metadata.version("mcp-types").split(".")[:2] == [str(major), str(minor)]


def test_dump_result_shapes_results_as_the_runner_does() -> None:
    tool = types.CallToolResult(content=[types.TextContent(type="text", text="hi")], structured_content={"a": 1})
    dumped = sdk.dump_result(tool)
    assert dumped["structuredContent"] == {"a": 1} and dumped["content"][0]["text"] == "hi"  # by alias
    original = {"x": 1}
    copied = sdk.dump_result(original)
    assert copied == original and copied is not original
    assert sdk.dump_result(None) == {}


def test_the_opentelemetry_middleware_is_the_servers_only_default_middleware() -> None:
    """The transport's fast path is allowed exactly when a server has this one middleware and no tracer."""
    server: Server = Server("canary")
    assert [type(m) for m in server.middleware] == [sdk.OpenTelemetryMiddleware]


def test_server_attributes_the_transport_reads_exist() -> None:
    schemas = {"t": {"type": "object"}}
    server: Server = Server("canary", get_tool_input_schema=schemas.get)
    assert server.get_tool_input_schema("t") == {"type": "object"}
    assert isinstance(server.cache_hints, dict)
    assert isinstance(server.server_info_stamp, dict)
    assert server.get_request_handler("tools/call") is None  # no handler registered: None, not an error
    assert callable(server.lifespan)


def test_a_session_keeps_its_connection_where_session_connection_reads_it() -> None:
    params = inspect.signature(ServerSession.__init__).parameters
    assert "connection" in params
    session = ServerSession.__new__(ServerSession)
    connection = Connection.__new__(Connection)
    with contextlib.suppress(Exception):  # only where the constructor puts it matters
        ServerSession.__init__(session, None, connection)  # type: ignore[arg-type]
    assert sdk.session_connection(session) is connection
    assert sdk.session_connection(None) is None


def test_exit_stack_cleanup_is_visible_to_has_cleanup() -> None:
    class Held:
        exit_stack = contextlib.AsyncExitStack()

    assert not sdk.has_cleanup(Held)
    Held.exit_stack.push_async_callback(lambda: None)  # type: ignore[arg-type, return-value]
    assert sdk.has_cleanup(Held)


def test_the_stdio_claim_keeps_its_signature() -> None:
    claim = getattr(stdio, "_claim_fd", None)
    assert claim is not None, "mcp.server.stdio._claim_fd is gone: core/sdk.claim_stdio_fd serves fds in place"
    assert list(inspect.signature(claim).parameters) == ["fd", "stream", "mode", "open_diversion"]
    assert callable(stdio._open_stdin_diversion) and callable(stdio._open_stdout_diversion)
