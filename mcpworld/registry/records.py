"""server.json records: validation with JSON paths, and the records mcpworld writes for its own servers.

A record is accepted when the official MCP Registry's JSON Schema accepts it (`server.schema.json` beside this
module: the published 2025-12-11 schema, copied unchanged from modelcontextprotocol/static, MIT per the registry's
OpenAPI) and it passes mcpworld's launch-safety rules. mcpworld's facts live under `_meta` with the reverse-DNS
key `io.mcpworld/server`.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any, Literal

from jsonschema import Draft7Validator

from mcpworld import __version__

SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
META_KEY = "io.mcpworld/server"  # in a record's `_meta`: what mcpworld, as publisher, says about its servers
OFFICIAL = "io.modelcontextprotocol.registry/official"  # in a response's `_meta`: status, dates, isLatest
REGISTRY_META = "io.mcpworld/registry"  # in a response's `_meta`: what this registry measured (health)
NAMESPACE = "io.mcpworld"
Kind = Literal["world", "swe", "world-model", "external", "registry"]
_RANGE = re.compile(r"^[\^~<>=]|\.x$|\*|^latest$")
MAX_RECORD_BYTES = 64 * 1024
# What a package may name as the program to start: the official schema's examples (npx, uvx, docker, dnx) and the
# interpreters mcpworld's own packages use. Always a bare name looked up on PATH, never a path.
RUNTIME_HINTS = frozenset({"npx", "uvx", "dnx", "docker", "python", "python3", "mcpworld"})
RUNTIME_FLAGS: dict[str, dict[str, bool]] = {  # the runtime arguments each runtime may get: flag -> takes a value
    "python": {"-m": True, "-u": False, "-I": False, "-B": False, "-E": False, "-s": False},
    "python3": {"-m": True, "-u": False, "-I": False, "-B": False, "-E": False, "-s": False},
    "npx": {"-y": False, "--yes": False, "-q": False, "--quiet": False, "--prefer-offline": False},
    "uvx": {"--from": True, "--with": True, "--python": True, "-q": False, "--quiet": False, "--offline": False},
    "dnx": {"-y": False, "--yes": False},
    "docker": {"run": False, "-i": False, "--interactive": False, "--rm": False, "--init": False, "-e": True,
               "--env": True, "--network": True},
    "mcpworld": {},
}
"""Nothing that runs inline code (`python -c`, `npx -c`), reads a script from stdin, or hands a container the
host (`docker --privileged`, `-v /:/host`): a record names a package, and the runtime only fetches and starts it."""
DEFAULT_RUNTIME = {"npm": "npx", "pypi": "uvx", "oci": "docker", "nuget": "dnx"}


@cache
def official_schema() -> dict[str, Any]:
    """The official server.json JSON Schema (2025-12-11), shipped as package data."""
    return json.loads(resources.files("mcpworld.registry").joinpath("server.schema.json").read_text())


@cache
def _validator() -> Draft7Validator:
    return Draft7Validator(official_schema())


class RecordError(ValueError):
    """An invalid server.json; `errors` holds {path, message} for each problem."""

    def __init__(self, errors: list[dict[str, str]]):
        self.errors = errors
        super().__init__("; ".join(f"{e['path']}: {e['message']}" for e in errors))


def _path(loc: Any) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _schema_error(error: Any) -> dict[str, str]:
    """One schema violation as {path, message}; for an anyOf/allOf failure, the most specific cause inside it."""
    leaf = error
    while leaf.context:  # the deepest cause names the field that is wrong (`$.remotes[0].type`, not `$.remotes[0]`)
        leaf = max(leaf.context, key=lambda e: len(e.absolute_path))
    message = leaf.message if len(leaf.message) <= 200 else leaf.message[:200] + "…"
    return {"path": _path(leaf.absolute_path), "message": message}


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
    runtime = hint if isinstance(hint, str) else DEFAULT_RUNTIME.get(str(package.get("registryType", "")), "")
    errors += _runtime_argument_problems(runtime, package.get("runtimeArguments") or [], path)
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


def _runtime_argument_problems(runtime: str, arguments: list[Any], path: str) -> list[dict[str, str]]:
    """Runtime arguments outside `RUNTIME_FLAGS[runtime]` (a flag's value may not be another flag; a container's
    network may only be `none`), each with where it is and what is allowed."""
    allowed = RUNTIME_FLAGS.get(runtime, {})
    errors: list[dict[str, str]] = []
    value_of: str | None = None  # the flag whose value comes next
    for i, arg in enumerate(arguments):
        value = (arg.get("value") or arg.get("default") or arg.get("name")) if isinstance(arg, dict) else None
        if not isinstance(value, str):
            continue
        if value_of is not None:
            flag, value_of = value_of, None
            if not value.startswith("-") and not (flag == "--network" and value != "none"):
                continue
        else:
            flag, eq, given = value.partition("=")
            if flag in allowed and not (flag == "--network" and eq and given != "none"):
                value_of = flag if allowed[flag] and not eq else None
                continue
        errors.append({"path": f"{path}.runtimeArguments[{i}]",
                       "message": f"{value!r} is not a runtime argument {runtime or 'this runtime'} may get "
                                  f"(allowed: {', '.join(allowed) or 'none'}; a container's --network only none): "
                                  "nothing that runs inline code or opens the host"})
    return errors


def launch_problems(doc: dict[str, Any]) -> list[dict[str, str]]:
    """Every reason not to use a record (its size, each package's launch problems): checked at publish and again
    by `connect` before it starts anything, since a store may hold records from before these rules."""
    too_big = _size_error(doc)
    errors = [too_big] if too_big else []
    for i, package in enumerate(doc.get("packages") or []):
        if isinstance(package, dict):
            errors += package_problems(package, f"$.packages[{i}]")
    stdio = mcpworld_meta(doc).get("stdio")
    if stdio is not None:
        where = f'$._meta["{META_KEY}"].stdio'
        if not isinstance(stdio, list) or not stdio:
            errors.append({"path": where, "message": "must be a non-empty list of `mcpworld` arguments"})
        elif stdio[0] != "serve" or "--stdio" not in stdio:  # a server, never another command (`up`, `train`...)
            errors.append({"path": where, "message": "must be `serve ... --stdio` (a server over stdio)"})
        else:
            for i, arg in enumerate(stdio):
                if not isinstance(arg, str) or "\0" in arg or "\n" in arg:
                    errors.append({"path": f"{where}[{i}]", "message": "must be a string without NUL or newline"})
                elif _is_path(arg):
                    errors.append({"path": f"{where}[{i}]",
                                   "message": "mcpworld's own servers take names, not filesystem paths"})
    return errors


def validate_record(doc: Any) -> dict[str, Any]:
    """Check a server.json document; raise RecordError naming the JSON path of every error."""
    if not isinstance(doc, dict):
        raise RecordError([{"path": "$", "message": "a server.json document must be a JSON object"}])
    too_big = _size_error(doc)
    if too_big:  # before the schema: don't spend time on a huge document
        raise RecordError([too_big])
    schema_errors = [_schema_error(e) for e in _validator().iter_errors(doc)]
    if schema_errors:
        raise RecordError(schema_errors)
    errors = [e for e in launch_problems(doc) if e["path"] != "$"]  # the size is checked above
    if _RANGE.search(doc["version"]):
        errors.append({"path": "$.version", "message": "must be one exact version, not a range or 'latest'"})
    if not doc.get("packages") and not doc.get("remotes") and not local_stdio_args(doc):
        errors.append({"path": "$", "message": "needs packages (stdio launch) or remotes (HTTP URLs) to be reachable"})
    if errors:
        raise RecordError(errors)
    return doc


ANONYMOUS_NAMESPACE = "io.modelcontextprotocol.anonymous/"  # what an anonymous token may write, as upstream


def mcpworld_meta(doc: dict[str, Any]) -> dict[str, Any]:
    """What mcpworld, as publisher, says about a record (kind, tags, counts, stdio launch); {} for others.

    A record in the anonymous namespace says nothing here, whatever its `_meta` claims: anyone may publish there,
    and the claim decides who gets the registry token (`bearer_for`) and what `mcpworld` command launches it."""
    name = doc.get("name")
    if isinstance(name, str) and name.startswith(ANONYMOUS_NAMESPACE):
        return {}
    meta = doc.get("_meta")
    ours = meta.get(META_KEY) if isinstance(meta, dict) else None
    return ours if isinstance(ours, dict) else {}


def health_of(item: dict[str, Any]) -> dict[str, Any]:
    """The registry's last health check of a listed server ({status, latency_ms, checked_at, error}), else {}.

    `item` is one `{server, _meta}` entry of a registry response: health is the registry's fact, kept in the
    response's `_meta`, never in the publisher's record.
    """
    meta = item.get("_meta")
    ours = meta.get(REGISTRY_META) if isinstance(meta, dict) else None
    health = ours.get("health") if isinstance(ours, dict) else None
    return health if isinstance(health, dict) else {}


def record_kind(doc: dict[str, Any]) -> str:
    return mcpworld_meta(doc).get("kind", "external")


def play_url(doc: dict[str, Any]) -> str | None:
    """Where a person plays this world's tasks from an HTTP MCP client (`mcpworld up`'s /play endpoint), else None."""
    url = mcpworld_meta(doc).get("play")
    return url if isinstance(url, str) and url else None


def local_stdio_args(doc: dict[str, Any]) -> list[str] | None:
    """The `mcpworld ...` arguments that start this mcpworld server over stdio on this machine, else None."""
    args = mcpworld_meta(doc).get("stdio")
    return [str(a) for a in args] if isinstance(args, list) and args else None


def local_record(name: str, description: str, kind: Kind, *, url: str | None = None,
                 stdio_args: list[str] | None = None, title: str | None = None, version: str = __version__,
                 facts: dict[str, Any] | None = None, play_url: str | None = None) -> dict[str, Any]:
    """A server.json for a server this installation runs: an HTTP remote, and how to start it over stdio here.

    No `packages`: mcpworld is not published on any package registry, so a package entry (`uvx mcpworld`) would
    name something no third party can install. The HTTP remote is what other machines use; the stdio launch
    (`mcpworld <stdio_args>`, for this machine's clients such as Claude Desktop) is kept under
    `_meta["io.mcpworld/server"]["stdio"]` and used by `export` and `connect(prefer="stdio")`. `play_url`: where
    a person plays a task from an HTTP client (`start_task`/`check_task`), under `["play"]`; never a remote, so
    no trainer or `connect()` reaches it.
    """
    doc: dict[str, Any] = {
        "$schema": SCHEMA_URL,
        "name": name if "/" in name else f"{NAMESPACE}/{name}",
        "description": description[:100],
        "version": version,
    }
    if title:
        doc["title"] = title[:100]
    if url:
        doc["remotes"] = [{"type": "streamable-http", "url": url}]
    meta: dict[str, Any] = {"kind": kind, **(facts or {})}
    if stdio_args:
        meta["stdio"] = list(stdio_args)
    if play_url:
        meta["play"] = play_url
    doc["_meta"] = {META_KEY: meta}
    return doc
