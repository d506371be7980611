"""The episode-server kernel: what the world, SWE and world-model MCP servers share, written once.

- `EpisodeTable`: live episodes by id, a default episode per connection for clients that send no id, a cap on how
  many are alive (slots reserved while a slow start runs), idle eviction, and freeing a closed session's episode.
- `connection_key`: which connection (HTTP session, stream, process) a request belongs to.
- Episode handles: a plain client on a sessionless (2026-07-28) connection has no connection to key a default
  episode by, so `EpisodeTable.for_call` mints it one and `with_handle_note` tells it the handle, an ordinary tool
  argument `episode` (SEP-2567) that `take_handle` takes off later calls. No two clients ever share an episode.
- `ToolBox`: a server's typed tools (`mcpworld.core.tools`) listed, checked (size, schema) and run, every outcome a
  tool result: an unexpected exception is an `isError` result that says what happened, never a JSON-RPC error.
- `text_result` / `value_result` / `argument_size_error`: the result helpers and the argument-size guard;
  `value_wire` / `error_wire`: the same results in their wire shape, for a server's `WireHooks.call_tool` (the
  transport's fast path: `mcpworld.core.streamable`);
  `no_resources`: the resource handlers of a server without resources.
- Hosting, one HTTP path for every server: `endpoint`/`mount` serve a low-level `Server` on mcpworld's Streamable
  HTTP transport (`mcpworld.core.streamable`) under a path, guarded by an `Exposure` (freeing a session's episode
  as soon as the client deletes it); `running` runs the mounted endpoints inside an app's lifespan;
  `endpoint_app` is a server process's whole app (routes, /healthz, lifespan).
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import json
import logging
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcpworld.core.protocol import EPISODE_META_KEY
from mcpworld.core.sdk import session_connection
from mcpworld.core.security import Exposure, ExposureMiddleware
from mcpworld.core.streamable import LOOPBACK_SECURITY, StreamableHTTP, WireHooks
from mcpworld.core.tools import ArgumentError, ToolSpec, build_tool

logger = logging.getLogger(__name__)

# -- results -------------------------------------------------------------------------------------------------------


def text_result(text: str, *, error: bool = False, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    """One text block (and optional structured content) as a tool result."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured,
                                is_error=error)


# On a tool function: `fn(value) -> str`, the text its values are sent as, alone (no structured content), because the
# server it imitates writes them so (an AWM import: FastApiMCP's indented JSON).
RESULT_TEXT_ATTR = "__mcpworld_result_text__"


def result_text(fn: Any) -> Callable[[Any], str] | None:
    """The tool function's own text for its values (`RESULT_TEXT_ATTR`), if it has one."""
    return getattr(fn, RESULT_TEXT_ATTR, None)


def value_result(value: Any, render: Callable[[Any], str] | None = None) -> types.CallToolResult:
    """A tool's return value: text as it is, anything else as JSON; structured content always an object. With the
    tool's own `render` (`result_text`): that text alone."""
    if render is not None:
        return text_result(render(value))
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text_result(text, structured=value if isinstance(value, dict) else {"result": value})


def wire_result(result: types.CallToolResult) -> dict[str, Any]:
    """A tool result in its wire shape: what the SDK sends for it at 2025-11-25 (no `resultType`)."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    dumped.pop("resultType", None)
    return dumped


def value_wire(value: Any, render: Callable[[Any], str] | None = None) -> dict[str, Any]:
    """`wire_result(value_result(value, render))`, built without the models when `value` is plain JSON (the common
    case: a row's columns), which is most of what a small tool call costs the server beyond the tool itself."""
    if render is not None:
        return {"content": [{"type": "text", "text": render(value)}], "isError": False}
    if isinstance(value, str):
        text = value
    else:
        try:  # the text value_result writes, whenever nothing in it needs `default` or pydantic (NaN becomes null)
            text = _plain_text(value)
        except (TypeError, ValueError):
            return wire_result(value_result(value))
    return {"content": [{"type": "text", "text": text}],
            "structuredContent": value if isinstance(value, dict) else {"result": value}, "isError": False}


def error_wire(text: str) -> dict[str, Any]:
    """`wire_result(text_result(text, error=True))`, without the models."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _not_plain(value: Any) -> Any:
    raise TypeError(type(value).__name__)


# Encoders made once (`json.dumps` with any option makes one per call, a third of a small dump's cost).
_plain_text = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=_not_plain).encode
_sized = json.JSONEncoder(default=str).encode


def argument_size_error(arguments: dict[str, Any], limit: int) -> types.CallToolResult | None:
    """The refusal of arguments over `limit` bytes of JSON (checked before anything parses them), else None."""
    size = len(_sized(arguments))
    if size <= limit:
        return None
    return text_result(f"arguments too large: {size} bytes (max {limit}); send less text", error=True)


def unexpected_error(what: str, exc: BaseException) -> str:
    """What a client is told about a failure that is the server's fault (the traceback goes to the log)."""
    logger.error("%s failed unexpectedly", what, exc_info=exc)
    return (f"{what} failed unexpectedly: {type(exc).__name__}: {exc}. This is a fault of the server, not of "
            "the request; nothing else was changed, so you may retry or report it.")


def no_resources() -> dict[str, Any]:
    """`Server` handlers for a server that has no resources but answers every resource request a client may send
    (`resources/list` and `resources/templates/list` empty, a read refused naming its uri, as SEP-2164 asks), so
    generic clients and the conformance suite get answers, not "method not found"."""

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        raise MCPError(code=types.INVALID_PARAMS, message=f"unknown resource {uri!r}: this server has no "
                       "resources (resources/list is empty)", data={"uri": uri})

    return {"on_list_resources": list_resources, "on_list_resource_templates": list_templates,
            "on_read_resource": read_resource}


# -- connections ---------------------------------------------------------------------------------------------------

_connection_keys: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
_connection_ids = itertools.count(1)


def connection_key(ctx: Any) -> str | None:
    """Which default episode a plain client gets, or None when the request belongs to no connection.

    A 2025-11-25 HTTP client has its session; a stream (stdio, a legacy in-memory connection) is one client for
    as long as it is open; an in-process 2026-07-28 client is its process. A sessionless (2026-07-28) HTTP
    request has no connection at all: nothing tells two such clients apart, so each gets a handle (`for_call`).
    """
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    session_id = headers.get("mcp-session-id") if headers is not None else None
    connection = session_connection(getattr(ctx, "session", None))
    session_id = session_id or getattr(connection, "session_id", None)
    if session_id:
        return session_key(session_id)
    if request is not None:
        return None  # sessionless HTTP: nothing tells two clients apart
    if connection is None or not getattr(connection, "has_standalone_channel", False):
        return "process"  # in-process (a Server handed to mcp.Client) at 2026-07-28: the embedding process's own
    # A 2026-07-28 stream makes a Connection per request, but every request shares the stream's outbound channel.
    stream = getattr(connection, "outbound", None) or connection
    try:
        key = _connection_keys.get(stream)
        if key is None:
            key = _connection_keys[stream] = f"connection:{next(_connection_ids)}"
    except TypeError:  # not weak-referenceable: key it by identity for its lifetime
        key = f"connection:id-{id(stream)}"
    return key


def session_key(session_id: str) -> str:
    """The connection key of an HTTP session (what `connection_key` returns for its requests)."""
    return f"session:{session_id}"


# -- episode handles (plain clients without a connection) ----------------------------------------------------------

HANDLE_ARGUMENT = "episode"  # the server-minted episode handle, as an ordinary tool argument (SEP-2567)
HANDLE_SCHEMA: dict[str, Any] = {
    "type": ["string", "null"], "default": None,
    "description": "Your episode's handle (returned by this server's tools, or by start_task): pass it on every call "
    "to keep working in the same episode; omit it once to start a fresh one.",
}


def take_handle(arguments: dict[str, Any] | None) -> tuple[str | None, dict[str, Any]]:
    """(the `episode` handle, the tool's own arguments without it): the tool never sees the handle."""
    rest = dict(arguments or {})
    handle = rest.pop(HANDLE_ARGUMENT, None)
    return (None if handle is None else str(handle)), rest


def requested_episode(ctx: Any, handle: str | None = None) -> str | None:
    """The episode a request names: its `_meta` id (the extension's, which always wins), else its handle."""
    meta = getattr(ctx, "meta", None)
    named = meta.get(EPISODE_META_KEY) if meta else None
    return str(named) if named is not None else handle


def with_handle(tool: types.Tool) -> types.Tool:
    """The tool as a sessionless plain client may be shown it: an optional `episode` handle among its arguments."""
    schema = dict(tool.input_schema or {"type": "object"})
    properties = dict(schema.get("properties") or {})
    if HANDLE_ARGUMENT in properties:
        return tool
    properties[HANDLE_ARGUMENT] = HANDLE_SCHEMA
    schema["properties"] = properties
    return tool.model_copy(update={"input_schema": schema})


def with_handle_note(result: types.CallToolResult, episode_id: str) -> types.CallToolResult:
    """A result of the call that minted `episode_id`: its handle in `_meta` and as a last text block."""
    note = (f"[episode {episode_id}: this call started a fresh episode; pass \"{HANDLE_ARGUMENT}\": "
            f"\"{episode_id}\" on your next calls to keep working in it]")
    return result.model_copy(update={
        "content": [*result.content, types.TextContent(type="text", text=note)],
        "meta": {**(result.meta or {}), EPISODE_META_KEY: episode_id},
    })


# -- the episode table ---------------------------------------------------------------------------------------------


class EpisodeError(LookupError):
    """An episode could not be found or started; the message says what to do."""


@dataclass
class EpisodeLimits:
    ttl_s: float = 1800.0
    max_episodes: int = 4096


class LiveEpisode(Protocol):
    id: str
    last_used: float


E = TypeVar("E", bound=LiveEpisode)


class EpisodeTable(Generic[E]):
    """Every live episode of one server. `open(task, seed)` makes one (it may be slow: the slot is reserved
    first, so concurrent starts never overshoot the cap); `close(episode)` frees what it holds; `busy(episode)`
    says it is serving a call (then idling never evicts it). Idle episodes are evicted lazily, when touched.
    Thread-safe: the SWE server starts and closes episodes in worker threads."""

    def __init__(self, open: Callable[[str | None, int], E], close: Callable[[E], None],
                 limits: EpisodeLimits | None = None, busy: Callable[[E], bool] | None = None):
        self._open, self._close, self._busy = open, close, busy
        self.limits = limits or EpisodeLimits()
        self._live: dict[str, E] = {}
        self._defaults: dict[str, str] = {}  # connection key -> episode id, for clients that send no id
        # Episodes minted for sessionless plain clients (their handle is all that names them): when the cap is
        # reached, the least recently used of these makes room before a new episode is refused.
        self._implicit: set[str] = set()
        self._starting = 0
        self._shut = False
        self._lock = threading.RLock()
        self._last_sweep = time.monotonic()

    def __len__(self) -> int:
        return len(self._live)

    def start(self, task: str | None, seed: int = 0, *, implicit: bool = False) -> E:
        """A fresh episode. `implicit`: minted for a plain client by handle, and evictable when the cap is hit."""
        self.sweep()
        self._reserve()
        try:
            episode = self._open(task, seed)
        except BaseException:
            with self._lock:
                self._starting -= 1
            raise
        with self._lock:
            self._starting -= 1
            shut = self._shut
            if not shut:
                self._live[episode.id] = episode
                if implicit:
                    self._implicit.add(episode.id)
        if shut:  # shut down while it was starting: do not leak what it holds
            self._close(episode)
            raise EpisodeError("the server is shutting down")
        return episode

    def _reserve(self) -> None:
        with self._lock:
            if self._shut:
                raise EpisodeError("the server is shutting down")
            idle = [eid for eid in self._implicit if not self._is_busy(eid)]
            if len(self._live) + self._starting >= self.limits.max_episodes and idle:
                self.close(min(idle, key=lambda eid: getattr(self._live.get(eid), "last_used", 0.0)))
            live = len(self._live) + self._starting
            if live >= self.limits.max_episodes:
                counting = ", counting starts in progress" if self._starting else ""
                raise EpisodeError(f"too many live episodes ({live} of max {self.limits.max_episodes}{counting}); "
                                   "close finished episodes or raise --max-episodes")
            self._starting += 1

    def _is_busy(self, episode_id: str) -> bool:
        episode = self._live.get(episode_id)
        return episode is not None and self._busy is not None and self._busy(episode)

    def get(self, episode_id: str) -> E:
        self.sweep()
        episode = self._live.get(episode_id)
        if episode is None:
            raise EpisodeError(
                f"unknown episode {episode_id!r}: it was closed, expired after {self.limits.ttl_s:g}s idle, "
                "or never existed; start a new one"
            )
        episode.last_used = time.monotonic()
        return episode

    def default(self, connection: str) -> E:
        """The episode for a client that sends no episode id: one per connection, made on first use."""
        episode_id = self._defaults.get(connection)
        if episode_id is not None and episode_id in self._live:
            return self.get(episode_id)
        episode = self.start(None)
        with self._lock:
            raced = self._defaults.get(connection)
            if raced is not None and raced in self._live:  # another call made it meanwhile: keep one
                other = self._live[raced]
            else:
                self._defaults[connection], other = episode.id, episode
        if other is not episode:
            self.close(episode.id)
        return other

    def for_call(self, ctx: Any, handle: str | None = None) -> tuple[E, bool]:
        """(the episode a plain tool call acts on, whether it was minted for this call). May start one: blocking.

        Its `_meta` id, else its `episode` handle, else its connection's default episode; a sessionless request
        with none of these gets a fresh episode (evictable at the cap) whose handle the caller must return to
        the client (`with_handle_note`), so it is never handed someone else's.
        """
        named = requested_episode(ctx, handle)
        if named is not None:
            return self.get(named), False
        key = connection_key(ctx)
        if key is not None:
            return self.default(key), False
        return self.start(None, implicit=True), True

    def default_id(self, connection: str) -> str | None:
        """The id of this connection's default episode, if it has a live one."""
        episode_id = self._defaults.get(connection)
        return episode_id if episode_id in self._live else None

    def replace_default(self, connection: str, task: str | None, seed: int = 0) -> E:
        """Start a task as this connection's default episode (the interactive `start_task` tool)."""
        old = self._defaults.pop(connection, None)
        if old is not None:
            self.close(old)
        episode = self.start(task, seed)
        self._defaults[connection] = episode.id
        return episode

    def close(self, episode_id: str) -> bool:
        with self._lock:
            episode = self._live.pop(episode_id, None)
            self._implicit.discard(episode_id)
        if episode is None:
            return False
        self._close(episode)
        return True

    def close_connection(self, connection: str) -> bool:
        """The connection ended (an HTTP session was deleted): close its default episode now, not at the TTL."""
        with self._lock:
            episode_id = self._defaults.pop(connection, None)
        return self.close(episode_id) if episode_id is not None else False

    def sweep(self) -> int:
        """Evict episodes idle longer than the TTL; cheap enough to call on every request."""
        now = time.monotonic()
        if now - self._last_sweep < min(1.0, self.limits.ttl_s / 2):
            return 0
        self._last_sweep = now
        expired = [eid for eid, e in list(self._live.items()) if now - e.last_used > self.limits.ttl_s
                   and not (self._busy is not None and self._busy(e))]
        for eid in expired:
            self.close(eid)
        return len(expired)

    def close_all(self) -> None:
        for eid in list(self._live):
            self.close(eid)

    def shutdown(self) -> None:
        """Close every episode and refuse new ones (server shutdown)."""
        with self._lock:
            self._shut = True
        self.close_all()


# -- typed tools ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedCall:
    """A tool call whose name and arguments passed the checks: run it with `ToolBox.run`. `handle`: the
    `episode` handle the call carried (taken off its arguments), when the box's tools act on episodes."""

    spec: ToolSpec
    arguments: dict[str, Any]
    handle: str | None = None


class ToolBox:
    """A server's typed tools: their MCP listing, the checks before a call, and the call turned into a result.

    A tool returns text, a JSON-able value, or a `CallToolResult`; an exception of one of the `expected` types
    is a tool error with its message; any other exception is a tool error saying what happened (and is logged).
    With `handles`, every call may carry an `episode` handle (`take_handle`), which its tool never sees.
    """

    def __init__(self, functions: Iterable[Callable[..., Any]], *, max_argument_bytes: int,
                 expected: Sequence[type[Exception]] = (), handles: bool = False):
        self.specs = {spec.name: spec for spec in map(build_tool, functions)}
        self.tools = [spec.mcp_tool() for spec in self.specs.values()]
        self._schemas = {t.name: t.input_schema for t in self.tools}
        self.max_argument_bytes = max_argument_bytes
        self.expected = tuple(expected)
        self.handles = handles
        clash = [name for name, spec in self.specs.items() if HANDLE_ARGUMENT in spec.args_model.model_fields]
        if handles and clash:
            raise ValueError(f"tools {clash} take an argument named {HANDLE_ARGUMENT!r}, the episode handle's name")

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's inputSchema, None for an unknown tool: the `Server`'s `get_tool_input_schema`, so the HTTP
        endpoint checks `Mcp-Param-*` headers (2026-07-28) against it."""
        return self._schemas.get(name)

    def prepare(self, params: types.CallToolRequestParams) -> PreparedCall | types.CallToolResult:
        """The checked call, or the error result for an unknown tool, oversized or invalid arguments."""
        spec = self.specs.get(params.name)
        if spec is None:
            return text_result(f"unknown tool {params.name!r}; available: {', '.join(self.specs)}", error=True)
        arguments = params.arguments or {}
        refused = argument_size_error(arguments, self.max_argument_bytes)
        if refused is not None:
            return refused
        handle = None
        if self.handles:
            handle, arguments = take_handle(arguments)
        try:
            return PreparedCall(spec, spec.parse(arguments), handle)
        except ArgumentError as exc:
            return text_result(str(exc), error=True)

    async def run(self, call: PreparedCall, context: Any) -> types.CallToolResult:
        """Run an async tool on the loop, a sync one in a worker thread (it may block); every outcome a result."""
        try:
            if inspect.iscoroutinefunction(call.spec.fn):
                value = await call.spec.fn(context, **call.arguments)
            else:
                value = await anyio.to_thread.run_sync(lambda: call.spec.fn(context, **call.arguments))
        except Exception as exc:
            return self.failure(call.spec.name, exc)
        return as_result(value)

    def failure(self, tool: str, exc: Exception) -> types.CallToolResult:
        """A tool error result for `exc`: its message when expected, else what went wrong (and logged)."""
        if isinstance(exc, self.expected):
            return text_result(str(exc), error=True)
        return text_result(unexpected_error(f"tool {tool!r}", exc), error=True)


def as_result(value: Any) -> types.CallToolResult:
    """A tool function's return value as a tool result."""
    return value if isinstance(value, types.CallToolResult) else value_result(value)


# -- hosting -------------------------------------------------------------------------------------------------------

# Each server's HTTP endpoints (weakly: an endpoint lives as long as the app that mounts it), for `running`.
_endpoints: weakref.WeakKeyDictionary[Any, list[weakref.ref[StreamableHTTP]]] = weakref.WeakKeyDictionary()


def endpoint(server: Any, exposure: Exposure, on_session_end: Callable[[str], Any] | None = None, *,
             auth: bool = True, wire: WireHooks | None = None) -> Any:
    """`server` (a low-level `Server`) over Streamable HTTP at `/mcp` below where it is mounted, on mcpworld's one
    transport (`mcpworld.core.streamable`: both protocol versions, Host/Origin checks, body limits, sessions).

    Beyond loopback `exposure` checks Host/Origin against its allow list and, with `auth`, needs the registry
    token. `on_session_end(connection key)` runs when a client deletes its HTTP session (or it expires), so the
    session's default episode (a SWE workspace) is freed at once instead of at the idle TTL. Run
    `running([server])` in the app's lifespan. `wire`: the server's hot-path handlers (`WireHooks`), if any.
    """
    def ended(session_id: str) -> Any:
        return on_session_end(session_key(session_id)) if on_session_end is not None else None

    app = StreamableHTTP(server, wire=wire,
                         security=exposure.transport_security() if exposure.exposed else LOOPBACK_SECURITY,
                         on_session_end=ended if on_session_end is not None else None)
    _endpoints.setdefault(server, []).append(weakref.ref(app))
    # on loopback the transport checks Host and Origin itself (LOOPBACK_SECURITY): no second pass per request
    return exposure.guard(app, auth=auth) if exposure.exposed else app


def mount(prefix: str, server: Any, exposure: Exposure, on_session_end: Callable[[str], Any] | None = None, *,
          auth: bool = True, wire: WireHooks | None = None) -> Any:
    """A Starlette Mount serving `server` at `{prefix}/mcp` (`endpoint`)."""
    from starlette.routing import Mount

    return Mount(prefix, app=endpoint(server, exposure, on_session_end, auth=auth, wire=wire))


@contextlib.asynccontextmanager
async def running(servers: Iterable[Any], closers: Iterable[Callable[[], None]] = ()) -> AsyncIterator[None]:
    """Run the mounted servers' HTTP endpoints (each enters its server's lifespan; on the way out every open
    session ends, freeing what it held); then run each closer in a worker thread."""
    try:
        async with contextlib.AsyncExitStack() as stack:
            for server in servers:
                for ref in _endpoints.get(server, []):
                    app = ref()
                    if app is not None:
                        await stack.enter_async_context(app.run())
            yield
    finally:
        for closer in closers:
            await anyio.to_thread.run_sync(closer)


def endpoint_app(routes: Sequence[Any], health: Callable[[], dict[str, Any]],
                 lifespan: Callable[[], contextlib.AbstractAsyncContextManager[Any]], exposure: Exposure, *,
                 fallback: Any = None) -> Any:
    """The ASGI app of a server process (`mcpworld up`, `serve worlds`, `serve swe`, `serve world-model`):
    `routes`, GET /healthz (`{"status": "ok", **health()}`), then `fallback` (an app mounted at the root among
    the others: the registry under `up`) for every other path, and `lifespan()` run around serving. Beyond
    loopback every route is Host/Origin-checked too (the MCP endpoints also need the token, see `endpoint`).
    Requests for the MCP endpoints among `routes` skip the router (`serving.DirectEndpoints`). Serve it with
    `mcpworld.core.serving.serve` (request-head deadlines, the port check)."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import JSONResponse
    from starlette.routing import Mount, Route

    from mcpworld.core.serving import DirectEndpoints

    async def healthz(request: Any) -> JSONResponse:
        return JSONResponse({"status": "ok", **health()})

    @contextlib.asynccontextmanager
    async def run(app: Any) -> AsyncIterator[None]:
        async with lifespan():
            yield

    middleware = [Middleware(ExposureMiddleware, exposure=exposure, auth=False)]  # loopback too: Host and Origin
    rest = [Mount("", app=fallback)] if fallback is not None else []
    app = Starlette(routes=[Route("/healthz", healthz), *routes, *rest], lifespan=run, middleware=middleware)
    return DirectEndpoints(app, [r for r in routes if isinstance(r, Mount)])
