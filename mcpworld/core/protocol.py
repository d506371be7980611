"""The episode-control extension: its id, request methods, and their param/result shapes.

The control plane rides on MCP as an extension (SEP-2133) so that clients which do not know it see a
plain MCP server, while the agent and trainer can start, verify and close isolated episodes. Per-request
episode identity travels in `_meta` under `EPISODE_META_KEY`.
"""

from __future__ import annotations

import secrets
from typing import Any, Literal, Protocol

import anyio
import mcp_types as types

from mcpworld.core.models import TaskInfo, Verdict

EXTENSION_ID = "io.mcpworld/episode"
EPISODE_META_KEY = "io.mcpworld/episode"
ROLE_META_KEY = "io.mcpworld/role"  # "user": the call is the simulated user's, on their own tools (dual control)

METHOD_START = "io.mcpworld/episode/start"
METHOD_VERIFY = "io.mcpworld/episode/verify"
METHOD_CLOSE = "io.mcpworld/episode/close"
METHOD_TASKS = "io.mcpworld/episode/tasks"
METHOD_STATE = "io.mcpworld/episode/state"


class StartParams(types.RequestParams):
    task: str | None = None
    seed: int = 0


class StartResult(types.Result):
    episode: str
    task: str | None = None
    instruction: str = ""
    policy: str = ""  # the world's rules the agent must follow, even where a tool would allow an action
    expires_in_s: float
    environment: dict[str, str] = {}  # which build of the environment this is (name, version, digest, mcpworld)
    user: str | None = None  # a conversation: how its user is played (scripted, model, direct; worlds/users.py)


class EpisodeParams(types.RequestParams):
    episode: str


class VerifyParams(EpisodeParams):
    answer: str | None = None  # the agent's last words to the user: kept as evidence, judged by no check
    close: bool | None = None  # a world episode always ends once judged (one verdict); the SWE server ends its
    # episode when this is true
    token: str | None = None  # the registry token: with it, the verdict's checks keep their details


class VerifyResult(types.Result):
    episode: str
    task: str | None = None
    verdict: Verdict
    closed: bool = False
    sealed: bool = False  # the checks were reduced to pass/fail per group (no registry token was presented)


class CloseResult(types.Result):
    episode: str
    closed: bool


class TasksParams(types.RequestParams):
    split: str | None = None
    token: str | None = None  # the registry token: with it, tasks come with their reference solutions
    seed: int = 0  # the instructions (and references) as episodes of this seed see them


class TasksResult(types.Result):
    world: str
    tasks: list[TaskInfo]
    policy: str = ""  # the rules every task of this world is played under


class StateParams(EpisodeParams):
    table: str | None = None
    limit: int = 100


class StateResult(types.Result):
    episode: str
    tables: dict[str, int]
    rows: list[dict[str, Any]] = []
    diff: dict[str, Any] = {}


class StartRequest(types.Request[StartParams, Literal["io.mcpworld/episode/start"]]):
    method: Literal["io.mcpworld/episode/start"] = "io.mcpworld/episode/start"


class VerifyRequest(types.Request[VerifyParams, Literal["io.mcpworld/episode/verify"]]):
    method: Literal["io.mcpworld/episode/verify"] = "io.mcpworld/episode/verify"


class CloseRequest(types.Request[EpisodeParams, Literal["io.mcpworld/episode/close"]]):
    method: Literal["io.mcpworld/episode/close"] = "io.mcpworld/episode/close"


class TasksRequest(types.Request[TasksParams, Literal["io.mcpworld/episode/tasks"]]):
    method: Literal["io.mcpworld/episode/tasks"] = "io.mcpworld/episode/tasks"


class StateRequest(types.Request[StateParams, Literal["io.mcpworld/episode/state"]]):
    method: Literal["io.mcpworld/episode/state"] = "io.mcpworld/episode/state"


class ControlPlane(Protocol):
    """What a server implements to offer episodes: one handler per extension method (a result model, or the
    dict it dumps to, by alias)."""

    async def _start(self, ctx: Any, params: StartParams) -> StartResult | dict[str, Any]: ...
    async def _verify(self, ctx: Any, params: VerifyParams) -> VerifyResult | dict[str, Any]: ...
    async def _close(self, ctx: Any, params: EpisodeParams) -> CloseResult: ...
    async def _tasks(self, ctx: Any, params: TasksParams) -> TasksResult: ...
    async def _state(self, ctx: Any, params: StateParams) -> StateResult: ...


def add_control_plane(server: Any, plane: ControlPlane, settings: dict[str, Any]) -> None:
    """Register the extension's methods on a low-level MCP `Server` and advertise it with `settings`."""
    for method, params_type, handler in [
        (METHOD_START, StartParams, plane._start),
        (METHOD_VERIFY, VerifyParams, plane._verify),
        (METHOD_CLOSE, EpisodeParams, plane._close),
        (METHOD_TASKS, TasksParams, plane._tasks),
        (METHOD_STATE, StateParams, plane._state),
    ]:
        server.add_request_handler(method, params_type, handler)
    server.extensions[EXTENSION_ID] = settings


class Reveal:
    """Who may see reference solutions: only a caller presenting the server's secret (never a policy)."""

    def __init__(self, token: str | None = None):
        self._token = token

    def allows(self, given: str | None) -> bool:
        if not given:
            return False
        if self._token is None:
            from mcpworld.core.paths import registry_token

            self._token = registry_token(None)[0]
        return secrets.compare_digest(given.encode(), self._token.encode())


def episode_meta(episode: str) -> dict[str, Any]:
    """The `_meta` a client attaches to tools/call so the server routes it to `episode`."""
    return {EPISODE_META_KEY: episode}


class EpisodeControl:
    """Client side of the extension: start, play, verify and close episodes over any `mcp.Client`."""

    def __init__(self, client: Any, timeout_s: float | None = None):
        self.client = client
        self.timeout_s = timeout_s
        self._tools: list[types.Tool] | None = None
        self._listing = anyio.Lock()

    async def tools(self) -> list[types.Tool]:
        """The server's domain tools, listed once per connection (they do not change between episodes), however
        many callers ask at once."""
        async with self._listing:
            if self._tools is None:
                self._tools = (await self.client.list_tools()).tools
        return self._tools

    async def _send(self, request: Any, result_type: type[types.Result]) -> Any:
        return await self.client.session.send_request(request, result_type, self.timeout_s)

    async def start(self, task: str | None = None, seed: int = 0) -> StartResult:
        return await self._send(StartRequest(params=StartParams(task=task, seed=seed)), StartResult)

    async def verify(self, episode: str, answer: str | None = None, close: bool | None = None,
                     token: str | None = None) -> VerifyResult:
        """Judge the episode, which ends it on a world server (one verdict per episode); with the registry `token`
        (a harness's, never a policy's) the verdict comes with its details."""
        params = VerifyParams(episode=episode, answer=answer, close=close, token=token)
        return await self._send(VerifyRequest(params=params), VerifyResult)

    async def close(self, episode: str) -> CloseResult:
        return await self._send(CloseRequest(params=EpisodeParams(episode=episode)), CloseResult)

    async def tasks(self, split: str | None = None, token: str | None = None, seed: int = 0) -> TasksResult:
        """The server's tasks as episodes of `seed` see them; with the registry `token`, each also carries its
        reference (solution, answer)."""
        return await self._send(TasksRequest(params=TasksParams(split=split, token=token, seed=seed)), TasksResult)

    async def state(self, episode: str, table: str | None = None, limit: int = 100) -> StateResult:
        return await self._send(StateRequest(params=StateParams(episode=episode, table=table, limit=limit)),
                                StateResult)

    async def call(self, episode: str, name: str, arguments: dict[str, Any] | None = None,
                   role: str = "assistant") -> types.CallToolResult:
        """A tools/call routed to `episode`; `role` "user": the simulated user's call on their own tools."""
        meta = episode_meta(episode) | ({ROLE_META_KEY: "user"} if role == "user" else {})
        return await self.client.call_tool(name, arguments or {}, read_timeout_seconds=self.timeout_s, meta=meta)
