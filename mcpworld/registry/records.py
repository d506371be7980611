"""server.json records: validation with JSON paths, and the records mcpworld writes for its own servers.

The shape follows the official MCP Registry's server.json; mcpworld's facts live under `_meta` with the
reverse-DNS key `io.mcpworld/server`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcpworld import __version__

SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json"
META_KEY = "io.mcpworld/server"
NAMESPACE = "io.mcpworld"
Kind = Literal["world", "swe", "world-model", "external", "registry"]
_RANGE = re.compile(r"^[\^~<>=]|\.x$|\*|^latest$")
MAX_RECORD_BYTES = 64 * 1024
# What a package may name as the program to start: the official schema's examples (npx, uvx, docker, dnx) and the
# interpreters mcpworld's own packages use. Always a bare name looked up on PATH, never a path.
RUNTIME_HINTS = frozenset({"npx", "uvx", "dnx", "docker", "python", "python3", "mcpworld"})
DEFAULT_RUNTIME = {"npm": "npx", "pypi": "uvx", "oci": "docker", "nuget": "dnx"}


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


def record_size(doc: Any) -> int:
    """Bytes of the record as compact JSON (what the cap is measured on)."""
    return len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False, default=str).encode())


def _size_error(doc: Any) -> dict[str, str] | None:
    size = record_size(doc)
    if size <= MAX_RECORD_BYTES:
        return None
    return {"path": "$", "message": f"the record is {size} bytes; the cap is {MAX_RECORD_BYTES} "
                                   f"({MAX_RECORD_BYTES // 1024} KiB)"}


def _is_path(value: str) -> bool:
    return value.startswith(("/", "~", "./", "../", "\\")) or bool(re.match(r"^[A-Za-z]:[\\/]", value))


def _bad_word(value: str) -> str | None:
    """Why a program-position string (runtime hint, package identifier) cannot be executed safely, else None."""
    if "\0" in value or "\n" in value:
        return "must not contain NUL or newline characters"
    if value.startswith("-"):
        return "must not start with '-' (it would be read as an option)"
    if _is_path(value):
        return "must not be a filesystem path"
    return None


def package_problems(package: dict[str, Any], path: str = "$") -> list[dict[str, str]]:
    """What makes a stdio package unsafe to launch: a runtime outside RUNTIME_HINTS, a path or option as the
    program or identifier, non-string or NUL-carrying arguments. Arguments are passed to exec, never a shell."""
    errors = []
    hint = package.get("runtimeHint")
    if hint is not None:
        if not isinstance(hint, str) or hint not in RUNTIME_HINTS:
            allowed = ", ".join(sorted(RUNTIME_HINTS))
            errors.append({"path": f"{path}.runtimeHint", "message": f"runtime {hint!r} is not allowed; use one of "
                                                                       f"{allowed}"})
    identifier = package.get("identifier")
    if isinstance(identifier, str):
        problem = _bad_word(identifier)
        if problem:
            errors.append({"path": f"{path}.identifier", "message": problem})
    ours = package.get("registryType") == "pypi" and identifier == "mcpworld"  # run with our own interpreter
    for key in ("runtimeArguments", "packageArguments"):
        for i, arg in enumerate(package.get(key) or []):
            if not isinstance(arg, dict):
                continue
            for field in ("value", "default", "name"):
                value = arg.get(field)
                if value is not None and (not isinstance(value, str) or "\0" in value):
                    errors.append({"path": f"{path}.{key}[{i}].{field}", "message": "must be a string without NUL"})
                elif ours and isinstance(value, str) and _is_path(value):
                    errors.append({"path": f"{path}.{key}[{i}].{field}",
                                   "message": "mcpworld's own package takes names, not filesystem paths"})
    return errors


def launch_problems(doc: dict[str, Any]) -> list[dict[str, str]]:
    """Every reason not to use a record (its size, each package's launch problems): checked at publish and again
    by `connect` before it starts anything, since a store may hold records from before these rules."""
    too_big = _size_error(doc)
    errors = [too_big] if too_big else []
    for i, package in enumerate(doc.get("packages") or []):
        if isinstance(package, dict):
            errors += package_problems(package, f"$.packages[{i}]")
    return errors


def validate_record(doc: Any) -> dict[str, Any]:
    """Check a server.json document; raise RecordError naming the JSON path of every error."""
    if not isinstance(doc, dict):
        raise RecordError([{"path": "$", "message": "a server.json document must be a JSON object"}])
    too_big = _size_error(doc)
    if too_big:  # before the schema: don't spend time on a huge document
        raise RecordError([too_big])
    try:
        ServerJSON.model_validate(doc)
    except ValidationError as exc:
        raise RecordError([{"path": _path(e["loc"]), "message": e["msg"]} for e in exc.errors()]) from None
    errors = [e for e in launch_problems(doc) if e["path"] != "$"]  # the size is checked above
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
