"""What the Servers screen shows: every latest record from a registry's /v0 API, flattened for a table.

Synchronous on purpose (`RegistryClient`): the screen calls it from a thread worker, so the event loop never
waits on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcpworld.registry.records import NAMESPACE, health_of, mcpworld_meta
from mcpworld.tui.errors import UserError


class RegistryError(UserError, ConnectionError):
    """The registry could not be listed; the message says what to do."""


@dataclass
class ServerEntry:
    """One registered server, as a row: the facts mcpworld keeps under `_meta`, and the record to connect with."""

    name: str
    title: str
    description: str
    version: str
    kind: str
    health: str
    health_error: str | None
    latency_ms: float | None
    tags: list[str]
    tools: int | None
    tasks: int | None
    status: str
    record: dict[str, Any] = field(repr=False)

    @property
    def short_name(self) -> str:
        return self.name.split("/", 1)[-1]

    def haystack(self) -> str:
        # the shared `io.mcpworld/` namespace is left out, or "world" would match every mcpworld server
        name = self.name.removeprefix(NAMESPACE + "/")
        return " ".join([name, self.title, self.description, self.kind, self.health, self.status,
                         *self.tags]).lower()

    def matches(self, query: str) -> bool:
        """Every word of `query` matches: `kind:`, `health:` and `tag:` words match that field exactly, other
        words appear somewhere in the name, title, description, kind, health or tags."""
        text = self.haystack()
        for word in query.lower().split():
            key, _, value = word.partition(":")
            if value and key == "kind":
                ok = self.kind.lower() == value
            elif value and key == "health":
                ok = self.health.lower() == value
            elif value and key == "tag":
                ok = value in (t.lower() for t in self.tags)
            else:
                ok = word in text
            if not ok:
                return False
        return True


def entry_from(item: dict[str, Any]) -> ServerEntry:
    doc = item.get("server", item)
    meta = mcpworld_meta(doc)
    health = health_of(item) if "server" in item else {}  # the registry's fact, in the response's `_meta`
    official = (item.get("_meta") or {}).get("io.modelcontextprotocol.registry/official") or {}
    return ServerEntry(
        name=doc.get("name", "?"), title=doc.get("title") or "", description=doc.get("description", ""),
        version=doc.get("version", ""), kind=meta.get("kind", "external"),
        health=health.get("status", "unknown"), health_error=health.get("error"),
        latency_ms=health.get("latency_ms"), tags=list(meta.get("tags") or []),
        tools=meta.get("tools"), tasks=meta.get("tasks"), status=official.get("status", "active"), record=doc,
    )


def fetch_servers(registry: str, timeout: float = 10.0, page_size: int = 100) -> list[ServerEntry]:
    """Every latest server in the registry, following `metadata.nextCursor` to the last page."""
    from mcpworld.registry.client import RegistryClient
    from mcpworld.registry.client import RegistryError as ClientError

    try:
        with RegistryClient(registry, timeout=timeout) as client:
            return [entry_from(item) for item in client.servers(page_size=page_size)]
    except ClientError as exc:
        raise RegistryError(str(exc)) from None
