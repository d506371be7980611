"""`connect(name | url | record)`: an MCP client for any registered server, whatever its transport.

This is the one way the agent, the trainer and the TUI reach a server. A record with several remotes is a
set of replicas: successive connections go round-robin over them.

Servers bound beyond loopback want the registry token on their MCP endpoints: `connect` sends it (`token=`, else
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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
from mcp import Client, StdioServerParameters

from mcpworld.registry.records import (
    DEFAULT_RUNTIME,
    MAX_RECORD_BYTES,
    NAMESPACE,
    launch_problems,
    record_kind,
    record_size,
)

DEFAULT_REGISTRY = "http://127.0.0.1:8765"
TOKEN_ENV = "MCPWORLD_REGISTRY_TOKEN"
_OUR_PATHS = re.compile(r"^(/worlds/[^/]+/mcp|/swe/mcp|/world-models/[^/]+/mcp|/registry/mcp)/?$")
_round_robin: dict[str, itertools.count] = {}


class ConnectError(ConnectionError):
    """The server could not be resolved or reached; the message says which and why."""


def registry_url() -> str:
    return os.environ.get("MCPWORLD_REGISTRY", DEFAULT_REGISTRY).rstrip("/")


def full_name(name: str) -> str:
    """`airline` -> `io.mcpworld/airline`; names that already have a namespace are kept."""
    return name if "/" in name else f"{NAMESPACE}/{name}"


async def fetch_record(name: str, registry: str | None = None, timeout: float = 10.0) -> dict[str, Any]:
    """The latest server.json for `name` from a registry's REST API."""
    base = (registry or registry_url()).rstrip("/")
    url = f"{base}/v0/servers/{quote(full_name(name), safe='')}/versions/latest"
    try:
        async with httpx.AsyncClient(timeout=timeout) as http:
            response = await http.get(url)
    except httpx.HTTPError as exc:
        raise ConnectError(f"registry at {base} is unreachable ({type(exc).__name__}); start it with "
                           "`mcpworld up` or set MCPWORLD_REGISTRY") from None
    if response.status_code == 404:
        raise ConnectError(f"no server named {full_name(name)!r} in the registry at {base}; "
                           "list them with `mcpworld registry list`")
    response.raise_for_status()
    if len(response.content) > 2 * MAX_RECORD_BYTES:  # a record plus the registry's own _meta
        raise ConnectError(f"the registry's record for {full_name(name)!r} is {len(response.content)} bytes; "
                           f"records are capped at {MAX_RECORD_BYTES}")
    return response.json()["server"]


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


def transport_for(record: dict[str, Any], prefer: str = "http") -> str | StdioServerParameters:
    """Pick a remote (round-robin over replicas) or the stdio package of a server.json record."""
    record = record.get("server", record)
    size = record_size(record)
    if size > MAX_RECORD_BYTES + 8192:  # the registry adds a little _meta (health) to what was published
        raise ConnectError(f"{record.get('name')}: the record is {size} bytes; records are capped at "
                           f"{MAX_RECORD_BYTES}")
    remotes = [r for r in record.get("remotes") or [] if r.get("type") == "streamable-http"]
    packages = [p for p in record.get("packages") or [] if (p.get("transport") or {}).get("type") == "stdio"]
    if remotes and (prefer == "http" or not packages):
        counter = _round_robin.setdefault(record["name"], itertools.count())
        return remotes[next(counter) % len(remotes)]["url"]
    if packages:
        return stdio_params(packages[0])
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


def _http_transport(url: str, bearer: str | None, refusals: list[str]) -> Any:
    """The Streamable HTTP transport for `url`, sending `Authorization: Bearer` when `bearer` is set.

    A 401/403/421 answer (a guarded server refusing us) is noted in `refusals`: the SDK reports it only as
    "Server returned an error response", and the server's own message says how to get in.
    """
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client  # what the SDK's own session group uses

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
        async with create_mcp_http_client(headers=headers) as http:
            http.event_hooks["response"].append(note_refusal)
            async with streamable_http_client(url, http_client=http) as streams:
                yield streams

    return transport()


@asynccontextmanager
async def connect(target: str | dict[str, Any], *, registry: str | None = None, timeout: float = 30.0,
                  prefer: str = "http", mode: str = "auto", token: str | None = None) -> AsyncIterator[Client]:
    """An entered `mcp.Client` for a server name, an MCP URL, or a server.json record.

    `token` (default MCPWORLD_REGISTRY_TOKEN) is sent as `Authorization: Bearer` to mcpworld's own servers, which
    ask for it when they are bound beyond loopback (see `bearer_for`).

    >>> async with connect("airline") as client:          # doctest: +SKIP
    ...     tools = await client.list_tools()
    """
    record: dict[str, Any] | None = None
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        transport: str | StdioServerParameters = target
        label = target
    else:
        record = target if isinstance(target, dict) else await fetch_record(target, registry, timeout)
        record = record.get("server", record)
        transport = transport_for(record, prefer)
        label = record.get("name", "?")
    server: Any = transport
    refusals: list[str] = []
    if isinstance(transport, str):
        server = _http_transport(transport, bearer_for(transport, record, token, registry), refusals)
    client = Client(server, read_timeout_seconds=timeout, mode=mode)
    try:
        await client.__aenter__()
    except Exception as exc:
        reason = refusals[0] if refusals else f"{type(exc).__name__}: {exc}"
        raise ConnectError(f"cannot reach {label} at {transport}: {reason}") from exc
    try:
        yield client
    finally:
        await client.__aexit__(None, None, None)
