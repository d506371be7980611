"""Client configuration files for the registered servers: Claude Desktop, Claude Code, VS Code, Cursor."""

from __future__ import annotations

from typing import Any, Literal

from mcpworld.registry.connect import stdio_params

Format = Literal["claude-desktop", "claude-code", "vscode", "cursor"]
FORMATS: dict[str, str] = {
    "claude-desktop": "claude_desktop_config.json",
    "claude-code": ".mcp.json",
    "vscode": ".vscode/mcp.json",
    "cursor": ".cursor/mcp.json",
}


def _key(name: str) -> str:
    return name.split("/", 1)[-1]


def _stdio(doc: dict[str, Any]) -> dict[str, Any] | None:
    for package in doc.get("packages") or []:
        if (package.get("transport") or {}).get("type") == "stdio":
            params = stdio_params(package)
            return {"command": params.command, "args": list(params.args)}
    return None


def _url(doc: dict[str, Any]) -> str | None:
    remotes = [r for r in doc.get("remotes") or [] if r.get("type") == "streamable-http"]
    return remotes[0]["url"] if remotes else None


def entry(doc: dict[str, Any], fmt: Format) -> dict[str, Any]:
    """One server's entry in `fmt`. Claude Desktop launches stdio; the others prefer the HTTP URL."""
    stdio, url = _stdio(doc), _url(doc)
    if fmt == "claude-desktop":
        if stdio:
            return stdio
        return {"command": "npx", "args": ["-y", "mcp-remote", url]}
    if url:
        return {"type": "http", "url": url} if fmt in ("claude-code", "vscode") else {"url": url}
    if stdio is None:
        raise ValueError(f"{doc['name']} has neither an HTTP remote nor a stdio package")
    return {"type": "stdio", **stdio} if fmt in ("claude-code", "vscode") else stdio


def export(docs: list[dict[str, Any]], fmt: Format) -> dict[str, Any]:
    """The whole config file for `docs` in `fmt`."""
    entries = {_key(d["name"]): entry(d, fmt) for d in docs}
    if fmt == "vscode":
        return {"servers": entries, "inputs": []}
    return {"mcpServers": entries}
