"""A lean Streamable HTTP server for a low-level MCP `Server`: the same wire protocol as the SDK's transport, without
its per-session task, memory streams and dispatcher.

Why: profiled under load (docs/benchmarks.md, "Serving"), the SDK's transport hands every POST through a memory
stream to a per-session dispatcher task and back, and rebuilds Starlette requests and pydantic envelopes on the way;
at 256 concurrent clients that queueing made the tail collapse. Here each POST is answered in its own ASGI task:
body read (bounded), one `json.loads`, the SDK's own kernel (`ServerRunner.on_request`: validation, middleware,
handlers, result shaping), one `json.dumps`. The hot requests skip parts of that kernel and answer what it
answers (tests/core/test_streamable.py holds them to it): a plain `tools/call` goes to the `WireHooks` the server
handed in (`call_tool`, in its wire shape), and so do the extension methods listed there (`_wire_request`); its
other extension methods go to their handlers, validated once (`_fast_request`); and what a client sends the same
every time (the admission headers, a 2026-07-28 envelope) is decided once.

Protocol, per the MCP spec:
- 2025-11-25 and earlier (handshake era): `initialize` opens a session whose id comes back as `Mcp-Session-Id`;
  later requests must carry it (400 without, 404 when unknown or expired); DELETE ends it; GET is 405 (this
  server offers no standalone SSE stream, which the spec allows); notifications and client responses get 202;
  `notifications/cancelled` cancels the named in-flight request of that session.
- 2026-07-28 (`MCP-Protocol-Version` names a modern revision): one self-contained POST, no session; the SDK's
  validation ladder (`classify_inbound_request`: envelope, routing headers, version), `Mcp-Param-*` checks, and
  errors with the spec's HTTP statuses.
- Responses are JSON; a client whose Accept names only `text/event-stream` gets the reply as one SSE event.
- Host/Origin checks (DNS rebinding) as the SDK does them, a body size limit (413 before reading a declared
  oversize body, or as soon as a streamed one passes it), a deadline for the whole body (408 for a trickled one),
  a cap on open sessions (503) and idle-session expiry. A request is dispatched only once its body is complete,
  so a client that goes away mid-body changes nothing.
Server-to-client requests (sampling, elicitation) have no channel here: handlers get `NoBackChannelError`, as
on the SDK's JSON-response mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.runner import ServerRunner, aclose_shielded, modern_error_data, serve_one
from mcp.server.session import ServerSession
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.inbound import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    ERROR_CODE_HTTP_STATUS,
    NAME_BEARING_METHODS,
    PROTOCOL_VERSION_META_KEY,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    unsupported_protocol_version_rejection,
    validate_mcp_param_headers,
)
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import SERVER_INFO_META_KEY, RequestParams
from mcp_types.methods import SPEC_CLIENT_METHODS, serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from opentelemetry import trace
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.requests import Request

from mcpworld.core.sdk import OpenTelemetryMiddleware, dump_result, has_cleanup

logger = logging.getLogger(__name__)

LOOPBACK_SECURITY = TransportSecuritySettings(  # what the SDK applies by itself to a server bound to loopback
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
)
# The whole body must arrive within this (a trickled body is refused, 408); MCPWORLD_HTTP_BODY_TIMEOUT_S sets it.
BODY_DEADLINE_S = float(os.environ.get("MCPWORLD_HTTP_BODY_TIMEOUT_S") or 30.0)
SESSION_EVICT_IDLE_S = 60.0  # with the session table full, a session idle this long may be ended for a new one
SESSION_HEADER = b"mcp-session-id"
_ABSENT = object()  # an envelope key the request did not send (its repr equals no JSON value's)
_PLAIN_CALL = frozenset({"name", "arguments", "_meta"})  # a tools/call with any other params goes through the model
FAST_HANDSHAKE_VERSION = "2025-11-25"  # tests/core/test_streamable.py holds the fast path to the SDK's answers on it
_JSON = [(b"content-type", b"application/json")]
_compact = json.JSONEncoder(separators=(",", ":")).encode  # `json.dumps` with these makes an encoder per call
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform")]


class BodyTooLarge(Exception):
    pass


class BodyTimeout(Exception):
    pass


class ClientGone(Exception):
    pass


class _BodyDeadlines:
    """One loop timer for every request body being read on a loop, checked every quarter deadline: a timer armed
    and cancelled per request was a measurable part of a small call (docs/benchmarks.md, "Serving")."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.reading: dict[asyncio.Task[Any], tuple[float, list[bool]]] = {}
        self.tick = 1.0
        self.timer: asyncio.TimerHandle | None = None

    def watch(self, task: asyncio.Task[Any], deadline_s: float, expired: list[bool]) -> None:
        self.reading[task] = (self.loop.time() + deadline_s, expired)
        if deadline_s / 4 < self.tick:
            self.tick = deadline_s / 4
            if self.timer is not None:  # a shorter deadline than the timer was armed for
                self.timer.cancel()
                self.timer = None
        if self.timer is None:
            self.timer = self.loop.call_later(self.tick, self._check)

    def _check(self) -> None:
        now = self.loop.time()
        for task, (deadline, expired) in list(self.reading.items()):
            if now >= deadline:
                del self.reading[task]
                expired.append(True)
                task.cancel()
        self.timer = self.loop.call_later(self.tick, self._check) if self.reading else None


_deadlines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _BodyDeadlines] = weakref.WeakKeyDictionary()


async def read_body(receive: Any, limit: int, deadline_s: float = BODY_DEADLINE_S) -> bytes:
    """The request body, refused as soon as it passes `limit` bytes or takes longer than `deadline_s`.

    Raises ClientGone when the client disconnects first (nothing was dispatched, so nothing changed).
    The deadline cancels this task (an anyio scope costs more than the rest of a small request's body handling,
    and a whole body is the common case); it is kept by the loop's one `_BodyDeadlines`, to within a quarter of it.
    """
    task = asyncio.current_task()
    assert task is not None
    loop = task.get_loop()
    watch = _deadlines.get(loop)
    if watch is None:
        watch = _deadlines[loop] = _BodyDeadlines(loop)
    expired: list[bool] = []
    watch.watch(task, deadline_s, expired)
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGone()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge()
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
    except asyncio.CancelledError:
        if not expired:
            raise
        task.uncancel()
        raise BodyTimeout() from None
    finally:
        watch.reading.pop(task, None)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def send_json(send: Any, status: int, body: Any, headers: list[tuple[bytes, bytes]] | None = None,
                    sse: bool = False, close: bool = False) -> None:
    """One complete response: a JSON body (or, for an SSE-only client, the body as one `message` event)."""
    data = body if isinstance(body, bytes) else _compact(body).encode()
    if sse:
        data = b"event: message\ndata: " + data + b"\n\n"
    out = [*(_SSE if sse else _JSON), (b"content-length", str(len(data)).encode()), *(headers or [])]
    if close:
        out.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": data})


async def send_empty(send: Any, status: int, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", b"0"), *(headers or [])]})
    await send({"type": "http.response.body", "body": b""})


def rpc_error(code: int, message: str, rid: Any = None, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def _error_body(rid: Any, error: types.ErrorData) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": error.model_dump(mode="json", by_alias=True, exclude_none=True)}


class _Headers(Headers):
    """Starlette's request headers, looked up through one dict (first value wins, as Starlette's scan does): a
    request is asked for a dozen headers on its way, and each lookup was a scan of the whole list. The dict is
    built in C from the raw pairs (ASGI servers send names lower-cased); a value is decoded when asked for."""

    def __init__(self, scope: Any):
        self._list = scope["headers"] = list(scope["headers"])  # what Starlette's own __init__ does with a scope
        self._first = dict(reversed(self._list))
        self.repeated = len(self._first) != len(self._list)  # a name sent twice: only then can a routing header be

    def get(self, key: str, default: Any = None) -> Any:
        value = self._first.get(key.lower().encode("latin-1"))
        return default if value is None else value.decode("latin-1")

    def __getitem__(self, key: str) -> str:
        return self._first[key.lower().encode("latin-1")].decode("latin-1")

    def __contains__(self, key: Any) -> bool:
        return isinstance(key, str) and key.lower().encode("latin-1") in self._first


def accepts(headers: Headers) -> tuple[bool, bool]:
    """(JSON, SSE) acceptable to the client, with RFC 9110 wildcards."""
    kinds = [part.split(";")[0].strip().lower() for part in headers.get("accept", "").split(",")]
    anything = "*/*" in kinds
    return (anything or "application/json" in kinds or "application/*" in kinds,
            anything or "text/event-stream" in kinds or "text/*" in kinds)


def _valid_id(rid: Any) -> bool:
    return isinstance(rid, (str, int)) and not isinstance(rid, bool)


class _NoBackChannel:
    """The outbound channel of a JSON-response session: notifications are dropped, requests refused."""

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None,
                               opts: CallOptions | None = None) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        logger.debug("dropped %s: a JSON-response session has no stream for it", method)


@dataclass
class _Exchange:
    """The dispatch context of one POST (the SDK's `DispatchContext` shape): one reply, no back-channel."""

    transport: TransportContext
    request_id: Any
    message_metadata: ServerMessageMetadata
    progress_token: Any = None
    can_send_request: bool = False
    _cancel_requested: anyio.Event | None = None

    @property
    def cancel_requested(self) -> anyio.Event:  # made on first use: almost no handler looks at it
        if self._cancel_requested is None:
            self._cancel_requested = anyio.Event()
        return self._cancel_requested

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None,
                               opts: CallOptions | None = None) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        return None  # one JSON reply: nowhere to put a notification

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None


@dataclass
class _InFlight:
    """A request being answered on a session; `cancel()` (its `notifications/cancelled`, or the session ending)
    stops it. A plain task cancel: an anyio cancel scope per request cost more than a small call's routing."""

    task: asyncio.Task[Any]
    cancelled: bool = False

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.task.cancel()


@dataclass
class _Session:
    id: str
    runner: ServerRunner[Any]
    last_used: float = field(default_factory=time.monotonic)
    in_flight: dict[Any, _InFlight] = field(default_factory=dict)
    ready: bool = False  # the client's initialize was accepted
    requests: int = 0  # requests after initialize: a session that made none is the first to go when the table is full


class _Route:
    """A 2026-07-28 request's classification and, for an accepted one, the connection its envelope makes: built on
    first use (a tool call answered in its wire shape needs none), then copied for each request with its own
    `state` and `exit_stack`, as a fresh one would have; the validated client info and capabilities are shared."""

    __slots__ = ("verdict", "_made")

    def __init__(self, verdict: Any):
        self.verdict = verdict
        self._made: Connection | None = None

    def connection(self) -> Connection:
        made = self._made
        if made is None:
            made = self._made = Connection.from_envelope(self.verdict.protocol_version, self.verdict.client_info,
                                                         self.verdict.client_capabilities)
        connection = object.__new__(Connection)
        connection.__dict__.update(made.__dict__)
        connection.state, connection.exit_stack = {}, contextlib.AsyncExitStack()
        return connection


WireCall = Callable[[str, dict[str, Any] | None, dict[str, Any] | None], Awaitable[dict[str, Any] | None]]
WireMethod = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True)
class WireHooks:
    """What a server answers in its wire shape, with none of the SDK's models: the transport's hot path.

    `call_tool(name, arguments, meta)` answers a plain `tools/call`; `methods` maps an extension method to a
    handler of its params. Either returns the dumped result, or None to send the request down the typed path
    (params its models would not take as they are). Handed to the transport by the server that owns the
    handlers (`endpoint(..., wire=...)`), never looked up on the SDK's `Server`.
    """

    call_tool: WireCall | None = None
    methods: Mapping[str, WireMethod] = field(default_factory=dict)


class StreamableHTTP:
    """ASGI app serving one low-level `Server` at `path` (relative to its mount). Enter `run()` in the lifespan.

    `wire`: the server's own hot-path handlers (`WireHooks`), if any. `on_session_end(session_id)` runs when a
    session is deleted or expires (to free what it held).
    """

    def __init__(self, server: Any, *, wire: WireHooks | None = None,
                 security: TransportSecuritySettings | None = LOOPBACK_SECURITY,
                 max_body_bytes: int = DEFAULT_MAX_REQUEST_BODY_SIZE, session_idle_s: float = 1800.0,
                 max_sessions: int = 10_000, body_deadline_s: float = BODY_DEADLINE_S, path: str = "/mcp",
                 on_session_end: Callable[[str], Any] | None = None):
        self.server = server
        self.wire = wire or WireHooks()
        self.security = security
        self.max_body_bytes = max_body_bytes
        self.session_idle_s = session_idle_s
        self.max_sessions = max_sessions
        self.body_deadline_s = body_deadline_s
        self.path = path
        self.on_session_end = on_session_end
        self.sessions: dict[str, _Session] = {}
        self._lifespan_state: Any = None
        self._running = False
        self._last_sweep = time.monotonic()
        self._server_info: dict[str, Any] | None = None
        self._routes: dict[tuple[Any, ...], _Route] = {}
        self._admitted: dict[tuple[Any, ...], tuple[int, str] | bool] = {}
        self._admitted_under: Any = security

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """The server's lifespan, entered once for every session (as the SDK's session manager does)."""
        async with self.server.lifespan(self.server) as state:
            self._lifespan_state, self._running = state, True
            try:
                yield
            finally:
                self._running = False
                for session_id in list(self.sessions):
                    await self._end(session_id)

    # -- ASGI ---------------------------------------------------------------------------------------------------

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        root = scope.get("root_path", "")
        path = scope["path"][len(root):] if root and scope["path"].startswith(root) else scope["path"]
        if path.rstrip("/") != self.path:
            await send_json(send, 404, {"error": f"not found: {path}; the MCP endpoint is {root}{self.path}"})
            return
        if not self._running:
            await send_json(send, 503, rpc_error(types.INTERNAL_ERROR, "the server is not running (starting or "
                                                 "shutting down); retry shortly"))
            return
        headers = _Headers(scope)
        method = scope["method"]
        admitted = self._admission(headers, method)
        if isinstance(admitted, tuple):
            await send_json(send, admitted[0], rpc_error(types.INVALID_REQUEST, admitted[1]))
            return
        if method == "POST":
            await self._post(scope, receive, send, headers, admitted is True)
        elif method == "DELETE":
            await self._delete(send, headers)
        else:
            await send_json(send, 405, rpc_error(types.INVALID_REQUEST, f"Method Not Allowed: {method}; this server "
                                                 "answers POST (and DELETE to end a session), with no SSE stream"),
                            headers=[(b"allow", b"POST, DELETE")])

    def _admission(self, headers: _Headers, method: str) -> tuple[int, str] | bool:
        """What a request's method and its Content-Type, Host, Origin and Accept headers let through: a refusal
        (status, message), else whether a POST's answer must be an SSE event (the client accepts no JSON).

        Remembered per combination of those values (a client sends the same ones every time) for as long as the
        security settings are the same object; a request's own headers are still read whole, every time.
        """
        first = headers._first
        key = (method, first.get(b"content-type"), first.get(b"host"), first.get(b"origin"), first.get(b"accept"))
        if self._admitted_under is not self.security:  # the settings were replaced: nothing remembered holds
            self._admitted, self._admitted_under = {}, self.security
        known = self._admitted.get(key)
        if known is None:
            if len(self._admitted) >= 256:  # a client that varies them per request: keep memory bounded
                self._admitted.clear()
            known = self._admitted[key] = self._admit(headers, method == "POST")
        return known

    def _admit(self, headers: Headers, is_post: bool) -> tuple[int, str] | bool:
        """The SDK's Content-Type and Host/Origin rules (without building a Request), then Accept."""
        if is_post and not headers.get("content-type", "").lower().startswith("application/json"):
            return 400, "Invalid Content-Type header: send application/json"
        settings = self.security
        if settings is not None and settings.enable_dns_rebinding_protection:
            host = headers.get("host")
            if not host or not _allowed(host, settings.allowed_hosts):
                return 421, (f"Invalid Host header {host!r}: this server answers only to "
                             f"{', '.join(settings.allowed_hosts)}")
            origin = headers.get("origin")
            if origin and not _allowed(origin, settings.allowed_origins):
                return 403, f"Invalid Origin header {origin!r}: cross-site requests are refused"
        if not is_post:
            return False
        has_json, has_sse = accepts(headers)
        if not (has_json or has_sse):
            return 406, "Not Acceptable: the client must accept application/json (or text/event-stream)"
        return not has_json

    async def _post(self, scope: Any, receive: Any, send: Any, headers: _Headers, sse: bool) -> None:
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await send_json(send, 413, rpc_error(types.INVALID_REQUEST, self._too_large(int(declared))), close=True)
            return
        try:
            body = await read_body(receive, self.max_body_bytes, self.body_deadline_s)
        except ClientGone:
            return
        except BodyTooLarge:
            await send_json(send, 413, rpc_error(types.INVALID_REQUEST, self._too_large(None)), close=True)
            return
        except BodyTimeout:
            await send_json(send, 408, rpc_error(types.INVALID_REQUEST, f"the request body did not arrive within "
                                                 f"{self.body_deadline_s:g}s; send it whole"), close=True)
            return
        try:
            message = json.loads(body)
        except (ValueError, RecursionError) as exc:
            await send_json(send, 400, rpc_error(types.PARSE_ERROR, f"Parse error: {exc}"), sse=sse)
            return
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await self._modern(scope, send, headers, message, sse)
        else:
            await self._legacy(scope, send, headers, message, sse)

    def _too_large(self, size: int | None) -> str:
        what = f"{size} bytes" if size is not None else "more than that"
        return f"Request body too large: {what} (max {self.max_body_bytes} bytes); send less"

    # -- 2026-07-28: one self-contained request ------------------------------------------------------------------

    async def _modern(self, scope: Any, send: Any, headers: _Headers, message: Any, sse: bool) -> None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(
                message.get("method"), str):
            await send_json(send, 400, rpc_error(types.INVALID_REQUEST, "Body must be a single JSON-RPC request or "
                                                 "notification object"), sse=sse)
            return
        if "id" not in message:  # a notification: acknowledged and dropped (no server state to act on)
            rejection = unsupported_protocol_version_rejection(headers.get("mcp-protocol-version", ""))
            if rejection is not None:
                await self._reject(send, rejection, None, sse)
            else:
                await send_empty(send, 202)
            return
        rid, params = message["id"], message.get("params")
        if not _valid_id(rid) or (params is not None and not isinstance(params, dict)):
            await send_json(send, 400, rpc_error(types.INVALID_REQUEST, "Body must be a single JSON-RPC request or "
                                                 "notification object"), sse=sse)
            return
        duplicated = find_duplicated_routing_header(
            (k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]) if headers.repeated else None
        if duplicated is not None:
            await self._reject(send, InboundLadderRejection(code=types.HEADER_MISMATCH,
                                                            message=f"{duplicated} header appears more than once"),
                               rid, sse)
            return
        route = self._route(message, params, headers)
        verdict = route.verdict
        if isinstance(verdict, InboundLadderRejection):
            await self._reject(send, verdict, rid, sse)
            return
        method = message["method"]
        if method == "tools/call" and isinstance(params, dict):
            rejection = self._param_header_rejection(params, headers)
            if rejection is not None:
                await self._reject(send, rejection, rid, sse)
                return
        try:
            result = await self._wire_request(verdict.protocol_version, method, params)
            if result is None:
                connection = route.connection()
                result = await self._fast_request(scope, headers, rid, connection, method, params)
                if result is None:
                    result = await serve_one(self.server, self._exchange(scope, headers, rid, params), method,
                                             params, connection=connection, lifespan_state=self._lifespan_state)
                elif has_cleanup(connection):  # a handler left cleanup for its connection: run it, as serve_one
                    await aclose_shielded(connection)
        except Exception as exc:
            error = modern_error_data(exc)
            await send_json(send, ERROR_CODE_HTTP_STATUS.get(error.code, 200), _error_body(rid, error), sse=sse)
            return
        await send_json(send, 200, {"jsonrpc": "2.0", "id": rid, "result": result}, sse=sse)

    def _route(self, message: dict[str, Any], params: dict[str, Any] | None, headers: _Headers) -> _Route:
        """`classify_inbound_request(message, headers=headers)` for this request, and the connection its envelope
        makes; both remembered per exact inputs of the classification, for a well-formed envelope.

        Why: every 2026-07-28 request is its own connection, and a trainer's clients send the same envelope and
        headers every time: classifying them and building the connection (two pydantic validations, the
        synthesized initialize params) was about a tenth of a small tool call. The key holds every value the
        classification reads (the envelope's three values, the method and the parameter it names, the routing
        headers), so a request that differs in any of them is classified afresh; a rejection is never kept, nor
        an envelope of over 4 KiB (so the memory kept stays small whatever clients send).
        """
        meta = params.get("_meta") if params is not None else None
        if params is None or type(meta) is not dict:
            return _Route(classify_inbound_request(message, headers=headers))
        method = message["method"]
        named = NAME_BEARING_METHODS.get(method)
        first = headers._first
        key = (method, repr(params.get(named)) if named else None, first.get(b"mcp-protocol-version"),
               first.get(b"mcp-method"), first.get(b"mcp-name"), repr(meta.get(PROTOCOL_VERSION_META_KEY, _ABSENT)),
               repr(meta.get(CLIENT_INFO_META_KEY, _ABSENT)), repr(meta.get(CLIENT_CAPABILITIES_META_KEY, _ABSENT)))
        route = self._routes.get(key)
        if route is None:
            route = _Route(classify_inbound_request(message, headers=headers))
            if isinstance(route.verdict, InboundLadderRejection) or sum(len(k) for k in key if k) > 4096:
                return route  # refused, or an envelope too big to keep 256 of: classified per request
            if len(self._routes) >= 256:  # a client that varies its envelope per request: keep memory bounded
                self._routes.clear()
            self._routes[key] = route
        return route

    def _param_header_rejection(self, params: dict[str, Any], headers: Headers) -> InboundLadderRejection | None:
        """`Mcp-Param-*` headers checked against the tool's schema (only a server with `get_tool_input_schema`)."""
        lookup = self.server.get_tool_input_schema
        arguments = params.get("arguments")
        name = params.get("name")
        if lookup is None or not isinstance(name, str) or (arguments is not None and not isinstance(arguments, dict)):
            return None
        if not arguments and not any(k.startswith("mcp-param-") for k in headers):
            return None
        try:
            schema = lookup(name)
        except Exception:
            logger.exception("Mcp-Param header validation skipped: get_tool_input_schema raised")
            return None
        if schema is None or not declares_param_headers(schema):
            return None  # nothing to compare: no property of this tool is mirrored in a header
        return validate_mcp_param_headers(schema, arguments or {}, headers)

    async def _reject(self, send: Any, rejection: InboundLadderRejection, rid: Any, sse: bool) -> None:
        await send_json(send, ERROR_CODE_HTTP_STATUS.get(rejection.code, 400),
                        rpc_error(rejection.code, rejection.message, rid, rejection.data), sse=sse)

    def _exchange(self, scope: Any, headers: Headers, rid: Any, params: Any) -> _Exchange:
        meta = params.get("_meta") if isinstance(params, dict) else None
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        return _Exchange(transport=TransportContext(kind="streamable-http", can_send_request=False, headers=headers),
                         request_id=rid, message_metadata=ServerMessageMetadata(request_context=Request(scope)),
                         progress_token=token if _valid_id(token) else None)

    # -- the hot path: tools/call --------------------------------------------------------------------------------

    async def _wire_request(self, version: str, method: str, params: Any) -> dict[str, Any] | None:
        """A request the server answers in its wire shape, with no models and no connection or request context
        at all: a plain `tools/call` (a name, arguments, `_meta`, nothing a model would have to check) through
        `self.wire.call_tool(name, arguments, meta)`, or one of its own extension's methods in `self.wire.methods`
        (method -> handler of the params); None (no such hook, or the server declines, as it does
        for params its model would not take as they are) sends the request down `_fast_request`. The same gates
        as there: a server with middleware, or a process with a tracer provider, takes the SDK's path."""
        if type(params) is not dict and params is not None:
            return None
        meta = params.get("_meta") if params is not None else None
        if meta is not None and (type(meta) is not dict or "progressToken" in meta):
            return None  # a token the params model would check (and progress this path does not report)
        if method == "tools/call":
            direct = self.wire.call_tool
            if direct is None or params is None or not params.keys() <= _PLAIN_CALL:
                return None
            name, arguments = params.get("name"), params.get("arguments")
            if type(name) is not str or (arguments is not None and type(arguments) is not dict) or \
                    self._sdk_path_only():
                return None
            dumped = await direct(name, arguments, meta)
            return None if dumped is None else self._stamped(self._tool_result_for(version, dumped), version)
        answer = self.wire.methods.get(method)
        if answer is None or method in SPEC_CLIENT_METHODS or method in self.server.cache_hints or \
                self._sdk_path_only():
            return None
        dumped = await answer({} if params is None else params)
        return None if dumped is None else self._stamped(dumped, version)

    async def _fast_request(self, scope: Any, headers: Headers, rid: Any, connection: Connection, method: str,
                            params: Any) -> dict[str, Any] | None:
        """A well-formed `tools/call`, or a request for an extension's own method (`io.mcpworld/episode/start`,
        ...), answered by the server's own handler without the SDK's generic pipeline.

        The SDK validates a request's params twice (the spec surface or the `_meta` lift, then the handler's
        model), wraps it in an OpenTelemetry span, and re-validates a spec result against the spec surface before
        dumping it again: on a small tool that was about a third of the server's time (docs/benchmarks.md,
        "Serving"). Here the params are validated once, by the handler's own model, and the result dumped once,
        shaped as the SDK shapes it (and `_wire_request`, tried first, answers what the server can in its wire
        shape with no models at all). The SDK path still serves every other spec method, malformed params (its
        error shapes), a method with a cache hint, a server with middleware of its own, and any process where
        OpenTelemetry has a tracer provider (its spans stay whole). Returns None to say "take the SDK path".
        """
        if method != "tools/call" and (method in SPEC_CLIENT_METHODS or method in self.server.cache_hints):
            return None
        entry = self._handler_entry(method)
        if entry is None or (params is not None and not isinstance(params, dict)):
            return None
        version = connection.protocol_version
        if method == "tools/call":
            if params is None or not isinstance(params.get("name"), str):
                return None
            arguments, meta = params.get("arguments"), params.get("_meta")
            if (arguments is not None and not isinstance(arguments, dict)) or (meta is not None
                                                                               and not isinstance(meta, dict)):
                return None
        elif not issubclass(entry.params_type, RequestParams):  # its `_meta` would be lifted by another model
            return None
        try:
            typed = entry.params_type.model_validate({} if params is None else params, by_name=False)
        except ValidationError:
            return None
        exchange = self._exchange(scope, headers, rid, params)
        request_meta = typed.meta
        ctx = ServerRequestContext(session=ServerSession(exchange, connection, request_meta=request_meta),
                                   lifespan_context=self._lifespan_state, protocol_version=version,
                                   method=method, params=params, request_id=exchange.request_id,
                                   meta=request_meta, request=exchange.message_metadata.request_context)
        result = await entry.handler(ctx, typed)
        if isinstance(result, types.ErrorData):
            raise MCPError.from_error_data(result)
        if method == "tools/call":
            if not isinstance(result, types.CallToolResult):
                raise TypeError(f"tools/call handler returned {type(result).__name__}; expected CallToolResult")
            dumped = self._tool_result_for(version, result.model_dump(by_alias=True, mode="json", exclude_none=True))
        else:
            dumped = dump_result(result)  # the SDK's own: a model by alias, a dict copied, None as {}
        return self._stamped(dumped, version)

    @staticmethod
    def _tool_result_for(version: str, dumped: dict[str, Any]) -> dict[str, Any]:
        """A dumped tool result as `version`'s spec surface shapes it."""
        if version == FAST_HANDSHAKE_VERSION:  # this version's surface: the model less `resultType`
            dumped.pop("resultType", None)
        elif version not in MODERN_PROTOCOL_VERSIONS:  # older revisions lack more fields: the SDK's own sieve
            dumped = serialize_server_result("tools/call", version, dumped)
        return dumped

    def _stamped(self, dumped: dict[str, Any], version: str) -> dict[str, Any]:
        """A modern result with its `resultType` and the server-info `_meta` stamp the SDK adds."""
        if version in MODERN_PROTOCOL_VERSIONS:
            if dumped.get("resultType") is None:
                dumped["resultType"] = "complete"
            stamp = self._server_info
            if stamp is None:
                stamp = self._server_info = self.server.server_info_stamp  # dumped straight to bytes: never mutated
            out_meta = dumped.get("_meta")
            if out_meta is None:
                dumped["_meta"] = {SERVER_INFO_META_KEY: stamp}
            elif isinstance(out_meta, dict) and out_meta.get(SERVER_INFO_META_KEY) is None:
                dumped["_meta"] = {**out_meta, SERVER_INFO_META_KEY: stamp}
        return dumped

    def _handler_entry(self, method: str) -> Any:
        """The server's handler entry for `method` when the fast path may serve it, else None."""
        return None if self._sdk_path_only() else self.server.get_request_handler(method)

    def _sdk_path_only(self) -> bool:
        """Whether every request must take the SDK's path: the server has middleware of its own, or OpenTelemetry
        has a tracer provider (checked per request: one set after start-up turns the SDK's spans back on)."""
        middleware = self.server.middleware
        if not middleware:
            return False
        return not (len(middleware) == 1 and type(middleware[0]) is OpenTelemetryMiddleware and not tracing_enabled())

    # -- 2025-11-25 and earlier: sessions ------------------------------------------------------------------------

    async def _legacy(self, scope: Any, send: Any, headers: Headers, message: Any, sse: bool) -> None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            text = "JSON-RPC batches are not supported; send one message per POST" if isinstance(message, list) \
                else "Body must be one JSON-RPC 2.0 message object"
            await send_json(send, 400, rpc_error(types.INVALID_REQUEST, text), sse=sse)
            return
        method, rid, params = message.get("method"), message.get("id"), message.get("params")
        is_request = isinstance(method, str) and "id" in message
        malformed = (method is not None and not isinstance(method, str)) or (
            params is not None and not isinstance(params, dict))
        if malformed or (is_request and not _valid_id(rid)) or (method is None and "id" not in message):
            await send_json(send, 400, rpc_error(types.INVALID_REQUEST, "Body must be one JSON-RPC 2.0 message "
                                                 "object (method a string, params an object, id a string or "
                                                 "integer)"), sse=sse)
            return
        session_id = headers.get("mcp-session-id")
        if method == "initialize" and is_request and session_id is None:
            await self._initialize(scope, send, headers, rid, params, sse)
            return
        if session_id is None:
            await send_json(send, 400, rpc_error(types.INVALID_REQUEST, "Bad Request: Missing session ID: send "
                                                 "initialize first, then its Mcp-Session-Id on every request"),
                            sse=sse)
            return
        session = self.sessions.get(session_id)
        if session is None:
            await send_json(send, 404, rpc_error(types.INVALID_REQUEST, "Session not found: it ended or expired; "
                                                 "initialize a new one"), sse=sse)
            return
        session.last_used = time.monotonic()
        reply_headers = [(SESSION_HEADER, session_id.encode())]
        if not is_request:  # a notification or a response to a request we never send
            if method == "notifications/cancelled":
                wanted = params.get("requestId") if isinstance(params, dict) else None
                # only an id can name a request: a list or object there once raised (a bare 500); it cancels nothing
                target = session.in_flight.get(wanted) if _valid_id(wanted) else None
                if target is not None:
                    target.cancel()
            elif isinstance(method, str):
                await session.runner.on_notify(self._exchange(scope, headers, None, params), method, params)
            await send_empty(send, 202, reply_headers)
            return
        if method == "initialize":  # re-initializing an open session is not a thing
            await send_json(send, 400, rpc_error(types.INVALID_REQUEST, "this session is already initialized; "
                                                 "initialize without Mcp-Session-Id to open another", rid),
                            reply_headers, sse)
            return
        session.requests += 1
        task = asyncio.current_task()
        assert task is not None
        flight = session.in_flight[rid] = _InFlight(task)
        body: dict[str, Any] | None
        try:
            result = None
            if session.ready or session.runner.connection.initialize_accepted:
                session.ready = True  # initialized stays initialized: asked once
                connection = session.runner.connection
                result = await self._wire_request(connection.protocol_version, str(method), params)
                if result is None:
                    result = await self._fast_request(scope, headers, rid, connection, str(method), params)
            if result is None:
                result = await session.runner.on_request(self._exchange(scope, headers, rid, params), str(method),
                                                         params)
            body = {"jsonrpc": "2.0", "id": rid, "result": result}
        except asyncio.CancelledError:
            if not flight.cancelled:  # the server is stopping, not the client cancelling
                raise
            body = None
        except Exception as exc:
            body = _error_body(rid, modern_error_data(exc))
        finally:
            session.in_flight.pop(rid, None)
            session.last_used = time.monotonic()
        if flight.cancelled:
            task.uncancel()  # also when the handler swallowed the cancellation and answered
        if body is None:  # the client cancelled it: the spec says send no response; end the POST empty
            await send_empty(send, 202, reply_headers)
            return
        await send_json(send, 200, body, reply_headers, sse)

    async def _initialize(self, scope: Any, send: Any, headers: Headers, rid: Any, params: Any, sse: bool) -> None:
        await self._sweep()
        if len(self.sessions) >= self.max_sessions:
            await self._make_room()
        if len(self.sessions) >= self.max_sessions:
            await send_json(send, 503, rpc_error(types.INTERNAL_ERROR, f"Too many open sessions ({self.max_sessions});"
                                                 " end finished sessions (DELETE) or retry later", rid), sse=sse)
            return
        session_id = secrets.token_hex(16)
        connection = Connection.for_loop(_NoBackChannel(), session_id=session_id)
        runner: ServerRunner[Any] = ServerRunner(self.server, connection, self._lifespan_state)
        try:
            result = await runner.on_request(self._exchange(scope, headers, rid, params), "initialize", params)
        except Exception as exc:
            await send_json(send, 200, _error_body(rid, modern_error_data(exc)), sse=sse)
            return
        self.sessions[session_id] = _Session(session_id, runner)
        await send_json(send, 200, {"jsonrpc": "2.0", "id": rid, "result": result},
                        [(SESSION_HEADER, session_id.encode())], sse)

    async def _delete(self, send: Any, headers: Headers) -> None:
        session_id = headers.get("mcp-session-id")
        if session_id is None:
            await send_json(send, 400, rpc_error(types.INVALID_REQUEST, "Bad Request: Missing session ID"))
        elif session_id not in self.sessions:
            await send_json(send, 404, rpc_error(types.INVALID_REQUEST, "Session not found"))
        else:
            await self._end(session_id)
            await send_empty(send, 200)

    async def _end(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is None:
            return
        for scope in session.in_flight.values():
            scope.cancel()
        await aclose_shielded(session.runner.connection)
        if self.on_session_end is not None:
            try:
                result = self.on_session_end(session_id)
                if hasattr(result, "__await__"):
                    await result
            except Exception:  # a failed cleanup is logged; the episode TTL still holds
                logger.exception("freeing session %s failed", session_id[:16])

    async def _make_room(self) -> None:
        """With the table full, end the least recently used session that made no request after its handshake, else
        one idle past SESSION_EVICT_IDLE_S. Why: 10,000 initializes without a DELETE locked every new client out
        (503) for the 30-minute idle expiry (issue 30); sessions that work are kept."""
        now = time.monotonic()
        quiet = [s for s in self.sessions.values() if not s.in_flight]
        unused = [s for s in quiet if s.requests == 0]
        idle = [s for s in quiet if now - s.last_used > SESSION_EVICT_IDLE_S]
        pick = min(unused or idle, key=lambda s: s.last_used, default=None)
        if pick is not None:
            logger.info("session table full (%d): ending %s session %s", self.max_sessions,
                        "an unused" if unused else "an idle", pick.id[:16])
            await self._end(pick.id)

    async def _sweep(self) -> None:
        """End sessions idle past `session_idle_s` (checked at most every few seconds, when one opens)."""
        now = time.monotonic()
        if now - self._last_sweep < min(5.0, self.session_idle_s / 2):
            return
        self._last_sweep = now
        for sid in [sid for sid, s in self.sessions.items()
                    if not s.in_flight and now - s.last_used > self.session_idle_s]:
            await self._end(sid)


_header_schemas: dict[int, tuple[Any, bool]] = {}


def declares_param_headers(schema: Any) -> bool:
    """Whether a tool's input schema annotates any property with `x-mcp-header` (found once per schema object:
    with none, `validate_mcp_param_headers` has nothing to compare, and walking the schema per call is most of a
    small call's header checks)."""
    cached = _header_schemas.get(id(schema))
    if cached is None or cached[0] is not schema:
        if len(_header_schemas) > 4096:  # schemas made per call: keep the cache bounded
            _header_schemas.clear()
        cached = _header_schemas[id(schema)] = (schema, "x-mcp-header" in json.dumps(schema, default=str))
    return cached[1]


_tracing: list[float | bool] = [-1.0, False]  # (checked at, answer)


def tracing_enabled() -> bool:
    """Whether OpenTelemetry has a tracer provider (without one, the SDK's spans are no-ops). Looked up at most
    every second: a provider set after start-up is seen within one."""
    now = time.monotonic()
    if now - _tracing[0] >= 1.0:
        _tracing[:] = [now, not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)]
    return bool(_tracing[1])


def _allowed(value: str, patterns: list[str]) -> bool:
    """The SDK's match: exact, or `base:*` for any port; case aside, as host names and schemes are (an upper-case
    Host was refused here and let through by the REST routes' check)."""
    value = value.lower()
    return any(value == p.lower() or (p.endswith(":*") and value.startswith(p[:-1].lower())) for p in patterns)
