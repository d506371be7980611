"""A pooled client for sessionless Streamable HTTP (MCP 2026-07-28): one per process, shared by every episode.

On a sessionless connection each request stands alone (its `_meta` carries the protocol version and client
capabilities; episodes are named by the server-minted handle in `_meta`), so there is no handshake to repeat and
nothing to tie a request to the task or connection that sent the one before. One `SessionlessClient` over one
aiohttp connection pool therefore serves any number of concurrent episodes: measured against httpx, aiohttp
gives the higher rate and a flat tail as concurrency grows (docs/benchmarks.md, "The client path").

It offers the part of `mcp.Client` that `EpisodeControl` and the agent use (`send_request` through `.session`,
`call_tool`, `list_tools`), and fails the way the SDK does, so callers read failures the same on either client:
a JSON-RPC error is `MCPError` with the server's code, a request past its timeout is `MCPError(REQUEST_TIMEOUT)`,
a server nobody answers for is `ConnectError`, a connection that breaks mid-request is `ConnectionError`.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, TypeVar

import aiohttp
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
)
from mcp_types.version import LATEST_MODERN_VERSION

from mcpworld import __version__
from mcpworld.core.protocol import EPISODE_META_KEY, METHOD_TASKS
from mcpworld.core.retry import NO_WAIT, retrying
from mcpworld.core.workers import RETRY_HEADER, owner_of
from mcpworld.registry.client import ConnectError, tls_context

ASK_AGAIN = 3  # tries after a broken connection (see SessionlessClient._again)
# Requests that only read: one whose connection broke (a worker it passed through died) is asked again as it is.
READS = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list", METHOD_TASKS})

R = TypeVar("R", bound=types.Result)
PROTOCOL_VERSION = LATEST_MODERN_VERSION  # "2026-07-28"
MAX_ANSWER_BYTES = 64 * 1024 * 1024  # far above any tool result; bounds what one answer can make us hold
KEEPALIVE_S = 4.0  # below uvicorn's 5 s idle timeout, so a pooled connection is never reused as the server drops it


class NotSessionless(ConnectError):
    """The server does not speak sessionless MCP (it wants the 2025 initialize handshake): use `mcp.Client`."""


class SessionlessClient:
    """MCP requests to one Streamable HTTP endpoint over a shared aiohttp pool; use as an async context manager.

    `limit` caps open connections (0: one per concurrent request); requests beyond it wait in the pool.
    """

    def __init__(self, url: str, *, bearer: str | None = None, timeout: float = 30.0, limit: int = 0):
        self.url, self.timeout, self.limit = url, timeout, limit
        self._headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                         MCP_PROTOCOL_VERSION_HEADER: PROTOCOL_VERSION}
        if bearer:
            self._headers["Authorization"] = f"Bearer {bearer}"
        self._envelope = {types.PROTOCOL_VERSION_META_KEY: PROTOCOL_VERSION,
                          types.CLIENT_INFO_META_KEY: {"name": "mcpworld", "version": __version__},
                          types.CLIENT_CAPABILITIES_META_KEY: {}}
        self._ids = itertools.count(1)
        self._timeout = aiohttp.ClientTimeout(total=timeout)  # made once: most requests use the default
        self._routing: dict[tuple[str, str | None], dict[str, str]] = {}
        self._http: aiohttp.ClientSession | None = None
        self.discovered: types.DiscoverResult | None = None

    async def __aenter__(self) -> SessionlessClient:
        connector = aiohttp.TCPConnector(limit=self.limit, keepalive_timeout=KEEPALIVE_S,
                                         ssl=tls_context() if self.url.startswith("https:") else False)
        self._http = aiohttp.ClientSession(connector=connector, skip_auto_headers=("User-Agent",))
        try:
            await self.discover()
        except BaseException:
            await self._http.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.close()

    @property
    def session(self) -> SessionlessClient:
        """What `EpisodeControl` sends extension requests through (`client.session.send_request`)."""
        return self

    async def discover(self) -> types.DiscoverResult:
        """`server/discover`: proves the server speaks sessionless MCP (NotSessionless when it does not)."""
        try:
            self.discovered = await self.request("server/discover", {}, types.DiscoverResult)
        except MCPError as exc:
            if exc.error.code == types.REQUEST_TIMEOUT:  # our own deadline: says nothing about the protocol
                raise
            raise NotSessionless(f"{self.url} does not speak MCP {PROTOCOL_VERSION}: {exc.error.message}") from None
        return self.discovered

    async def request(self, method: str, params: dict[str, Any], result_type: type[R],
                      timeout: float | None = None) -> R:
        """One JSON-RPC request, its result validated as `result_type`."""
        params = {**params, "_meta": {**(params.get("_meta") or {}), **self._envelope}}
        rid = next(self._ids)
        key = NAME_BEARING_METHODS.get(method)
        headers = self._headers_for(method, params[key] if key is not None and isinstance(params.get(key), str)
                                    else None)
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params},
                          separators=(",", ":"))
        try:
            message = await self._post(body, headers, rid, timeout)
        except ConnectionResetError:
            if method in READS:  # a read changes nothing: asking it again is safe anywhere
                again = headers
            elif owner_of(params["_meta"].get(EPISODE_META_KEY) or params.get("episode")) is not None:
                # A request of a worker's episode (`--workers N`) lost its connection (a worker it passed through
                # died): ask again, marked; the worker holding the episode answers with the reply it kept, so the
                # request never acts twice (mcpworld.core.workers.Replies). A single-process server keeps no
                # replies, so its requests are not asked again.
                again = {**headers, RETRY_HEADER: "1"}
            else:
                raise
            message = await self._again(body, again, rid, timeout)
        return self._result(message, result_type)

    async def _again(self, body: str, headers: dict[str, str], rid: int, timeout: float | None) -> dict[str, Any]:
        """Ask again after a broken connection, up to ASK_AGAIN times, at once: each failure drops one dead pooled
        connection (another keep-alive connection the dying worker had accepted), so the next try takes another."""
        message, _ = await retrying(lambda _: self._post(body, headers, rid, timeout), retries=ASK_AGAIN - 1,
                                    backoff=NO_WAIT, retry_on=(ConnectionResetError,))
        return message  # the last try's error is the caller's

    @staticmethod
    def _result(message: dict[str, Any], result_type: type[R]) -> R:
        if "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {}
            raise MCPError(code=int(error.get("code", types.INTERNAL_ERROR)),
                           message=str(error.get("message", "error without a message")), data=error.get("data"))
        return result_type.model_validate(message.get("result"))

    def _headers_for(self, method: str, name: str | None) -> dict[str, str]:
        """The routing headers of a request (`Mcp-Method`, `Mcp-Name`), built once per method and name."""
        headers = self._routing.get((method, name))
        if headers is None:
            headers = {**self._headers, MCP_METHOD_HEADER: method}
            if name is not None:
                headers[MCP_NAME_HEADER] = encode_header_value(name)
            if len(self._routing) < 4096:  # tool names are few; a caller inventing names must not grow memory
                self._routing[(method, name)] = headers
        return headers

    async def _post(self, body: str, headers: dict[str, str], rid: int, timeout: float | None) -> dict[str, Any]:
        if self._http is None:
            raise RuntimeError("SessionlessClient is used outside `async with`")
        limit = self.timeout if timeout is None else timeout
        deadline = self._timeout if timeout in (None, self.timeout) else aiohttp.ClientTimeout(total=timeout)
        http = self._http

        async def post() -> tuple[bytes, int, str]:
            async with http.post(self.url, data=body, headers=headers, timeout=deadline) as response:
                return await _read_capped(response, self.url), response.status, response.content_type
        try:
            try:
                raw, status, kind = await post()
            except aiohttp.ClientConnectorError as exc:
                if not isinstance(exc.os_error, ConnectionResetError):
                    raise
                # Reset while connecting: the server process whose accept queue held the new connection died (a
                # worker of the port, say). Nothing was sent, so once more on a new connection is always safe.
                raw, status, kind = await post()
        except aiohttp.ClientConnectorError as exc:
            raise ConnectError(f"cannot reach {self.url}: {exc.os_error or exc}") from None
        except TimeoutError:
            raise MCPError(code=types.REQUEST_TIMEOUT, message=f"no answer from {self.url} within {limit:g}s"
                           ) from None
        except aiohttp.ClientError as exc:  # the connection broke under the request
            raise ConnectionResetError(f"connection to {self.url} lost: {type(exc).__name__}: {exc}") from None
        if status in (401, 403, 421):
            raise ConnectError(f"{self.url} refused us: HTTP {status}: {_error_text(raw)}")
        message = _sse_message(raw, rid) if kind == "text/event-stream" else _json(raw)
        if message is None:
            if status == 404:
                raise ConnectError(f"no MCP endpoint at {self.url} (HTTP 404)")
            raise MCPError(code=types.INTERNAL_ERROR, message=f"HTTP {status} from {self.url} without a JSON-RPC "
                           f"answer: {raw[:200].decode('utf-8', 'replace')}")
        return message

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None,
                        read_timeout_seconds: float | None = None, meta: dict[str, Any] | None = None
                        ) -> types.CallToolResult:
        """`tools/call`, as `mcp.Client.call_tool` (a tool's own failure is a result with `is_error`)."""
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if meta:
            params["_meta"] = meta
        return await self.request("tools/call", params, types.CallToolResult, read_timeout_seconds)

    async def list_tools(self) -> types.ListToolsResult:
        """Every tool, all pages followed (a bounded number of them)."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(1000):
            page = await self.request("tools/list", {"cursor": cursor} if cursor else {}, types.ListToolsResult)
            tools += page.tools
            if not (cursor := page.next_cursor):
                break
        return types.ListToolsResult(tools=tools)

    async def send_request(self, request: Any, result_type: type[R], timeout: float | None = None) -> R:
        """A typed request (`types.Request` subclass), as `ClientSession.send_request`."""
        data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        return await self.request(data["method"], data.get("params") or {}, result_type, timeout)


async def _read_capped(response: aiohttp.ClientResponse, url: str) -> bytes:
    """The whole body, refused past MAX_ANSWER_BYTES (a server must not make us hold unbounded memory)."""
    too_big = MCPError(code=types.INTERNAL_ERROR, message=f"the answer from {url} is over {MAX_ANSWER_BYTES} bytes")
    if response.content_length is not None:
        if response.content_length > MAX_ANSWER_BYTES:
            raise too_big
        return await response.read()
    raw = bytearray()
    async for chunk in response.content.iter_any():  # chunked (an event stream, say): counted as it comes
        raw += chunk
        if len(raw) > MAX_ANSWER_BYTES:
            raise too_big
    return bytes(raw)


def _json(raw: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(raw)
    except ValueError:
        return None
    return message if isinstance(message, dict) and ("result" in message or "error" in message) else None


def _sse_message(raw: bytes, rid: int) -> dict[str, Any] | None:
    """The answer to request `rid` among a server-sent event stream's `data:` events."""
    for event in raw.decode("utf-8", "replace").replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in event.split("\n") if line.startswith("data:"))
        message = _json(data.encode()) if data else None
        if message is not None and message.get("id") == rid:
            return message
    return None


def _error_text(raw: bytes) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        return raw[:600].decode("utf-8", "replace")
    if isinstance(body, dict):
        error = body.get("error")
        return str(error.get("message") if isinstance(error, dict) else error or body)[:600]
    return str(body)[:600]
