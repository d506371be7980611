"""`connect(name | url | record)`: an MCP client for any registered server, whatever its transport, and
`open_episodes(...)`: the fast path for running many episodes on one server.

This is the one way the agent, the trainer and the TUI reach a server. A record with several remotes is a
set of replicas: successive connections go round-robin over them.

`open_episodes` gives an `EpisodeControl` over one shared connection for any number of concurrent episodes: a
`SessionlessClient` (pooled, no handshake at all) when the server speaks MCP 2026-07-28 over HTTP, else one
`mcp.Client` (stdio, or a server that wants the 2025 handshake). `connect` stays the full SDK client, for
everything else an MCP client does (resources, prompts, the TUI's console).

Servers bound beyond loopback want the registry token on their MCP endpoints: both send it (`token=`, else
MCPWORLD_REGISTRY_TOKEN) to mcpworld's own servers only: records whose kind is not `external`, and URLs on the
registry's origin or at an mcpworld endpoint path. A stdio package is launched only when its record passes
`launch_problems` (allowed runtime, no paths or options as the program, size cap), checked again here.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from mcpworld.core.protocol import EpisodeControl
from mcpworld.registry.client import (
    DEFAULT_REGISTRY,
    AsyncRegistryClient,
    ConnectError,
    full_name,
    registry_url,
    tls_context,
)
from mcpworld.registry.records import (
    DEFAULT_RUNTIME,
    MAX_RECORD_BYTES,
    launch_problems,
    local_stdio_args,
    record_kind,
    record_size,
)
from mcpworld.registry.sessionless import NotSessionless, SessionlessClient

__all__ = ["DEFAULT_REGISTRY", "TOKEN_ENV", "ConnectError", "bearer_for", "connect", "fetch_record", "full_name",
           "open_episodes", "registry_url", "resolve", "stdio_params", "transport_for"]

TOKEN_ENV = "MCPWORLD_REGISTRY_TOKEN"
_OUR_PATHS = re.compile(r"^(/worlds/[^/]+/mcp|/swe/mcp|/world-models/[^/]+/mcp|/registry/mcp)/?$")
_round_robin: dict[str, itertools.count] = {}


async def fetch_record(name: str, registry: str | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """The latest server.json for `name` from a registry's REST API."""
    async with AsyncRegistryClient(registry, timeout=timeout) as registry_client:
        return await registry_client.record(name)


def stdio_params(package: dict[str, Any]) -> StdioServerParameters:
    """How to launch a package over stdio (mcpworld's own packages run with this interpreter)."""
    problems = launch_problems({"packages": [package]})
    if problems:
        raise ConnectError(f"refusing to launch {package.get('identifier')!r}: "
                           + "; ".join(f"{e['path']}: {e['message']}" for e in problems))
    args = [a.get("value") or a.get("default") or "" for a in package.get("packageArguments") or []]
    if package.get("registryType") == "pypi" and package.get("identifier") == "mcpworld":
        return StdioServerParameters(command=sys.executable, args=["-m", "mcpworld", *args])
    hint = package.get("runtimeHint") or DEFAULT_RUNTIME.get(package.get("registryType", ""))
    if hint is None or shutil.which(hint) is None:
        raise ConnectError(f"cannot launch {package.get('identifier')}: runtime {hint!r} is not installed")
    runtime_args = [a.get("value") or "" for a in package.get("runtimeArguments") or []]
    return StdioServerParameters(command=hint, args=[*runtime_args, package["identifier"], *args])


def local_stdio_params(record: dict[str, Any]) -> StdioServerParameters:
    """How to start one of mcpworld's own servers over stdio on this machine (`python -m mcpworld <args>`), from
    the launch its record keeps in `_meta` (records name no package: mcpworld is on no package registry)."""
    args = local_stdio_args(record)
    problems = [e for e in launch_problems(record) if "stdio" in e["path"]]
    if not args or problems:
        raise ConnectError(f"refusing to launch {record.get('name')!r} over stdio: "
                           + ("; ".join(f"{e['path']}: {e['message']}" for e in problems) or "no stdio launch"))
    return StdioServerParameters(command=sys.executable, args=["-m", "mcpworld", *args])


def transport_for(record: dict[str, Any], prefer: str = "http") -> str | StdioServerParameters:
    """Pick a remote (round-robin over replicas) or the stdio package of a server.json record."""
    record = record.get("server", record)
    size = record_size(record)
    if size > MAX_RECORD_BYTES + 8192:  # the registry adds a little _meta (health) to what was published
        raise ConnectError(f"{record.get('name')}: the record is {size} bytes; records are capped at "
                           f"{MAX_RECORD_BYTES}")
    remotes = [r for r in record.get("remotes") or [] if r.get("type") == "streamable-http"]
    packages = [p for p in record.get("packages") or [] if (p.get("transport") or {}).get("type") == "stdio"]
    local = local_stdio_args(record)
    if remotes and (prefer == "http" or not (packages or local)):
        counter = _round_robin.setdefault(record["name"], itertools.count())
        return remotes[next(counter) % len(remotes)]["url"]
    if packages:
        return stdio_params(packages[0])
    if local:
        return local_stdio_params(record)
    raise ConnectError(f"{record.get('name')}: the record has no streamable-http remote or stdio package")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(parts.scheme)


def bearer_for(url: str, record: dict[str, Any] | None, token: str | None = None,
               registry: str | None = None) -> str | None:
    """The token to send to `url`, or None: the registry token goes only to mcpworld's own servers.

    Those are records of a kind other than `external`, or (for a bare URL) the registry's own origin or an
    mcpworld endpoint path (/worlds/<name>/mcp, /swe/mcp, /world-models/<name>/mcp, /registry/mcp). An explicit
    `token` for a bare URL is the caller's choice and always sent.
    """
    secret = token or os.environ.get(TOKEN_ENV) or None
    if not secret:
        return None
    if record is not None:
        return secret if record_kind(record) != "external" else None
    if token:
        return secret
    ours = _origin(url) == _origin(registry or registry_url()) or bool(_OUR_PATHS.match(urlsplit(url).path))
    return secret if ours else None


def _http_transport(url: str, bearer: str | None, refusals: list[str], timeout: float) -> Any:
    """The SDK's Streamable HTTP transport for `url`, sending `Authorization: Bearer` when `bearer` is set.

    A 401/403/421 answer (a guarded server refusing us) is noted in `refusals`: the SDK reports it only as
    "Server returned an error response", and the server's own message says how to get in. The HTTP client
    reuses the process's TLS context (building one per connection cost more than the episodes it carried).
    """
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async def note_refusal(response: Any) -> None:
        if response.status_code in (401, 403, 421):
            await response.aread()
            try:
                message = response.json().get("error") or response.text
            except Exception:  # noqa: BLE001 - not JSON
                message = response.text
            refusals.append(f"HTTP {response.status_code}: {str(message)[:600]}")

    @asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else None
        # the SDK's own defaults (create_mcp_http_client): 30 s to connect and write, a long read for streams
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=max(300.0, timeout)),
                                      verify=tls_context(), event_hooks={"response": [note_refusal]}) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                yield streams

    return transport()


async def resolve(target: str | dict[str, Any], registry: str | None = None, timeout: float = 30.0,
                  prefer: str = "http") -> tuple[str | StdioServerParameters, dict[str, Any] | None, str]:
    """(transport, record or None, label) for a name, an MCP URL or a server.json record."""
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        return target, None, target
    record = target if isinstance(target, dict) else await fetch_record(target, registry, timeout)
    record = record.get("server", record)
    return transport_for(record, prefer), record, record.get("name", "?")


async def _entered(transport: str | StdioServerParameters, label: str, bearer: str | None, timeout: float,
                   mode: str, wrap: Callable[[Any], Any] | None = None) -> Client:
    server: Any = transport
    refusals: list[str] = []
    if isinstance(transport, str):
        server = _http_transport(transport, bearer, refusals, timeout)
    if wrap is not None:  # e.g. the TUI's tap on the streams: its JSON-RPC log is read off the wire
        server = wrap(stdio_client(server) if isinstance(server, StdioServerParameters) else server)
    client = Client(server, read_timeout_seconds=timeout, mode=mode)
    try:
        await client.__aenter__()
    except Exception as exc:
        reason = refusals[0] if refusals else f"{type(exc).__name__}: {exc}"
        raise ConnectError(f"cannot reach {label} at {transport}: {reason}") from exc
    return client


@asynccontextmanager
async def connect(target: str | dict[str, Any], *, registry: str | None = None, timeout: float = 30.0,
                  prefer: str = "http", mode: str = "auto", token: str | None = None,
                  wrap: Callable[[Any], Any] | None = None) -> AsyncIterator[Client]:
    """An entered `mcp.Client` for a server name, an MCP URL, or a server.json record.

    `token` (default MCPWORLD_REGISTRY_TOKEN) is sent as `Authorization: Bearer` to mcpworld's own servers, which
    ask for it when they are bound beyond loopback (see `bearer_for`). `wrap`, if given, receives the transport
    (an async context manager yielding the read and write streams, stdio included) and returns the one to use.

    >>> async with connect("airline") as client:          # doctest: +SKIP
    ...     tools = await client.list_tools()
    """
    transport, record, label = await resolve(target, registry, timeout, prefer)
    bearer = bearer_for(transport, record, token, registry) if isinstance(transport, str) else None
    client = await _entered(transport, label, bearer, timeout, mode, wrap)
    try:
        yield client
    finally:
        await client.__aexit__(None, None, None)


@asynccontextmanager
async def open_episodes(target: str | dict[str, Any], *, registry: str | None = None, timeout: float = 30.0,
                        prefer: str = "http", token: str | None = None, limit: int = 0
                        ) -> AsyncIterator[EpisodeControl]:
    """An `EpisodeControl` that any number of tasks may share, each playing its own episodes.

    Over HTTP to a server that speaks MCP 2026-07-28 it is a `SessionlessClient`: one connection pool (at most
    `limit` connections, 0 for no cap), no handshake, each request standing alone. Otherwise one `mcp.Client`
    (stdio, or a 2025-era server) carries every episode; its requests are multiplexed by id.

    >>> async with open_episodes("airline") as ctl:       # doctest: +SKIP
    ...     started = await ctl.start("cancel-within-24h")
    """
    transport, record, label = await resolve(target, registry, timeout, prefer)
    if isinstance(transport, str):
        bearer = bearer_for(transport, record, token, registry)
        lean = SessionlessClient(transport, bearer=bearer, timeout=timeout, limit=limit)
        try:
            await lean.__aenter__()
        except NotSessionless:  # a 2025-era server: the SDK's handshake below
            pass
        else:
            try:
                yield EpisodeControl(lean, timeout)
            finally:
                await lean.__aexit__(None, None, None)
            return
    else:
        bearer = None
    client = await _entered(transport, label, bearer, timeout, "auto")
    try:
        yield EpisodeControl(client, timeout)
    finally:
        await client.__aexit__(None, None, None)
