"""server.json records: validation with JSON paths, and the records mcpworld writes for its own servers.

The shape follows the official MCP Registry's server.json; mcpworld's facts live under `_meta` with the
reverse-DNS key `io.mcpworld/server`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcpworld import __version__

SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json"
META_KEY = "io.mcpworld/server"
NAMESPACE = "io.mcpworld"
Kind = Literal["world", "swe", "world-model", "external", "registry"]
_RANGE = re.compile(r"^[\^~<>=]|\.x$|\*|^latest$")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Transport(_Open):
    type: Literal["stdio", "streamable-http", "sse"]
    url: str | None = None


class Argument(_Open):
    type: Literal["positional", "named"]
    value: str | None = None
    name: str | None = None
    valueHint: str | None = None


class Package(BaseModel):
    model_config = ConfigDict(extra="forbid")
    registryType: str
    identifier: str
    version: str = Field(min_length=1)
    transport: Transport
    registryBaseUrl: str | None = None
    fileSha256: str | None = Field(default=None, pattern=r"^[a-f0-9]{64}$")
    runtimeHint: str | None = None
    runtimeArguments: list[Argument] | None = None
    packageArguments: list[Argument] | None = None
    environmentVariables: list[dict[str, Any]] | None = None


class Remote(_Open):
    type: Literal["streamable-http", "sse"]
    url: str = Field(pattern=r"^https?://")


class ServerJSON(_Open):
    name: str = Field(min_length=3, max_length=200, pattern=r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")
    description: str = Field(min_length=1, max_length=100)
    version: str = Field(min_length=1, max_length=255)
    title: str | None = None
    websiteUrl: str | None = None
    packages: list[Package] | None = None
    remotes: list[Remote] | None = None
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")
    schema_: str | None = Field(default=None, alias="$schema")


class RecordError(ValueError):
    """An invalid server.json; `errors` holds {path, message} for each problem."""

    def __init__(self, errors: list[dict[str, str]]):
        self.errors = errors
        super().__init__("; ".join(f"{e['path']}: {e['message']}" for e in errors))


def _path(loc: tuple[Any, ...]) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def validate_record(doc: Any) -> dict[str, Any]:
    """Check a server.json document; raise RecordError naming the JSON path of every error."""
    if not isinstance(doc, dict):
        raise RecordError([{"path": "$", "message": "a server.json document must be a JSON object"}])
    try:
        ServerJSON.model_validate(doc)
    except ValidationError as exc:
        raise RecordError([{"path": _path(e["loc"]), "message": e["msg"]} for e in exc.errors()]) from None
    errors = []
    if _RANGE.search(doc["version"]):
        errors.append({"path": "$.version", "message": "must be one exact version, not a range or 'latest'"})
    if not doc.get("packages") and not doc.get("remotes"):
        errors.append({"path": "$", "message": "needs packages (stdio launch) or remotes (HTTP URLs) to be reachable"})
    if errors:
        raise RecordError(errors)
    return doc


def mcpworld_meta(doc: dict[str, Any]) -> dict[str, Any]:
    """mcpworld's own facts about a record (kind, tags, counts, health); {} for foreign records."""
    return (doc.get("_meta") or {}).get(META_KEY) or {}


def record_kind(doc: dict[str, Any]) -> str:
    return mcpworld_meta(doc).get("kind", "external")


def local_record(name: str, description: str, kind: Kind, *, url: str | None = None,
                 stdio_args: list[str] | None = None, title: str | None = None, version: str = __version__,
                 facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """A server.json for a server this installation runs: HTTP remote and/or `mcpworld ...` over stdio."""
    doc: dict[str, Any] = {
        "$schema": SCHEMA_URL,
        "name": name if "/" in name else f"{NAMESPACE}/{name}",
        "description": description[:100],
        "version": version,
    }
    if title:
        doc["title"] = title
    if stdio_args:
        doc["packages"] = [{
            "registryType": "pypi", "identifier": "mcpworld", "version": __version__, "runtimeHint": "uvx",
            "transport": {"type": "stdio"},
            "packageArguments": [{"type": "positional", "value": a} for a in stdio_args],
        }]
    if url:
        doc["remotes"] = [{"type": "streamable-http", "url": url}]
    doc["_meta"] = {META_KEY: {"kind": kind, **(facts or {})}}
    return doc
