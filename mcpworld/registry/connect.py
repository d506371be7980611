"""`connect(name | url | record)`: an MCP client for any registered server, whatever its transport.

This is the one way the agent, the trainer and the TUI reach a server. A record with several remotes is a
set of replicas: successive connections go round-robin over them.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import httpx
from mcp import Client, StdioServerParameters

from mcpworld.registry.records import NAMESPACE

DEFAULT_REGISTRY = "http://127.0.0.1:8765"
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
    return response.json()["server"]


def stdio_params(package: dict[str, Any]) -> StdioServerParameters:
    """How to launch a package over stdio (mcpworld's own packages run with this interpreter)."""
    args = [a.get("value") or a.get("default") or "" for a in package.get("packageArguments") or []]
    if package.get("registryType") == "pypi" and package.get("identifier") == "mcpworld":
        return StdioServerParameters(command=sys.executable, args=["-m", "mcpworld", *args])
    hint = package.get("runtimeHint") or {"npm": "npx", "pypi": "uvx"}.get(package.get("registryType", ""))
    if hint is None or shutil.which(hint) is None:
        raise ConnectError(f"cannot launch {package.get('identifier')}: runtime {hint!r} is not installed")
    runtime_args = [a.get("value") or "" for a in package.get("runtimeArguments") or []]
    return StdioServerParameters(command=hint, args=[*runtime_args, package["identifier"], *args])


def transport_for(record: dict[str, Any], prefer: str = "http") -> str | StdioServerParameters:
    """Pick a remote (round-robin over replicas) or the stdio package of a server.json record."""
    record = record.get("server", record)
    remotes = [r for r in record.get("remotes") or [] if r.get("type") == "streamable-http"]
    packages = [p for p in record.get("packages") or [] if (p.get("transport") or {}).get("type") == "stdio"]
    if remotes and (prefer == "http" or not packages):
        counter = _round_robin.setdefault(record["name"], itertools.count())
        return remotes[next(counter) % len(remotes)]["url"]
    if packages:
        return stdio_params(packages[0])
    raise ConnectError(f"{record.get('name')}: the record has no streamable-http remote or stdio package")


@asynccontextmanager
async def connect(target: str | dict[str, Any], *, registry: str | None = None, timeout: float = 30.0,
                  prefer: str = "http", mode: str = "auto") -> AsyncIterator[Client]:
    """An entered `mcp.Client` for a server name, an MCP URL, or a server.json record.

    >>> async with connect("airline") as client:          # doctest: +SKIP
    ...     tools = await client.list_tools()
    """
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        transport: str | StdioServerParameters = target
        label = target
    else:
        record = target if isinstance(target, dict) else await fetch_record(target, registry, timeout)
        transport = transport_for(record, prefer)
        label = record.get("server", record).get("name", "?")
    client = Client(transport, read_timeout_seconds=timeout, mode=mode)
    try:
        await client.__aenter__()
    except Exception as exc:
        raise ConnectError(f"cannot reach {label} at {transport}: {type(exc).__name__}: {exc}") from exc
    try:
        yield client
    finally:
        await client.__aexit__(None, None, None)
