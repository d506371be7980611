"""The MCP server of one world: domain tools, tasks as prompts, tables as resources, episode control.

Built on the SDK's low-level `Server` so each tool call is a direct dispatch into the world runtime; the
control plane is the `io.mcpworld/episode` extension (methods in `mcpworld.core.protocol`).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from mcpworld.core import protocol as p
from mcpworld.worlds.episodes import EpisodeError, EpisodeLimits, EpisodeManager
from mcpworld.worlds.runtime import Episode, UnknownTask, WorldRuntime

MAX_ARGUMENT_BYTES = 256 * 1024

_INTERACTIVE_TOOLS = [
    types.Tool(
        name="start_task",
        description="Start playing one of this world's tasks (see the prompts list for their ids). Resets your "
        "episode to the task's starting state and returns the instruction to follow.",
        input_schema={
            "type": "object",
            "properties": {"task_id": {"type": "string"}, "seed": {"type": "integer", "default": 0}},
            "required": ["task_id"],
            "additionalProperties": False,
        },
    ),
    types.Tool(
        name="check_task",
        description="Check the task you started: returns the verifier's verdict, its checks and the state diff. "
        "Pass your final answer to the user when the task asked a question.",
        input_schema={
            "type": "object",
            "properties": {"answer": {"type": ["string", "null"], "default": None}},
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
]


def connection_key(ctx: Any) -> str:
    """Which default episode a plain client gets: its HTTP session when it has one, else the process's."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    session_id = headers.get("mcp-session-id") if headers is not None else None
    return f"session:{session_id}" if session_id else "default"


def _text_result(value: Any, *, error: bool = False) -> types.CallToolResult:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    structured = None if error else (value if isinstance(value, dict) else {"result": value})
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured, is_error=error
    )


def _bad_params(message: str) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=message)


class WorldServer:
    """Binds a WorldRuntime and its EpisodeManager to an MCP `Server`."""

    def __init__(self, runtime: WorldRuntime, limits: EpisodeLimits | None = None, interactive: bool = False,
                 token: str | None = None):
        self.runtime = runtime
        self.reveal = p.Reveal(token)
        self.episodes = EpisodeManager(runtime, limits)
        self.interactive = interactive
        world = runtime.world
        self.server: Server[Any] = Server(
            f"io.mcpworld/{world.name}",
            version=world.version,
            title=world.title,
            description=world.description[:100],
            instructions=f"{world.description}\n\nScenario: {world.scenario}" + (
                f"\n\nPolicy (follow it even where a tool would allow an action):\n{world.policy}"
                if world.rules else ""),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
        )
        p.add_control_plane(self.server, self, {"world": world.name, "tasks": len(runtime.tasks)})
        self._tools = [spec.mcp_tool() for spec in runtime.tools.values()]
        if interactive:
            self._tools += _INTERACTIVE_TOOLS

    # -- episode resolution ----------------------------------------------------------------------------

    def _episode(self, ctx: Any, meta: Any = None) -> Episode:
        meta = meta if meta is not None else ctx.meta
        episode_id = meta.get(p.EPISODE_META_KEY) if meta else None
        if episode_id is not None:
            return self.episodes.get(str(episode_id))
        return self.episodes.default(connection_key(ctx))

    # -- tools -----------------------------------------------------------------------------------------

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self._tools)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        size = len(json.dumps(arguments, default=str))
        if size > MAX_ARGUMENT_BYTES:
            return _text_result(
                f"arguments too large: {size} bytes (max {MAX_ARGUMENT_BYTES}); send less text", error=True
            )
        try:
            if self.interactive and params.name in ("start_task", "check_task"):
                return self._interactive(ctx, params.name, arguments)
            episode = self._episode(ctx)
        except EpisodeError as exc:
            return _text_result(str(exc), error=True)
        result = self.runtime.call(episode, params.name, arguments)
        if result.error is not None:
            return _text_result(result.error, error=True)
        return _text_result(result.value)

    def _interactive(self, ctx: Any, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        key = connection_key(ctx)
        if name == "start_task":
            task_id = arguments.get("task_id")
            if not isinstance(task_id, str):
                return _text_result("start_task needs task_id (a string); list the prompts to see task ids",
                                    error=True)
            try:
                episode = self.episodes.replace_default(key, task_id, int(arguments.get("seed") or 0))
            except UnknownTask as exc:
                return _text_result(f"{exc}; known tasks: {', '.join(self.runtime.tasks)}", error=True)
            return _text_result({"task": task_id, "instruction": episode.task.instruction})  # type: ignore[union-attr]
        episode = self.episodes.default(key)
        if episode.task is None:
            return _text_result("no task started: call start_task first", error=True)
        verdict = self.runtime.verify(episode, arguments.get("answer"))
        return _text_result(verdict.model_dump())

    # -- prompts and resources -------------------------------------------------------------------------

    async def _list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[
            types.Prompt(name=t.id, title=t.id, description=t.instruction.splitlines()[0][:200])
            for t in self.runtime.tasks.values()
        ])

    async def _get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        task = self.runtime.tasks.get(params.name)
        if task is None:
            raise _bad_params(f"unknown task {params.name!r}")
        return types.GetPromptResult(
            description=f"{self.runtime.world.title}: task {task.id} ({task.difficulty})",
            messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=task.instruction))],
        )

    def _uri(self, *parts: str) -> str:
        return "/".join([f"world://{self.runtime.world.name}", *parts])

    async def _list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        resources = [types.Resource(uri=self._uri("schema"), name="schema", mime_type="application/sql",
                                    description="The world's tables as SQL DDL"),
                     types.Resource(uri=self._uri("policy"), name="policy", mime_type="text/markdown",
                                    description="The rules an agent must follow in this world")]
        resources += [
            types.Resource(uri=self._uri("tables", t), name=t, mime_type="application/json",
                           description=f"Rows of {t} in your current episode (first 100)")
            for t in self.runtime.table_names
        ]
        return types.ListResourcesResult(resources=resources)

    async def _read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == self._uri("schema"):
            return types.ReadResourceResult(contents=[
                types.TextResourceContents(uri=uri, mime_type="application/sql", text=self.runtime.schema_sql)
            ])
        if uri == self._uri("policy"):
            return types.ReadResourceResult(contents=[
                types.TextResourceContents(uri=uri, mime_type="text/markdown", text=self.runtime.world.policy)
            ])
        prefix = self._uri("tables", "")
        if uri.startswith(prefix):
            try:
                rows = self.runtime.table_rows(self._episode(ctx), uri[len(prefix):])
            except (KeyError, EpisodeError) as exc:
                raise _bad_params(str(exc).strip('"')) from None
            return types.ReadResourceResult(contents=[
                types.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(rows, default=str))
            ])
        raise _bad_params(f"unknown resource {uri!r}")

    # -- control plane (extension methods) -------------------------------------------------------------

    def _lookup(self, episode_id: str) -> Episode:
        try:
            return self.episodes.get(episode_id)
        except EpisodeError as exc:
            raise _bad_params(str(exc)) from None

    async def _start(self, ctx: Any, params: p.StartParams) -> p.StartResult:
        try:
            episode = self.episodes.start(params.task, params.seed)
        except UnknownTask as exc:
            raise _bad_params(f"{exc}; list tasks with {p.METHOD_TASKS}") from None
        except EpisodeError as exc:
            raise MCPError(code=types.INVALID_REQUEST, message=str(exc)) from None
        return p.StartResult(
            episode=episode.id, task=params.task,
            instruction=episode.task.instruction if episode.task else "",
            policy=self.runtime.world.policy, expires_in_s=self.episodes.limits.ttl_s,
        )

    async def _verify(self, ctx: Any, params: p.VerifyParams) -> p.VerifyResult:
        episode = self._lookup(params.episode)
        try:
            verdict = self.runtime.verify(episode, params.answer)
        except UnknownTask as exc:
            raise _bad_params(f"cannot verify: {exc}") from None
        closed = self.episodes.close(episode.id) if params.close else False
        return p.VerifyResult(episode=episode.id, task=episode.task.id if episode.task else None, verdict=verdict,
                              closed=closed)

    async def _close(self, ctx: Any, params: p.EpisodeParams) -> p.CloseResult:
        return p.CloseResult(episode=params.episode, closed=self.episodes.close(params.episode))

    async def _tasks(self, ctx: Any, params: p.TasksParams) -> p.TasksResult:
        reveal = self.reveal.allows(params.token)
        tasks = [self.runtime.task_info(t, reveal) for t in self.runtime.tasks.values()
                 if params.split is None or t.split == params.split]
        return p.TasksResult(world=self.runtime.world.name, tasks=tasks, policy=self.runtime.world.policy)

    async def _state(self, ctx: Any, params: p.StateParams) -> p.StateResult:
        episode = self._lookup(params.episode)
        rows: list[dict[str, Any]] = []
        if params.table is not None:
            try:
                rows = self.runtime.table_rows(episode, params.table, params.limit)
            except KeyError as exc:
                raise _bad_params(str(exc).strip('"')) from None
        return p.StateResult(episode=episode.id, tables=self.runtime.table_counts(episode), rows=rows,
                             diff=self.runtime.diff(episode).summary())
