"""The MCP server of one world: domain tools, tasks as prompts, tables as resources, episode control.

Built on the SDK's low-level `Server` so each tool call is a direct dispatch into the world runtime; the
control plane is the `io.mcpworld/episode` extension (methods in `mcpworld.core.protocol`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from mcpworld.core import protocol as p
from mcpworld.core.blocking import CallTimeout, blocking_timeout, call_blocking
from mcpworld.core.episode_server import (
    HANDLE_ARGUMENT,
    argument_size_error,
    connection_key,
    error_wire,
    result_text,
    text_result,
    value_result,
    value_wire,
    with_handle,
    with_handle_note,
)
from mcpworld.core.llm import LLMError
from mcpworld.core.models import Verdict
from mcpworld.core.streamable import WireHooks
from mcpworld.worlds.episodes import EpisodeError, EpisodeLimits, EpisodeManager, WorldUnavailable
from mcpworld.worlds.runtime import CallResult, Episode, UnknownTask, WorldRuntime
from mcpworld.worlds.submissions import task_note
from mcpworld.worlds.users import MESSAGE_USER, Act, UserModel, load_scripts, user_says

MAX_ARGUMENT_BYTES = 256 * 1024


def _param_keys(model: Any) -> frozenset[str]:
    """The params a control method's model takes, as the wire names them (anything else goes to the model)."""
    return frozenset(field.alias or name for name, field in model.model_fields.items())


_START_KEYS, _VERIFY_KEYS = _param_keys(p.StartParams), _param_keys(p.VerifyParams)

_INTERACTIVE_TOOLS = [
    types.Tool(
        name="start_task",
        description="Start playing one of this world's tasks (see the prompts list for their ids). Starts a fresh "
        "episode in the task's starting state and returns the instruction to follow and the episode's handle: "
        "pass that handle as `episode` to check_task and to every later tool call.",
        input_schema={
            "type": "object",
            "properties": {"task_id": {"type": "string"}, "seed": {"type": "integer", "default": 0},
                           "episode": {"type": ["string", "null"], "default": None,
                                       "description": "The handle of the episode you are replacing, if any"}},
            "required": ["task_id"],
            "additionalProperties": False,
        },
    ),
    types.Tool(
        name="check_task",
        description="Finish the task you started and learn whether it passed (pass or fail only). This ends the "
        "episode: each episode is judged once. Answer a question with submit_answer (or decline a forbidden "
        "request with decline) first. Pass the `episode` handle start_task returned.",
        input_schema={
            "type": "object",
            "properties": {"episode": {"type": ["string", "null"], "default": None,
                                       "description": "The handle start_task returned"}},
            "additionalProperties": False,
        },
    ),
]


_INTERACTIVE_NAMES = frozenset(t.name for t in _INTERACTIVE_TOOLS)


class NotJudged(RuntimeError):
    """The server failed the episode (its user simulator, its judge model): it has no verdict, and no reward."""


def _bad_params(message: str, data: Any = None) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=message, data=data)


class WorldServer:
    """Binds a WorldRuntime and its EpisodeManager to an MCP `Server`."""

    def __init__(self, runtime: WorldRuntime, limits: EpisodeLimits | None = None, interactive: bool = False,
                 token: str | None = None, user_model: UserModel | None = None):
        self.runtime = runtime
        if runtime.user_model is None:  # who plays conversational tasks' users: given, else MCPWORLD_USER_MODEL
            runtime.user_model = user_model or UserModel.from_env()
        script = os.environ.get("MCPWORLD_USER_SCRIPT")
        if script and not runtime.user_scripts:  # scripted users (a file, or a τ² results file) for their tasks
            runtime.user_scripts = load_scripts(script)
        self.reveal = p.Reveal(token)
        self.episodes = EpisodeManager(runtime, limits)
        self.interactive = interactive
        world = runtime.world
        self._policy = world.policy  # said on every start: written once (the rules are fixed once loaded)
        self._tools = [types.Tool.model_validate(d) for d in runtime.listed_tools]
        if interactive:  # for people and desktop clients only: a training server never lists them
            self._tools += _INTERACTIVE_TOOLS
        self._domain = {t.name for t in self._tools} - _INTERACTIVE_NAMES
        self._handle_tools = [t if t.name in _INTERACTIVE_NAMES else with_handle(t) for t in self._tools]
        schemas = {t.name: t.input_schema for t in self._tools}
        self.server: Server[Any] = Server(
            f"io.mcpworld/{world.name}",
            version=world.version,
            title=world.title,
            description=world.description[:100],
            instructions=f"{world.description}\n\nScenario: {world.scenario}\n\n" + (
                "Policy (follow it even where a tool would allow an action):\n" if world.rules else "") + self._policy,
            on_list_tools=self._list_tools,
            on_call_tool=self._route_call,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
            get_tool_input_schema=schemas.get,  # the transport checks Mcp-Param-* headers without a listing
        )
        p.add_control_plane(self.server, self, {"world": world.name, "tasks": len(runtime.tasks)})
        # what the HTTP transport answers without the SDK's models (a trainer's calls, start, verify)
        self.wire = WireHooks(call_tool=self._call_tool_wire,
                              methods={p.METHOD_START: self._start_wire, p.METHOD_VERIFY: self._verify_wire})

    # -- episode resolution ----------------------------------------------------------------------------

    def _episode(self, ctx: Any, meta: Any = None) -> Episode:
        """The episode a request acts on: its `_meta` id, else its connection's default episode.

        A sessionless request with neither has no episode of its own: `_route_call` mints one (and says its
        handle) before a tool call gets here; anything else is refused rather than shared.
        """
        meta = meta if meta is not None else ctx.meta
        episode_id = meta.get(p.EPISODE_META_KEY) if meta else None
        if episode_id is not None:
            return self.episodes.get(str(episode_id))
        key = connection_key(ctx)
        if key is None:
            raise EpisodeError(f"no episode: this request has no session, so pass the `{HANDLE_ARGUMENT}` handle "
                               "a tool call (or start_task) returned")
        return self.episodes.default(key)

    async def _route_call(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        """Resolve a tool call's episode before `_call_tool` runs it.

        Order: the extension's `_meta` id; the `episode` handle argument (SEP-2567; stripped before the tool
        sees its arguments); the connection's default episode; and, for a sessionless request with none of
        these, a fresh episode whose handle the result carries (text and `_meta`), so no two clients ever share.
        """
        arguments = params.arguments or {}
        interactive = self.interactive and params.name in _INTERACTIVE_NAMES
        handle = None
        if interactive:
            handle = arguments.get(HANDLE_ARGUMENT)  # part of these tools' own schemas
        elif HANDLE_ARGUMENT in arguments and params.name in self._domain and not self._declares_handle(params.name):
            arguments = dict(arguments)
            handle = arguments.pop(HANDLE_ARGUMENT)
        minted: Episode | None = None
        if (ctx.meta or {}).get(p.EPISODE_META_KEY) is None:
            meta = dict(ctx.meta or {})
            if handle is not None:
                meta[p.EPISODE_META_KEY] = str(handle)
            elif not interactive and connection_key(ctx) is None:
                if params.name not in self._domain:
                    return text_result(f"unknown tool {params.name!r}; available: {', '.join(sorted(self._domain))}",
                                        error=True)
                try:
                    minted = self.episodes.start(None, implicit=True)
                except EpisodeError as exc:
                    return text_result(str(exc), error=True)
                meta[p.EPISODE_META_KEY] = minted.id
            ctx = dataclasses.replace(ctx, meta=meta)
        if arguments is not params.arguments:
            params = params.model_copy(update={"arguments": arguments})
        result = await self._call_tool(ctx, params)
        if minted is not None and isinstance(result, types.CallToolResult):
            result = with_handle_note(result, minted.id)
        return result

    async def _call_tool_wire(self, name: str, arguments: dict[str, Any] | None,
                              meta: dict[str, Any] | None) -> dict[str, Any] | None:
        """A trainer's call (a domain tool on the episode its `_meta` names) answered in its wire shape, for the
        transport's fast path (`mcpworld.core.streamable`); None hands the request to `_route_call`, which answers
        everything declined here (handles, defaults, interactive tools, refusals) exactly as before.

        Why: building the params model, the request context, the result model and dumping it again was about a
        third of what a small call cost the server beyond the tool itself.
        """
        episode_id = meta.get(p.EPISODE_META_KEY) if meta else None
        if type(episode_id) is not str or name not in self._domain or p.ROLE_META_KEY in meta or (
                self.interactive and name in _INTERACTIVE_NAMES):
            return None
        arguments = arguments or {}
        if (HANDLE_ARGUMENT in arguments and not self._declares_handle(name)) or argument_size_error(
                arguments, MAX_ARGUMENT_BYTES) is not None:
            return None
        try:
            episode = self.episodes.get(episode_id)
        except EpisodeError:
            return None
        result = await self.run_tool(episode, name, arguments)
        return error_wire(result.error) if result.error is not None else value_wire(result.value, self._shown(name))

    def _shown(self, tool: str) -> Callable[[Any], str] | None:
        """How `tool`'s values are written, when it writes them its own way (`result_text`: an AWM import)."""
        return result_text(getattr(self.runtime.tools.get(tool), "fn", None))

    def _declares_handle(self, tool: str) -> bool:
        declared = self.__dict__.get("_handle_declared")
        if declared is None:  # once: a tool's schema is built by pydantic, far too slow to redo per call
            declared = self._handle_declared = {
                name for name, spec in self.runtime.tools.items()
                if HANDLE_ARGUMENT in ((spec.input_schema or {}).get("properties") or {})}
        return tool in declared

    # -- tools -----------------------------------------------------------------------------------------

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        # Only a sessionless client of an --interactive server (a person, or a model in a desktop client) is
        # shown the handle argument; sessions, streams and extension clients (trainers, the TUI) keep the
        # world's own schemas. The argument is accepted everywhere.
        sessionless = self.interactive and connection_key(ctx) is None
        return types.ListToolsResult(tools=self._handle_tools if sessionless else self._tools)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        refused = argument_size_error(arguments, MAX_ARGUMENT_BYTES)
        if refused is not None:
            return refused
        try:
            if self.interactive and params.name in _INTERACTIVE_NAMES:
                return await self._interactive(ctx, params.name, arguments)
            episode = self._episode(ctx)
        except EpisodeError as exc:
            return text_result(str(exc), error=True)
        role = (ctx.meta or {}).get(p.ROLE_META_KEY, "assistant")
        if role not in ("assistant", "user"):
            return text_result(f"_meta {p.ROLE_META_KEY} must be \"assistant\" or \"user\", not {role!r}", error=True)
        result = await self.run_tool(episode, params.name, arguments, role)
        if result.error is not None:
            return text_result(result.error, error=True)
        return value_result(result.value, self._shown(params.name))

    async def run_tool(self, episode: Episode, name: str, arguments: dict[str, Any],
                       role: str = "assistant") -> CallResult:
        """One tool call on `episode`, for every face of the world (MCP, NeMo Gym): a plain in-process tool right
        here; a proxied one (its code runs in a worker) off the event loop with its timeout, so other worlds keep
        serving; a timeout is the call's error, its changes discarded. `role` "user": the user's own tools."""
        conversation = episode.conversation
        if conversation is not None and conversation.ended is not None:
            return CallResult(error=f"the user ended the conversation ({conversation.ended}); this episode takes no "
                                    "more calls: end it (verify)")
        if episode.failed is not None:
            return CallResult(error=f"{episode.failed}; this episode is not judged (the server's failure, not yours)")
        if name == MESSAGE_USER and role == "assistant":
            return await self._message_user(episode, arguments)
        if role == "user":
            return self.runtime.call(episode, name, arguments, role)
        timeout = blocking_timeout(getattr(self.runtime.tools.get(name), "fn", None))  # per call: marks may change
        if timeout is None:
            return self.runtime.call(episode, name, arguments)
        try:
            with episode.serving():  # busy from now, not only once a thread picks the call up
                return await call_blocking(lambda: self.runtime.call(episode, name, arguments), timeout, key=episode)
        except CallTimeout as exc:
            return CallResult(error=f"tool {name!r} timed out: {exc}; its changes were discarded, and the episode "
                                    "is as it was before the call")

    async def _message_user(self, episode: Episode, arguments: dict[str, Any]) -> CallResult:
        """The agent's message to the user, and the user's reply (users.py). A failing user model fails the
        episode on the server's side: it is never judged, so never a reward."""
        conversation = episode.conversation
        if conversation is None:
            return CallResult(error=f"this task has no user to talk to: {MESSAGE_USER} is for conversations; do "
                                    "what the instruction asks")
        message = arguments.get("message")
        if set(arguments) != {"message"} or not isinstance(message, str) or not message.strip() or len(message) > 4000:
            return CallResult(error=f"{MESSAGE_USER} takes one argument, message: a non-empty string of at most 4000 "
                                    "characters")
        conversation.messages.append({"role": "assistant", "content": message})
        try:
            reply = await user_says(conversation, self.runtime.user_model, *self._users_hands(episode))
        except LLMError as exc:
            episode.failed = f"the user simulator failed: {exc}"
            return CallResult(error=f"{episode.failed} (the server's failure, not yours: this episode is not judged)")
        episode.calls += 1
        if episode.log is not None:  # a world that judges the calls (τ²) sees the conversation in its order
            episode.log.append((MESSAGE_USER, {"message": message}, CallResult(value={"user": reply})))
        if conversation.ended is not None:
            return CallResult(value={"user": reply, "ended": conversation.ended,
                                     "note": "the user ended the conversation: end the episode now"})
        return CallResult(value={"user": reply})

    def _users_hands(self, episode: Episode) -> tuple[Act | None, list[dict[str, Any]] | None]:
        """What the simulated user can do besides talking: call their own tools on `episode` (dual control), each
        result as its text; (None, None) in a world whose user has none."""
        if not self.runtime.user_tools:
            return None, None

        def act(name: str, arguments: dict[str, Any]) -> str:
            result = self.runtime.call(episode, name, arguments, "user")
            if result.error is not None:
                return result.error
            return result.value if isinstance(result.value, str) else json.dumps(result.value, ensure_ascii=False)
        return act, self.runtime.offered_user_tools

    async def _interactive(self, ctx: Any, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """`start_task` / `check_task`: a person's (or a model's) episode, named by the handle start_task returns.

        On a session or a stream the handle is optional (the connection's default episode is the one started);
        on a sessionless request it is how check_task and later calls find the episode.
        """
        key = connection_key(ctx)
        handle = (ctx.meta or {}).get(p.EPISODE_META_KEY)
        if name == "start_task":
            task_id = arguments.get("task_id")
            if not isinstance(task_id, str):
                return text_result("start_task needs task_id (a string); list the prompts to see task ids",
                                    error=True)
            seed = int(arguments.get("seed") or 0)
            try:
                if key is not None and (handle is None or handle == self.episodes.default_id(key)):
                    episode = self.episodes.replace_default(key, task_id, seed)
                else:
                    episode = self.episodes.start(task_id, seed, implicit=True)
                    if handle is not None:
                        self.episodes.close(str(handle))  # the episode this one replaces
            except UnknownTask as exc:
                return text_result(f"{exc}; known tasks: {', '.join(self.runtime.tasks)}", error=True)
            except EpisodeError as exc:
                return text_result(str(exc), error=True)
            try:
                instruction = await self._instruction(episode)
            except MCPError as exc:
                return text_result(exc.error.message, error=True)
            return value_result({"episode": episode.id, "task": task_id, "instruction": instruction,
                                 "note": f"pass \"{HANDLE_ARGUMENT}\": \"{episode.id}\" to check_task and to "
                                         "every tool call for this task"})
        try:
            if handle is not None:
                episode = self.episodes.get(str(handle))
            elif key is not None:
                episode = self.episodes.default(key)
            else:
                return text_result(f"check_task needs the `{HANDLE_ARGUMENT}` handle start_task returned "
                                    "(this connection has no session to remember it)", error=True)
        except EpisodeError as exc:
            return text_result(str(exc), error=True)
        if episode.task is None:
            return text_result("no task started: call start_task first", error=True)
        verdict = self.runtime.verify(episode, None)
        self.episodes.close(episode.id)  # judged once: the next check needs a new start_task
        return value_result({"task": episode.task.id, "passed": verdict.passed,
                             "note": "this episode is over; start_task starts a fresh one"})

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
            messages=[types.PromptMessage(role="user", content=types.TextContent(
                type="text", text=self.runtime.instruction(task)))],
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

    async def _list_resource_templates(self, ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[
            types.ResourceTemplate(uri_template=self._uri("tables", "{table}"), name="table",
                                   mime_type="application/json",
                                   description="Rows of a table in your current episode (first 100); add "
                                   f"?{HANDLE_ARGUMENT}=<handle> to read a given episode's"),
        ])

    async def _read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == self._uri("schema"):
            try:
                schema = self.runtime.schema_sql
            except Exception as exc:  # a seed that fails: the world's error, said as a start would say it
                error = self.runtime.template_error(None) or f"{type(exc).__name__}: {exc}"
                raise MCPError(code=types.INTERNAL_ERROR, message=f"world {self.runtime.world.name!r}: building "
                               f"its starting state failed: {error}") from None
            return types.ReadResourceResult(contents=[
                types.TextResourceContents(uri=uri, mime_type="application/sql", text=schema)
            ])
        if uri == self._uri("policy"):
            return types.ReadResourceResult(contents=[
                types.TextResourceContents(uri=uri, mime_type="text/markdown", text=self.runtime.world.policy)
            ])
        prefix = self._uri("tables", "")
        if uri.startswith(prefix):
            table, _, query = uri[len(prefix):].partition("?")
            handle = dict(part.partition("=")[::2] for part in query.split("&") if part).get(HANDLE_ARGUMENT)
            try:
                if handle:
                    rows = self.runtime.table_rows(self.episodes.get(handle), table)
                elif (ctx.meta or {}).get(p.EPISODE_META_KEY) is None and connection_key(ctx) is None:
                    # No episode of its own: show the world's starting state, from a throwaway episode.
                    scratch = self.episodes.start(None)
                    try:
                        rows = self.runtime.table_rows(scratch, table)
                    finally:
                        self.episodes.close(scratch.id)
                else:
                    rows = self.runtime.table_rows(self._episode(ctx), table)
            except (KeyError, EpisodeError) as exc:
                raise _bad_params(str(exc).strip('"'), {"uri": uri}) from None
            return types.ReadResourceResult(contents=[
                types.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(rows, default=str))
            ])
        raise _bad_params(f"unknown resource {uri!r}", {"uri": uri})  # SEP-2164: name the missing resource

    # -- control plane (extension methods) -------------------------------------------------------------

    def _lookup(self, episode_id: str) -> Episode:
        try:
            return self.episodes.get(episode_id)
        except EpisodeError as exc:
            raise _bad_params(str(exc)) from None

    async def _start(self, ctx: Any, params: p.StartParams) -> dict[str, Any]:
        return await self._begin(params.task, params.seed)

    async def _start_wire(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """`_start` for params its model would take as they are (the transport's `WireHooks.methods`); None sends the
        rest (a seed as a string, other keys) to the model, which also words the refusal of malformed ones."""
        task, seed = params.get("task"), params.get("seed", 0)
        if not params.keys() <= _START_KEYS or (task is not None and type(task) is not str) or type(seed) is not int:
            return None
        return await self._begin(task, seed)

    async def _begin(self, task: str | None, seed: int) -> dict[str, Any]:
        """A fresh episode of `task`: its `StartResult` as the wire carries it (by alias, no None), built without
        the model on both paths (tests/core/test_streamable.py holds them to the SDK's answers)."""
        if not self.runtime.has_template(task):  # a world's first episode: seed it off the event loop
            await anyio.to_thread.run_sync(self._build_template, task)
        try:
            episode = self.episodes.start(task, seed)
        except UnknownTask as exc:
            raise _bad_params(f"{exc}; list tasks with {p.METHOD_TASKS}") from None
        except WorldUnavailable as exc:  # the world's fault, not the request's
            raise MCPError(code=types.INTERNAL_ERROR, message=str(exc)) from None
        except EpisodeError as exc:
            raise MCPError(code=types.INVALID_REQUEST, message=str(exc)) from None
        instruction = await self._instruction(episode)
        started: dict[str, Any] = {"episode": episode.id, "task": task,
                                   "instruction": instruction,
                                   "policy": self._policy, "expiresInS": float(self.episodes.limits.ttl_s),
                                   "environment": self.runtime.environment}
        if task is None:
            del started["task"]
        if (mode := self.runtime.conversation_mode(episode.task)) is not None:
            started["user"] = mode
        return started

    async def _instruction(self, episode: Episode) -> str:
        """What a fresh episode's agent is told: the task's instruction, or in a conversation the user's first
        message (they answer τ²'s greeting). A user model that fails closes the episode: MCPError, never a reward."""
        if episode.task is None:
            return ""
        conversation = self.runtime.open_conversation(episode)
        if conversation is None:
            return self.runtime.instruction(episode.task, episode.seed)
        try:
            opening = await user_says(conversation, self.runtime.user_model, *self._users_hands(episode))
        except LLMError as exc:
            self.episodes.close(episode.id)
            raise MCPError(code=types.INTERNAL_ERROR, message=f"the user simulator failed: {exc}") from None
        note = task_note(episode.task)
        return f"{opening}\n\n(A user said this. Talk to them with {MESSAGE_USER}.)" + (f"\n\n{note}" if note else "")

    def _build_template(self, task_id: str | None) -> None:
        """Build the template `task_id` starts from; a failure is kept by the runtime and reported by the start."""
        task = self.runtime.tasks.get(task_id) if task_id is not None else None
        if task_id is None or task is not None:
            with contextlib.suppress(BaseException):  # SystemExit from a seed too: in a thread, kept, re-raised
                self.runtime.template(task)

    async def _verify(self, ctx: Any, params: p.VerifyParams) -> dict[str, Any]:
        return await self._judge(params.episode, params.answer, params.token)

    async def _verify_wire(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """`_verify` for params its model would take as they are (the transport's `WireHooks.methods`)."""
        episode, answer, close = params.get("episode"), params.get("answer"), params.get("close")
        token = params.get("token")
        if not params.keys() <= _VERIFY_KEYS or type(episode) is not str or type(close) not in (bool, type(None)) or (
                answer is not None and type(answer) is not str) or (token is not None and type(token) is not str):
            return None
        return await self._judge(episode, answer, token)

    async def verdict(self, episode: Episode, answer: str | None, in_thread: bool = False) -> Verdict:
        """The episode's verdict, for every face (MCP verify, NeMo Gym): the world's `prejudge` awaited first (a
        model's judgement), then the runtime's judging. NotJudged when the server failed the episode (its user
        simulator or judge model): the caller counts and names it, and never scores it. `in_thread`: judge off
        the event loop (NeMo Gym's verify, whose rollouts can be long)."""
        if episode.failed is None and self.runtime.world.prejudge is not None and episode.task is not None:
            try:
                await self.runtime.world.prejudge(self.runtime, episode, answer)
            except LLMError as exc:
                episode.failed = f"the judge model failed: {exc}"
        if episode.failed is not None:
            raise NotJudged(f"episode not judged: {episode.failed}")
        if in_thread:
            return await anyio.to_thread.run_sync(self.runtime.verify, episode, answer)
        return self.runtime.verify(episode, answer)

    async def _judge(self, episode_id: str, answer: str | None, token: str | None) -> dict[str, Any]:
        """An episode's one verdict, which ends it: its `VerifyResult` as the wire carries it, built without the
        model. Sealed (pass/fail per group, no details) unless the caller presents the registry token: the
        details name expected values, and verify must never be an answer oracle."""
        episode = self._lookup(episode_id)
        try:
            verdict = await self.verdict(episode, answer)
        except NotJudged as exc:  # the server's failure: counted and named by the caller, never scored
            self.episodes.close(episode.id)
            raise MCPError(code=types.INTERNAL_ERROR, message=str(exc)) from None
        except UnknownTask as exc:
            raise _bad_params(f"cannot verify: {exc}") from None
        closed = self.episodes.close(episode.id)
        sealed = not self.reveal.allows(token)
        if sealed:
            verdict = verdict.sealed()
        judged: dict[str, Any] = {"episode": episode.id, "task": episode.task.id if episode.task else None,
                                  "verdict": verdict.model_dump(by_alias=True, mode="json", exclude_none=True),
                                  "closed": closed, "sealed": sealed}
        if judged["task"] is None:
            del judged["task"]
        return judged

    async def _close(self, ctx: Any, params: p.EpisodeParams) -> p.CloseResult:
        return p.CloseResult(episode=params.episode, closed=self.episodes.close(params.episode))

    async def _tasks(self, ctx: Any, params: p.TasksParams) -> p.TasksResult:
        reveal = self.reveal.allows(params.token)
        tasks = [self.runtime.task_info(t, reveal, params.seed) for t in self.runtime.tasks.values()
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
