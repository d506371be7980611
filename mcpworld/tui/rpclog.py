"""The JSON-RPC log of a connection, written from the wire (`mcpworld.tui.wire.tap`).

Each request is paired with its response by JSON-RPC id and direction; notifications (either way) and
transport errors are entries of their own. What the log holds is what the transport sent and received.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mcp.shared.message import SessionMessage

from mcpworld.tui.wire import Direction, message_json


def mcp_json(value: Any) -> Any:
    """An MCP result (a pydantic model) as the JSON the server sent: aliases, no unset fields."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, list | tuple):
        return [mcp_json(v) for v in value]
    if isinstance(value, dict):
        return {k: mcp_json(v) for k, v in value.items()}
    return value


@dataclass
class RpcEntry:
    """One request and its response (or a notification, or a transport error) as they crossed the wire."""

    seq: int
    direction: Direction
    message: dict[str, Any]
    response: dict[str, Any] | None = None
    latency_ms: float | None = None
    at: float = field(default_factory=time.time)
    _haystack: str | None = field(default=None, repr=False)

    @property
    def method(self) -> str:
        if "transportError" in self.message:
            return "transport error"
        return str(self.message.get("method", "?"))

    @property
    def rpc_id(self) -> Any:
        return self.message.get("id")

    @property
    def params(self) -> dict[str, Any]:
        return self.message.get("params") or {}

    @property
    def is_request(self) -> bool:
        return "id" in self.message and "method" in self.message

    @property
    def pending(self) -> bool:
        return self.is_request and self.response is None

    @property
    def result(self) -> Any:
        return (self.response or {}).get("result")

    @property
    def error(self) -> dict[str, Any] | None:
        return (self.response or {}).get("error")

    @property
    def ok(self) -> bool:
        return self.error is None and "transportError" not in self.message

    def to_json(self) -> dict[str, Any]:
        """The message (and its response) exactly as on the wire, plus direction and timing."""
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(self.at, timezone.utc).isoformat().replace("+00:00", "Z"),
            "direction": self.direction,
        }
        if self.is_request:
            out["latency_ms"] = self.latency_ms
            out["request"] = self.message
            out["response"] = self.response
        else:
            out["message"] = self.message
        return out

    @property
    def haystack(self) -> str:
        """The entry as lower-case JSON, made once it is complete (a pending request gains its response)."""
        if self._haystack is not None:
            return self._haystack
        text = json.dumps(self.to_json(), default=str).lower()
        if not self.pending:
            self._haystack = text
        return text

    def matches(self, query: str) -> bool:
        """Every whitespace-separated word of `query` appears somewhere in the entry (case-insensitive)."""
        return all(w in self.haystack for w in query.lower().split())


class RpcLog:
    """The traffic of one connection; listeners hear about each new or completed entry (on the UI loop)."""

    def __init__(self) -> None:
        self.entries: list[RpcEntry] = []
        self.listeners: list[Callable[[RpcEntry], None]] = []
        self._seq = itertools.count(1)
        self._pending: dict[tuple[Direction, Any], tuple[RpcEntry, float]] = {}

    def record(self, direction: Direction, item: SessionMessage | Exception) -> None:
        """The wire hook: a response completes the request it answers; anything else is a new entry."""
        message = message_json(item)
        is_response = "id" in message and "method" not in message and ("result" in message or "error" in message)
        if is_response:
            asked_by: Direction = "received" if direction == "sent" else "sent"
            found = self._pending.pop((asked_by, message["id"]), None)
            if found is not None:
                entry, began = found
                entry.response, entry.latency_ms = message, round((time.perf_counter() - began) * 1000, 2)
                self._notify(entry)
                return
        entry = RpcEntry(seq=next(self._seq), direction=direction, message=message)
        if entry.is_request:
            self._pending[(direction, entry.rpc_id)] = (entry, time.perf_counter())
        self.entries.append(entry)
        self._notify(entry)

    def _notify(self, entry: RpcEntry) -> None:
        for listener in list(self.listeners):
            listener(entry)

    def search(self, query: str) -> list[RpcEntry]:
        return [e for e in self.entries if e.matches(query)]

    def to_json(self, entries: list[RpcEntry] | None = None) -> list[dict[str, Any]]:
        return [e.to_json() for e in (self.entries if entries is None else entries)]

    def dumps(self, entries: list[RpcEntry] | None = None) -> str:
        return json.dumps(self.to_json(entries), indent=2, default=str)

    def save(self, path: Path, entries: list[RpcEntry] | None = None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.dumps(entries) + "\n")
        return path
