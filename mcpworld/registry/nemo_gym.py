"""Every installed world as a NeMo Gym resources server: `POST /seed_session`, `POST /<tool>`, `POST /verify`.

NeMo RL trains through NeMo Gym, whose agents drive an environment over three kinds of routes on a "resources
server". This is that server for mcpworld's worlds, with NeMo Gym 0.4.0's wire format (`nemo_gym/
base_resources_server.py`, `nemo_gym/server_utils.py`, `responses_api_agents/simple_agent/app.py`):

- the rollout's state is keyed by a session cookie: Starlette's `SessionMiddleware` (a signed JSON dict) named
  `<server class>___<server name>`, with `session_id` assigned on every request so that every response sends
  `Set-Cookie` again (NeMo Gym's simple agent replaces its cookies with each response's);
- `/seed_session` gets the dataset row (`responses_create_params` plus the row's own fields: here `world`, `task`,
  `seed`, top level or in `verifier_metadata`) and starts that task's episode;
- `/<tool>` gets the model's function-call arguments as its JSON body; the response body is what the model reads;
- `/verify` gets the row plus `response` (the Responses API response of the whole rollout) and returns the
  request with `reward` added; `/aggregate_metrics` summarizes verify responses.

Episodes live in each world's own `EpisodeManager` (the kernel's `EpisodeTable`: the cap, the idle TTL); the
cookie holds only the episode's id. The reward is the one table (`Termination.reward`, docs/training.md
"Rewards"): the ending is read off the response, the verifier judges the episode's state and final answer.
A server over worlds and the core's reward table, beside the registry's own servers; no trainer code.
"""

from __future__ import annotations

import json
import logging
import secrets
import statistics
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcpworld.core.episode_server import endpoint_app, unexpected_error
from mcpworld.core.security import Exposure
from mcpworld.core.streamable import BODY_DEADLINE_S, BodyTimeout, BodyTooLarge, ClientGone, read_body
from mcpworld.core.termination import Termination
from mcpworld.core.tools import ArgumentError
from mcpworld.worlds.episodes import EpisodeError, WorldUnavailable
from mcpworld.worlds.host import running
from mcpworld.worlds.runtime import Episode, UnknownTask
from mcpworld.worlds.server import MAX_ARGUMENT_BYTES, NotJudged, WorldServer

logger = logging.getLogger(__name__)

SERVER_CLASS = "MCPWorldResourcesServer"  # NeMo Gym names its cookie f"{class name}___{config name}"
SESSION_ID_KEY = "session_id"  # nemo_gym.server_utils.SESSION_ID_KEY
STATE_KEY = "mcpworld"  # this server's part of the session: the world, task and episode id
RESERVED = frozenset({"seed_session", "verify", "aggregate_metrics"})  # routes that are not tools
MAX_BODY_BYTES = 32 * 1024 * 1024  # a verify request carries the whole rollout's response
ROW_HELP = ('send the dataset row\'s fields, e.g. {"verifier_metadata": {"world": "airline", "task": '
            '"cancel-within-24h", "seed": 0}} (or "world"/"task"/"seed" at the top level)')


def cookie_name(name: str) -> str:
    """The session cookie's name as NeMo Gym names it for server `name` (`SimpleServer.get_session_middleware_key`)."""
    return f"{SERVER_CLASS}___{name}"


class Refused(Exception):
    """A request this server answers with a 4xx/5xx JSON error: what was wrong and what to send instead."""

    def __init__(self, status: int, message: str, **extra: Any):
        super().__init__(message)
        self.status, self.message, self.extra = status, message, extra

    def response(self) -> JSONResponse:
        return JSONResponse({"error": self.message, "status": self.status, **self.extra}, status_code=self.status)


async def json_object(request: Request, limit: int, what: str) -> dict[str, Any]:
    """The request body as a JSON object (read at most `limit` bytes), else a `Refused` that says what to send."""
    try:
        raw = await read_body(request.receive, limit)
    except BodyTooLarge:
        raise Refused(413, f"request body over {limit} bytes; send less") from None
    except BodyTimeout:
        raise Refused(408, f"the body did not arrive within {BODY_DEADLINE_S:g}s; send it at once") from None
    except ClientGone:  # nothing was dispatched; the answer reaches no one
        raise Refused(400, "the client went away before sending its body") from None
    try:
        body = json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refused(400, f"the body is not JSON ({exc}); send {what} as a JSON object with "
                      "Content-Type: application/json") from None
    except RecursionError:  # a body nested thousands deep was a bare 500
        raise Refused(400, f"the body's JSON is nested too deeply to read; send {what} as a plain JSON object") \
            from None
    if not isinstance(body, dict):
        raise Refused(422, f"the body is JSON {type(body).__name__}, not an object; send {what} as a JSON object")
    return body


def row_task(body: dict[str, Any], tasks: dict[str, list[str]]) -> tuple[str, str, int]:
    """(world, task, seed) from a dataset row: `verifier_metadata` first (NeMo Gym's convention), then top level.
    `tasks`: each served world's task ids."""
    worlds = sorted(tasks)
    meta = body.get("verifier_metadata")
    meta = meta if isinstance(meta, dict) else {}

    def field(key: str) -> Any:
        return meta[key] if key in meta else body.get(key)

    world = field("world")
    if world is None and len(worlds) == 1:
        world = worlds[0]
    if not isinstance(world, str):
        raise Refused(422, f"which world? {ROW_HELP}; served worlds: {', '.join(worlds)}", worlds=list(worlds))
    if world not in worlds:
        raise Refused(422, f"unknown world {world!r}; served worlds: {', '.join(worlds)}", worlds=list(worlds))
    task = field("task")
    if not isinstance(task, str) or task not in tasks[world]:
        which = "which task?" if task is None else f"unknown task {task!r} in world {world!r}:"
        raise Refused(422, f"{which} {ROW_HELP}; {world}'s tasks: {', '.join(tasks[world])}", tasks=tasks[world])
    seed = field("seed")
    seed = 0 if seed is None else seed
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise Refused(422, f"seed must be a whole number, got {seed!r}")
    return world, task, seed


def ending(response: dict[str, Any], tools: Iterable[str]) -> tuple[Termination, str | None, str]:
    """How a rollout ended, read off its Responses API `response`: (termination, final answer, why).

    Cut off by the token cap: `truncated`. A call to a tool the world lacks: `unknown_tool`; arguments that are
    not a JSON object: `format_error` (NeMo Gym's agent feeds both back and carries on, but the reward table
    penalizes them wherever they happen). Otherwise the last output item decides: an assistant message is the
    final answer (`final_answer`); anything else means the agent stopped calling tools at its step limit
    (`max_turns`, verified without an answer).
    """
    output = response.get("output")
    known = set(tools)
    if response.get("incomplete_details"):
        return Termination.TRUNCATED, None, f"the response is incomplete: {response['incomplete_details']}"
    for item in output or []:
        if not isinstance(item, dict) or item.get("type") != "function_call":
            continue
        name = item.get("name")
        if name not in known:
            return Termination.UNKNOWN_TOOL, None, f"called {name!r}, which the world does not have"
        try:
            arguments = json.loads(item.get("arguments") or "{}")
        except (TypeError, ValueError):
            arguments = None
        if not isinstance(arguments, dict):
            return Termination.FORMAT_ERROR, None, f"the arguments of a {name!r} call are not a JSON object"
    last = next((item for item in reversed(output or []) if isinstance(item, dict)
                 and item.get("type") not in ("reasoning",)), None)
    if last is not None and last.get("type") == "message" and last.get("role", "assistant") == "assistant":
        return Termination.FINAL_ANSWER, message_text(last), "the agent answered"
    return Termination.MAX_TURNS, None, "the rollout ended without a final answer"


def message_text(message: dict[str, Any]) -> str:
    """The text of an output message (its `output_text` parts; a refusal's text too)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = [part.get("text") or part.get("refusal") or "" for part in content or [] if isinstance(part, dict)]
    return "\n".join(p for p in parts if p).strip()


def aggregate(verify_responses: list[dict[str, Any]]) -> dict[str, Any]:
    """`/aggregate_metrics`: mean/max/min of each numeric field, per task (`_ng_task_index`) and overall;
    `key_metrics` are the means, as NeMo Gym's `compute_aggregate_metrics` selects them."""

    def stats(rows: list[dict[str, Any]]) -> dict[str, float]:
        out: dict[str, float] = {}
        keys = sorted({k for r in rows for k, v in r.items()
                       if isinstance(v, (int, float)) and not k.startswith("_ng_")})
        for key in keys:
            values = [float(r[key]) for r in rows if isinstance(r.get(key), (int, float))]
            out |= {f"mean/{key}": statistics.fmean(values), f"max/{key}": max(values), f"min/{key}": min(values)}
        return out

    if not verify_responses:
        return {"group_level_metrics": [], "agent_metrics": {}, "key_metrics": {}}
    groups: dict[int, list[dict[str, Any]]] = {}
    for row in verify_responses:
        groups.setdefault(int(row.get("_ng_task_index", 0)), []).append(row)
    overall = stats(verify_responses)
    return {"group_level_metrics": [{"_ng_task_index": i, "num_rollouts": len(rows), **stats(rows)}
                                    for i, rows in sorted(groups.items())],
            "agent_metrics": overall, "key_metrics": {k: v for k, v in overall.items() if k.startswith("mean/")}}


class _SessionIds:
    """Gives every request's session a `session_id` (kept if it has one), as NeMo Gym's `add_session_id`
    middleware does: the session is then always modified, so every response re-sends the cookie."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            session = scope["session"]
            session[SESSION_ID_KEY] = session.get(SESSION_ID_KEY) or str(uuid.uuid4())
        await self.app(scope, receive, send)


class GymWorlds:
    """The resources server's handlers over `servers` (one `WorldServer` per world, for its runtime and table)."""

    def __init__(self, servers: Sequence[WorldServer], name: str = "mcpworld"):
        self.servers = {s.runtime.world.name: s for s in servers}
        self.worlds = sorted(self.servers)
        self.tasks = {w: sorted(s.runtime.tasks) for w, s in self.servers.items()}
        # Tools no route can reach (the server's own routes win), as NeMo Gym reserves the same names.
        self.shadowed = sorted(f"{w}.{t}" for w, s in self.servers.items() for t in s.runtime.tools if t in RESERVED)
        self.name = name
        self.cookie = cookie_name(name)

    # -- the session's episode -------------------------------------------------------------------------

    def episode(self, request: Request) -> tuple[WorldServer, Episode, dict[str, Any]]:
        """The episode this request's session plays, or a `Refused` that says how to get one."""
        state = request.session.get(STATE_KEY)
        if not isinstance(state, dict):
            raise Refused(400, f"no episode in this session: POST /seed_session first ({ROW_HELP}) and send back "
                          f"the {self.cookie} cookie it sets")
        what = f"{state['world']} task {state['task']!r}"
        if state.get("verified"):
            raise Refused(409, f"this session's episode ({what}) was already verified and closed; POST "
                          "/seed_session to start another")
        server = self.servers[state["world"]]
        try:
            return server, server.episodes.get(state["episode"]), state
        except EpisodeError:
            raise Refused(410, f"this session's episode ({what}) is gone: it was closed, or idle longer than "
                          f"{server.episodes.limits.ttl_s:g}s and evicted; POST /seed_session to start "
                          "another") from None

    # -- routes ----------------------------------------------------------------------------------------

    async def seed_session(self, request: Request) -> Response:
        body = await json_object(request, MAX_BODY_BYTES, "the dataset row")
        world, task, seed = row_task(body, self.tasks)
        server = self.servers[world]
        old = request.session.get(STATE_KEY)
        if isinstance(old, dict) and not old.get("verified"):  # seeded again: the old episode is done with
            self.servers[old["world"]].episodes.close(old["episode"])
        request.session.pop(STATE_KEY, None)
        try:  # a world's first episode builds its seeded template: off the event loop
            episode = await anyio.to_thread.run_sync(server.episodes.start, task, seed)
        except UnknownTask as exc:
            raise Refused(422, str(exc)) from None
        except WorldUnavailable as exc:
            raise Refused(500, str(exc)) from None
        except EpisodeError as exc:  # the cap, or shutting down
            raise Refused(503, str(exc)) from None
        request.session[STATE_KEY] = {"world": world, "task": task, "seed": seed, "episode": episode.id}
        return JSONResponse({"world": world, "task": task, "seed": seed, "episode": episode.id,
                             "instruction": server.runtime.instruction(server.runtime.tasks[task], seed),
                             "expires_in_s": server.episodes.limits.ttl_s})

    async def call_tool(self, request: Request) -> Response:
        tool = request.path_params["tool"]
        arguments = await json_object(request, MAX_ARGUMENT_BYTES, f"the arguments of {tool!r}")
        server, episode, state = self.episode(request)
        runtime = server.runtime
        spec = runtime.tools.get(tool)
        names = sorted(t["name"] for t in runtime.listed_tools)
        if spec is None and tool not in names:
            raise Refused(404, f"unknown tool {tool!r} in world {state['world']!r}; its tools: "
                          f"{', '.join(names)}", tools=names)
        try:
            if spec is not None:  # the submission tools check their own arguments, as the model's to fix
                spec.parse(arguments)
        except ArgumentError as exc:
            raise Refused(422, f"{exc}; nothing was run or changed: send the arguments its schema asks for",
                          tool=tool, parameters=spec.input_schema if spec else None) from None
        result = await server.run_tool(episode, tool, arguments)
        if result.error is not None:  # the tool refused or failed: rolled back; the model reads why
            return JSONResponse({"error": result.error})
        if isinstance(result.value, str):
            return PlainTextResponse(result.value)
        return JSONResponse(result.value)

    async def verify(self, request: Request) -> Response:
        body = await json_object(request, MAX_BODY_BYTES, "the dataset row plus the rollout's `response`")
        response = body.get("response")
        if not isinstance(response, dict) or not isinstance(response.get("output"), list):
            raise Refused(422, "pass the rollout's Responses API response as `response` (an object with its "
                          "`output` list), next to the dataset row's fields")
        server, episode, state = self.episode(request)
        termination, answer, why = ending(response, [t["name"] for t in server.runtime.listed_tools])

        try:
            with episode.serving():
                verdict = await server.verdict(episode, answer, in_thread=True)
        except NotJudged as exc:  # the server's failure, never a reward: NeMo Gym sees an error, not a 0
            raise Refused(503, f"{state['world']} task {state['task']!r}: {exc}") from None
        except Exception as exc:
            raise Refused(500, unexpected_error(f"verifying {state['world']} task {state['task']!r}", exc)) from None
        finally:
            server.episodes.close(episode.id)
            request.session[STATE_KEY] = {**state, "verified": True}
        reward = termination.reward(passed=verdict.passed)
        return JSONResponse({**body, "reward": reward, "mcpworld": {
            "world": state["world"], "task": state["task"], "seed": state["seed"], "episode": episode.id,
            "termination": str(termination), "why": why, "answer": answer, "passed": verdict.passed,
            "score": verdict.score, "failures": verdict.sealed().failures}})

    async def aggregate_metrics(self, request: Request) -> Response:
        body = await json_object(request, MAX_BODY_BYTES, '{"verify_responses": [...]}')
        rows = body.get("verify_responses")
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise Refused(422, 'pass {"verify_responses": [...]}: the /verify responses (objects) to summarize')
        return JSONResponse(aggregate(rows))

    # -- the app ---------------------------------------------------------------------------------------

    def routes_app(self) -> Starlette:
        """The session-keyed routes (no lifespan: `nemo_gym_app` runs the worlds)."""
        from starlette.middleware.sessions import SessionMiddleware

        def handled(fn: Any) -> Any:
            async def endpoint(request: Request) -> Response:
                try:
                    return await fn(request)
                except Refused as refused:
                    return refused.response()
            return endpoint

        routes = [Route("/seed_session", handled(self.seed_session), methods=["POST"]),
                  Route("/verify", handled(self.verify), methods=["POST"]),
                  Route("/aggregate_metrics", handled(self.aggregate_metrics), methods=["POST"]),
                  Route("/{tool}", handled(self.call_tool), methods=["POST"])]
        # A fresh secret per process: episodes live in this process's memory, so cookies need not outlive it.
        middleware = [Middleware(SessionMiddleware, secret_key=secrets.token_hex(32), session_cookie=self.cookie),
                      Middleware(_SessionIds)]
        return Starlette(routes=routes, middleware=middleware)

    def dataset_rows(self, split: str | None = None) -> Iterable[dict[str, Any]]:
        """One NeMo Gym dataset row per task: the prompt and tools the policy sees, and the task to seed."""
        for world in self.worlds:
            server = self.servers[world]
            tools = [{"type": "function", "name": t["name"], "description": t.get("description", ""),
                      "parameters": t["inputSchema"], "strict": False} for t in server.runtime.listed_tools]
            for task in server.runtime.tasks.values():
                if split is not None and task.split != split:
                    continue
                yield {"responses_create_params": {
                    "input": [{"role": "system", "content": server.server.instructions or ""},
                              {"role": "user", "content": server.runtime.instruction(task)}], "tools": tools},
                    "verifier_metadata": {"world": world, "task": task.id, "seed": 0}}


def nemo_gym_app(servers: Sequence[WorldServer], host: str = "127.0.0.1", *, name: str = "mcpworld",
                 exposure: Exposure | None = None) -> Any:
    """The whole app: `GET /` (NeMo Gym's liveness) and `/healthz` open; the session routes behind `exposure`
    (beyond loopback: Host/Origin checked and the registry token required, as on every world endpoint)."""
    exposure = exposure or Exposure.of(host)
    gym = GymWorlds(servers, name)

    async def liveness(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    guarded = exposure.guard(gym.routes_app(), auth=True)  # on loopback: Host and Origin only
    routes = [Route("/", liveness), Mount("", app=guarded)]
    return endpoint_app(routes, lambda: {"worlds": len(servers), "cookie": gym.cookie},
                        lambda: running(servers), exposure)
