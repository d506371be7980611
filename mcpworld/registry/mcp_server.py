"""The registry as an MCP server, so an agent can find environments by itself.

A low-level `Server` with typed tools (`mcpworld.core.tools`) on the episode kernel's `ToolBox`, served over the
same Streamable HTTP endpoint as every other mcpworld server (`mcpworld.core.episode_server.mount`).
"""

from __future__ import annotations

from typing import Annotated, Any

import mcp_types as types
from mcp.server.lowlevel.server import Server
from pydantic import Field

from mcpworld import __version__
from mcpworld.core.episode_server import ToolBox, no_resources
from mcpworld.core.tools import tool
from mcpworld.registry.records import health_of, mcpworld_meta
from mcpworld.registry.store import NotFound, RegistryStore

MAX_ARGUMENT_BYTES = 64 * 1024  # a search query or a name; nothing legitimate comes near this


def _summary(item: dict[str, Any]) -> dict[str, Any]:
    doc = item["server"]
    meta = mcpworld_meta(doc)
    return {
        "name": doc["name"], "title": doc.get("title"), "description": doc["description"],
        "kind": meta.get("kind", "external"), "tags": meta.get("tags", []), "tools": meta.get("tools"),
        "tasks": meta.get("tasks"), "health": health_of(item).get("status", "unknown"),
        "urls": [r["url"] for r in doc.get("remotes") or []],
    }


class UnknownServer(LookupError):
    def __str__(self) -> str:
        return str(self.args[0])


@tool
def search_servers(store: RegistryStore, query: str = "", kind: str | None = None,
                   limit: Annotated[int, Field(ge=1, le=100)] = 20) -> list[dict[str, Any]]:
    """Search registered servers by name, description or tag; filter by kind (world, swe, world-model,
    external). Returns name, kind, counts, health and URLs."""
    found, _ = store.list(search=query or None, kind=kind, version="latest", limit=limit)
    return [_summary(r) for r in found]


@tool
def get_server(store: RegistryStore, name: str) -> dict[str, Any]:
    """The full server.json record of one server (latest version), e.g. 'io.mcpworld/airline'."""
    try:
        return store.get(name if "/" in name else f"io.mcpworld/{name}")
    except NotFound as exc:
        raise UnknownServer(f"{exc}; use search_servers to find names") from None


@tool
def list_kinds(store: RegistryStore) -> dict[str, int]:
    """How many active servers of each kind the registry holds."""
    return store.kinds()


TOOLBOX = ToolBox([search_servers, get_server, list_kinds], max_argument_bytes=MAX_ARGUMENT_BYTES,
                  expected=(UnknownServer,))


def registry_mcp_server(store: RegistryStore) -> Server[Any]:
    """The registry's read-only MCP server over `store` (mount it with `mcpworld.core.episode_server.mount`)."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLBOX.tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        call = TOOLBOX.prepare(params)
        return call if isinstance(call, types.CallToolResult) else await TOOLBOX.run(call, store)

    return Server("io.mcpworld/registry", version=__version__, title="mcpworld registry",
                  instructions="Find MCP servers (worlds, SWE sandboxes, world models) to work in. Search, then "
                               "connect to a server's URL.",
                  on_list_tools=list_tools, on_call_tool=call_tool, get_tool_input_schema=TOOLBOX.input_schema,
                  **no_resources())
