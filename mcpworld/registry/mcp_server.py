"""The registry as an MCP server, so an agent can find environments by itself."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

from mcpworld.registry.records import health_of, mcpworld_meta
from mcpworld.registry.store import NotFound, RegistryStore


def _summary(item: dict[str, Any]) -> dict[str, Any]:
    doc = item["server"]
    meta = mcpworld_meta(doc)
    return {
        "name": doc["name"], "title": doc.get("title"), "description": doc["description"],
        "kind": meta.get("kind", "external"), "tags": meta.get("tags", []), "tools": meta.get("tools"),
        "tasks": meta.get("tasks"), "health": health_of(item).get("status", "unknown"),
        "urls": [r["url"] for r in doc.get("remotes") or []],
    }


def registry_mcp_server(store: RegistryStore) -> MCPServer:
    # log_level: the SDK would otherwise install an INFO handler on the root logger of whatever process hosts us
    server = MCPServer("io.mcpworld/registry", title="mcpworld registry", log_level="WARNING",
                       instructions="Find MCP servers (worlds, SWE sandboxes, world models) to work in. Search, "
                                    "then connect to a server's URL.")

    @server.tool(annotations={"readOnlyHint": True})
    def search_servers(query: str = "", kind: str | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """Search registered servers by name, description or tag; filter by kind (world, swe, world-model,
        external). Returns name, kind, counts, health and URLs."""
        found, _ = store.list(search=query or None, kind=kind, version="latest", limit=max(1, min(limit, 100)))
        return [_summary(r) for r in found]

    @server.tool(annotations={"readOnlyHint": True})
    def get_server(name: str) -> dict[str, Any]:
        """The full server.json record of one server (latest version), e.g. 'io.mcpworld/airline'."""
        try:
            return store.get(name if "/" in name else f"io.mcpworld/{name}")
        except NotFound as exc:
            raise ValueError(f"{exc}; use search_servers to find names") from None

    @server.tool(annotations={"readOnlyHint": True})
    def list_kinds() -> dict[str, int]:
        """How many active servers of each kind the registry holds."""
        return store.kinds()

    return server
