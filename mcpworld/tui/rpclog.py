"""The JSON-RPC log of a connection, and the client wrapper that writes it.

`mcp.Client` exposes a hook for incoming messages only, so `LoggedClient` records each request the TUI makes
(method, params, result or error, latency) itself, in JSON-RPC 2.0 shapes.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import mcp_types as types

from mcpworld.core import protocol as p
from mcpworld.core.models import TaskInfo
from mcpworld.tui.errors import error_text

T = TypeVar("T")


def to_jsonable(value: Any) -> Any:
    """Pydantic results as the JSON the server sent (aliases, no unset fields); anything else as is."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    return value


# -- the log ---------------------------------------------------------------------------------------------

@dataclass
class RpcEntry:
    """One request and its response (or error) as seen by this client."""

    id: int
    method: str
    params: dict[str, Any]
    result: Any = None
    error: dict[str, Any] | None = None
    latency_ms: float = 0.0
    at: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        """The request/response pair in JSON-RPC 2.0 shapes, plus timing."""
        response: dict[str, Any] = {"jsonrpc": "2.0", "id": self.id}
        if self.error is not None:
            response["error"] = self.error
        else:
            response["result"] = self.result
        return {
            "time": datetime.fromtimestamp(self.at, timezone.utc).isoformat().replace("+00:00", "Z"),
            "latency_ms": self.latency_ms,
            "request": {"jsonrpc": "2.0", "id": self.id, "method": self.method, "params": self.params},
            "response": response,
        }

    @cached_property
    def haystack(self) -> str:
        """The entry as lower-case JSON, made once: entries do not change after they are logged."""
        return json.dumps(self.to_json(), default=str).lower()

    def matches(self, query: str) -> bool:
        """Every whitespace-separated word of `query` appears somewhere in the entry (case-insensitive)."""
        return all(w in self.haystack for w in query.lower().split())


class RpcLog:
    """The traffic of one connection; listeners hear about each entry as it lands (on the UI loop)."""

    def __init__(self) -> None:
        self.entries: list[RpcEntry] = []
        self.listeners: list[Callable[[RpcEntry], None]] = []
        self._ids = itertools.count(1)

    def next_id(self) -> int:
        return next(self._ids)

    def add(self, entry: RpcEntry) -> None:
        self.entries.append(entry)
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


# -- the logged client -----------------------------------------------------------------------------------

class LoggedClient:
    """The calls the TUI makes, each one recorded in `log`. Only ever used from the session's own task."""

    def __init__(self, client: Any, log: RpcLog, timeout_s: float | None = None):
        self.client = client
        self.log = log
        self.ctl = p.EpisodeControl(client, timeout_s)

    async def _logged(self, method: str, params: dict[str, Any], send: Callable[[], Awaitable[T]]) -> T:
        entry = RpcEntry(id=self.log.next_id(), method=method, params=params)
        began = time.perf_counter()
        try:
            result = await send()
        except Exception as exc:
            entry.latency_ms = round((time.perf_counter() - began) * 1000, 2)
            code = getattr(exc, "code", None)
            entry.error = {"code": code if isinstance(code, int) else -32603, "message": error_text(exc)}
            self.log.add(entry)
            raise
        entry.latency_ms = round((time.perf_counter() - began) * 1000, 2)
        entry.result = to_jsonable(result)
        self.log.add(entry)
        return result

    @staticmethod
    def _params(model: Any) -> dict[str, Any]:
        return model.model_dump(mode="json", by_alias=True, exclude_none=True)

    async def list_tools(self) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = {"cursor": cursor} if cursor else {}
            page = await self._logged("tools/list", params,
                                      lambda: self.client.list_tools(cursor=cursor, cache_mode="bypass"))
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def list_prompts(self) -> list[types.Prompt]:
        return (await self._logged("prompts/list", {},
                                   lambda: self.client.list_prompts(cache_mode="bypass"))).prompts

    async def list_resources(self) -> list[types.Resource]:
        return (await self._logged("resources/list", {},
                                   lambda: self.client.list_resources(cache_mode="bypass"))).resources

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        return await self._logged("resources/read", {"uri": uri}, lambda: self.client.read_resource(uri))

    async def call_tool(self, name: str, arguments: dict[str, Any], episode: str | None) -> types.CallToolResult:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if episode is None:
            return await self._logged("tools/call", params, lambda: self.client.call_tool(name, arguments))
        params["_meta"] = p.episode_meta(episode)
        return await self._logged("tools/call", params, lambda: self.ctl.call(episode, name, arguments))

    async def tasks(self) -> list[TaskInfo]:
        params = self._params(p.TasksParams())
        return (await self._logged(p.METHOD_TASKS, params, lambda: self.ctl.tasks())).tasks

    async def start(self, task: str | None, seed: int = 0) -> p.StartResult:
        params = self._params(p.StartParams(task=task, seed=seed))
        return await self._logged(p.METHOD_START, params, lambda: self.ctl.start(task, seed))

    async def verify(self, episode: str, answer: str | None) -> p.VerifyResult:
        params = self._params(p.VerifyParams(episode=episode, answer=answer))
        return await self._logged(p.METHOD_VERIFY, params, lambda: self.ctl.verify(episode, answer))

    async def state(self, episode: str, table: str | None = None, limit: int = 100) -> p.StateResult:
        params = self._params(p.StateParams(episode=episode, table=table, limit=limit))
        return await self._logged(p.METHOD_STATE, params, lambda: self.ctl.state(episode, table, limit))

    async def close(self, episode: str) -> p.CloseResult:
        params = self._params(p.EpisodeParams(episode=episode))
        return await self._logged(p.METHOD_CLOSE, params, lambda: self.ctl.close(episode))
