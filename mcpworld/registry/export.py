"""Client configuration files for the registered servers: Claude Desktop, Claude Code, VS Code, Cursor, and MCP
Inspector's `--config` file.

Faithful to each client: every server gets its own entry (short names, qualified where two would collide);
packages launch pinned (`npx -y pkg@version`, `uvx pkg@version`, `docker run -i --rm image:version`); mcpworld's
own worlds launch over stdio on this machine with `--interactive` where a person plays (Claude Desktop).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from typing import Any, Literal

from mcpworld.core.paths import home
from mcpworld.registry.records import launch_problems, local_stdio_args, play_url, record_kind

Format = Literal["claude-desktop", "claude-code", "vscode", "cursor", "inspector"]
FORMATS: dict[str, str] = {
    "claude-desktop": "claude_desktop_config.json",
    "claude-code": ".mcp.json",
    "vscode": ".vscode/mcp.json",
    "cursor": ".cursor/mcp.json",
    "inspector": "mcp-inspector.json",
}
MCP_REMOTE = "mcp-remote@0.15.1"  # the stdio-to-HTTP bridge Claude Desktop needs for a remote-only server
_RUNTIME = {"npm": "npx", "pypi": "uvx", "oci": "docker", "nuget": "dnx"}


def entry_names(docs: list[dict[str, Any]]) -> list[str]:
    """One config key per record: the short name (`airline`), or the whole name made key-safe
    (`io-example-weather`) where two records' short names are the same. No dots: clients build tool names from
    the key (`mcp__<key>__<tool>`), and VS Code reads a dotted key as a path."""
    shorts = [d["name"].split("/", 1)[-1] for d in docs]
    taken = Counter(shorts)
    return [short if taken[short] == 1 else re.sub(r"[^A-Za-z0-9_-]+", "-", d["name"])
            for d, short in zip(docs, shorts)]


def read_config(text: str) -> tuple[Any, bool]:
    """A client's config file as data, and whether it held comments: VS Code's mcp.json is JSON with comments
    (`//`, `/* */`) and trailing commas, which a JSON parser refuses. Raises ValueError on anything else."""
    out: list[str] = []
    i, n, had_comments = 0, len(text), False
    while i < n:
        c = text[i]
        if c == '"':  # a string, escapes and all, copied as it is
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            had_comments = True
            i = text.find("\n", i) if "\n" in text[i:] else n
        elif text.startswith("/*", i):
            had_comments = True
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError("a /* comment is never closed")
            i = end + 2
        else:
            out.append(c)
            i += 1
    cleaned = re.sub(r",(\s*[}\]])", r"\1", "".join(out))  # strings are whole tokens, so a comma before } is JSON's
    return json.loads(cleaned), had_comments


def _argument(arg: dict[str, Any]) -> list[str]:
    value = arg.get("value") or arg.get("default")
    if arg.get("type") == "named":
        return [arg["name"], value] if value else [arg["name"]]
    return [value or f"<{arg.get('valueHint') or 'value'}>"]


def package_command(package: dict[str, Any]) -> dict[str, Any]:
    """{command, args[, env]} that starts a stdio package pinned to its version, as a person would type it."""
    problems = launch_problems({"packages": [package]})
    if problems:
        raise ValueError("; ".join(f"{e['path']}: {e['message']}" for e in problems))
    kind, ident, version = package.get("registryType", ""), package["identifier"], package.get("version")
    command = package.get("runtimeHint") or _RUNTIME.get(kind)
    if command is None:
        raise ValueError(f"no runtime known for registryType {kind!r} (set runtimeHint)")
    runtime_args = [a for arg in package.get("runtimeArguments") or [] for a in _argument(arg)]
    if kind == "oci":
        pinned = f"{ident}:{version}" if version and ":" not in ident.rsplit("/", 1)[-1] else ident
        runtime_args = runtime_args or ["run", "-i", "--rm"]
    else:
        pinned = f"{ident}@{version}" if version else ident
        if command == "npx" and "-y" not in runtime_args and "--yes" not in runtime_args:
            runtime_args = ["-y", *runtime_args]  # never stop at npx's install prompt: a client has no terminal
    args = [*runtime_args, pinned, *(a for arg in package.get("packageArguments") or [] for a in _argument(arg))]
    out: dict[str, Any] = {"command": command, "args": args}
    env = {v["name"]: v.get("value") or v.get("default") or "" for v in package.get("environmentVariables") or []
           if isinstance(v, dict) and v.get("name")}
    if env:
        out["env"] = env
    return out


def _stdio(doc: dict[str, Any], interactive: bool) -> dict[str, Any] | None:
    local = local_stdio_args(doc)
    if local:  # one of mcpworld's own servers, started by this machine's interpreter
        if interactive and record_kind(doc) == "world" and "--interactive" not in local:
            local = [*local, "--interactive"]
        # a client starts it with its own environment: say where this machine's worlds and registry live
        return {"command": sys.executable, "args": ["-m", "mcpworld", *local], "env": {"MCPWORLD_HOME": str(home())}}
    for package in doc.get("packages") or []:
        if (package.get("transport") or {}).get("type") == "stdio":
            return package_command(package)
    return None


def _url(doc: dict[str, Any], person: bool) -> str | None:
    """The HTTP URL an entry names: for a person's client a world's play endpoint (tasks can be started and
    checked there), else its first Streamable HTTP remote."""
    if person and play_url(doc):
        return play_url(doc)
    remotes = [r for r in doc.get("remotes") or [] if r.get("type") == "streamable-http"]
    return remotes[0]["url"] if remotes else None


def entry(doc: dict[str, Any], fmt: Format) -> dict[str, Any]:
    """One server's entry in `fmt`. Claude Desktop launches stdio (a person plays: worlds get --interactive), and so
    does MCP Inspector where it can (it shows the training surface); Claude Code, VS Code and Cursor prefer the
    HTTP URL, a world's play endpoint where `up` serves one (a person plays there too)."""
    stdio, url = _stdio(doc, interactive=fmt == "claude-desktop"), _url(doc, person=fmt != "inspector")
    if fmt == "inspector" and stdio:  # Inspector 0.15's --config starts stdio entries only; 2.x reads both
        return {"type": "stdio", **stdio}
    if fmt == "claude-desktop":
        if stdio:
            return stdio
        if url is None:
            raise ValueError(f"{doc['name']} has neither an HTTP remote nor a stdio launch")
        return {"command": "npx", "args": ["-y", MCP_REMOTE, url]}
    if url:
        return {"type": {"claude-code": "http", "vscode": "http", "inspector": "streamable-http"}[fmt], "url": url} \
            if fmt != "cursor" else {"url": url}
    if stdio is None:
        raise ValueError(f"{doc['name']} has neither an HTTP remote nor a stdio launch")
    return {"type": "stdio", **stdio} if fmt in ("claude-code", "vscode", "inspector") else stdio


def export(docs: list[dict[str, Any]], fmt: Format) -> dict[str, Any]:
    """The whole config file for `docs` in `fmt`: exactly one entry per record."""
    entries = {key: entry(d, fmt) for key, d in zip(entry_names(docs), docs)}
    if fmt == "vscode":
        return {"servers": entries, "inputs": []}
    return {"mcpServers": entries}
