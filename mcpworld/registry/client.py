"""The one client for a registry's REST API (/v0): records by name, every page of a listing, writes with a token.

`RegistryClient` is synchronous (the CLI, and the TUI from a thread worker); `AsyncRegistryClient` is the same
API for event loops (`connect()` resolving a name). Both follow `metadata.nextCursor` to the last page (bounded,
so a misbehaving registry cannot loop us forever), share one TLS context per process, and turn every failure
into a `RegistryError` whose message says what was wrong and what to do next.
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import quote

import httpx

from mcpworld.core.paths import running_up_url
from mcpworld.registry.records import MAX_RECORD_BYTES, NAMESPACE

DEFAULT_REGISTRY = "http://127.0.0.1:8765"
MAX_PAGES = 1000  # a cursor loop must end even if a registry misbehaves


class ConnectError(ConnectionError):
    """A server or the registry could not be resolved or reached; the message says which and why."""


class RegistryError(ConnectError):
    """The registry could not be reached, or refused a request; the message says why and what to do."""

    def __init__(self, message: str, status: int | None = None, body: Any = None):
        super().__init__(message)
        self.status, self.body = status, body


def registry_url() -> str:
    """$MCPWORLD_REGISTRY, else the running `mcpworld up` (whatever its --port), else http://127.0.0.1:8765."""
    return (os.environ.get("MCPWORLD_REGISTRY") or running_up_url() or DEFAULT_REGISTRY).rstrip("/")


def full_name(name: str) -> str:
    """`airline` -> `io.mcpworld/airline`; names that already have a namespace are kept."""
    return name if "/" in name else f"{NAMESPACE}/{name}"


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One verified TLS context per process: building one reads the CA bundle (tens of ms), so never per client."""
    return httpx.create_ssl_context()


def _record_path(name: str) -> str:
    return f"/v0/servers/{quote(full_name(name), safe='')}/versions/latest"


def _page_params(search: str | None, kind: str | None, cursor: str | None, page_size: int) -> dict[str, Any]:
    params = {"version": "latest", "limit": page_size, "search": search, "kind": kind, "cursor": cursor}
    return {k: v for k, v in params.items() if v is not None}


def _unreachable(base: str, exc: Exception) -> RegistryError:
    return RegistryError(f"registry at {base} is unreachable ({type(exc).__name__}); start it with `mcpworld up`, "
                         "set MCPWORLD_REGISTRY or pass --registry")


def _checked(base: str, response: httpx.Response) -> Any:
    """The JSON body of a 2xx answer, else a RegistryError carrying the registry's own message."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code >= 400:
        message = (body.get("error") or body.get("detail")) if isinstance(body, dict) else None
        raise RegistryError(f"registry at {base} answered {response.status_code}: "
                            f"{message or response.text[:200]}", response.status_code, body)
    if body is None:
        raise RegistryError(f"registry at {base} did not answer with JSON; is it an mcpworld registry?",
                            response.status_code)
    return body


def _record_from(base: str, name: str, response: httpx.Response) -> dict[str, Any]:
    if response.status_code == 404:
        raise RegistryError(f"no server named {full_name(name)!r} in the registry at {base}; "
                            "list them with `mcpworld registry list`", 404)
    if len(response.content) > 2 * MAX_RECORD_BYTES:  # a record plus the registry's own _meta
        raise RegistryError(f"the registry's record for {full_name(name)!r} is {len(response.content)} bytes; "
                            f"records are capped at {MAX_RECORD_BYTES}")
    return _checked(base, response)["server"]


def _next_cursor(body: Any) -> str | None:
    return (body.get("metadata") or {}).get("nextCursor") if isinstance(body, dict) else None


class RegistryClient:
    """A registry's REST API, synchronously; use as a context manager (one pooled connection for all requests)."""

    def __init__(self, base: str | None = None, timeout: float = 30.0, token: str | None = None):
        self.base = (base or registry_url()).rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._http = httpx.Client(base_url=self.base, timeout=timeout, headers=headers, verify=tls_context())

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """`method path` (params=, json=, timeout=), the answer's JSON; RegistryError for any failure."""
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise _unreachable(self.base, exc) from None
        return _checked(self.base, response)

    def servers(self, search: str | None = None, kind: str | None = None, page_size: int = 100
                ) -> Iterator[dict[str, Any]]:
        """Every latest entry (`{"server": record, "_meta": ...}`), page after page."""
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            body = self.request("GET", "/v0/servers", params=_page_params(search, kind, cursor, page_size))
            yield from body.get("servers") or []
            if not (cursor := _next_cursor(body)):
                return

    def record(self, name: str) -> dict[str, Any]:
        """The latest server.json for `name` (`airline` means `io.mcpworld/airline`)."""
        try:
            response = self._http.get(_record_path(name))
        except httpx.HTTPError as exc:
            raise _unreachable(self.base, exc) from None
        return _record_from(self.base, name, response)


class AsyncRegistryClient:
    """`RegistryClient` for event loops."""

    def __init__(self, base: str | None = None, timeout: float = 30.0, token: str | None = None):
        self.base = (base or registry_url()).rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._http = httpx.AsyncClient(base_url=self.base, timeout=timeout, headers=headers, verify=tls_context())

    async def __aenter__(self) -> AsyncRegistryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise _unreachable(self.base, exc) from None
        return _checked(self.base, response)

    async def servers(self, search: str | None = None, kind: str | None = None, page_size: int = 100
                      ) -> AsyncIterator[dict[str, Any]]:
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            body = await self.request("GET", "/v0/servers", params=_page_params(search, kind, cursor, page_size))
            for item in body.get("servers") or []:
                yield item
            if not (cursor := _next_cursor(body)):
                return

    async def record(self, name: str) -> dict[str, Any]:
        try:
            response = await self._http.get(_record_path(name))
        except httpx.HTTPError as exc:
            raise _unreachable(self.base, exc) from None
        return _record_from(self.base, name, response)
