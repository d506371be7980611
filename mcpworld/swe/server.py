"""The SWE sandbox as an MCP server: editor, bash, search, lsp and submit tools over per-episode workspaces.

Only domain tools appear in tools/list. Episodes are driven through the same `io.mcpworld/episode` extension
methods as worlds (start / verify / close / tasks / state), so `EpisodeControl` and the agent work unchanged; a
client that sends no episode id gets one default episode per connection, freed as soon as it deletes its HTTP
session, and a sessionless (2026-07-28 HTTP) plain client gets a fresh episode whose server-minted handle it
passes back as the `episode` argument: no two clients ever share a workspace. Built on the episode kernel
(`mcpworld.core.episode_server`); the tools are typed functions of the episode (`mcpworld.swe.tools`). Blocking
work (git, commands, the language server, grading) runs in worker threads so one slow episode never stalls others.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from mcpworld import __version__
from mcpworld.core import protocol as p
from mcpworld.core.episode_server import (
    EpisodeError,
    EpisodeLimits,
    EpisodeTable,
    ToolBox,
    mount,
    no_resources,
    requested_episode,
    running,
    text_result,
    unexpected_error,
    with_handle_note,
)
from mcpworld.core.models import TaskInfo, ToolCall, Verdict
from mcpworld.core.security import Exposure
from mcpworld.core.workers import id_tag
from mcpworld.swe.editor import Editor
from mcpworld.swe.grading import grade, repo_dirname
from mcpworld.swe.instances import Instance, answer_paths
from mcpworld.swe.lsp import LspSession
from mcpworld.swe.oracle import PatchError, solution_calls
from mcpworld.swe.shell import ExecutionBackend, LocalBackend
from mcpworld.swe.tools import EXPECTED_ERRORS, TOOL_FUNCTIONS, SWEEpisode
from mcpworld.swe.workspace import WorkspaceError, WorkspacePool

logger = logging.getLogger(__name__)
MAX_ARGUMENT_BYTES = 1024 * 1024
TOOLBOX = ToolBox(TOOL_FUNCTIONS, max_argument_bytes=MAX_ARGUMENT_BYTES, expected=EXPECTED_ERRORS, handles=True)
TOOLS = TOOLBOX.tools
Grader = Callable[[Instance, str | None], Awaitable[Verdict]]


def instruction(instance: Instance, root: Path | None = None) -> str:
    """The issue, then where the repository is: the exact path once an episode has one, else how to find it."""
    where = (f"The repository is checked out at {root} (the working directory of the bash tool)." if root else
             "The repository is the working directory of the bash tool (`pwd` prints its absolute path); the "
             "editor, search and lsp tools take absolute paths inside it.")
    return f"{instance.problem_statement.rstrip()}\n\n{where} Change its non-test files so the issue is " \
           "resolved, then call submit."


@dataclass
class SWEOptions:
    """Server limits: command timeouts, episode lifetime and count, how many checkouts to keep warm."""

    command_timeout_s: float = 120.0
    default_command_timeout_s: float = 60.0
    grade_timeout_s: float = 600.0
    ttl_s: float = 3600.0
    max_episodes: int = 64
    warm: int = 1


class SWEServer:
    """Binds instances, a workspace pool and an execution backend to an MCP `Server` (on the episode kernel)."""

    def __init__(self, instances: list[Instance], backend: ExecutionBackend | None = None,
                 options: SWEOptions | None = None, pool: WorkspacePool | None = None,
                 grader: Grader | None = None, token: str | None = None):
        """`backend`: where commands run (default: contained here, these instances' answers hidden; a backend
        passed in hides what its maker gave it, `backends.make_backend`); `grader` replaces real grading (e.g. SWR,
        the virtual test runner, in simulated mode); `token` unlocks reference solutions in the task list
        (default: the local registry token)."""
        self.reveal = p.Reveal(token)
        if not instances:
            raise ValueError("the SWE server needs at least one instance")
        self.instances = {i.instance_id: i for i in instances}
        self.backend = backend or LocalBackend(hidden=tuple(answer_paths(instances)))
        self.grader = grader
        self.options = options or SWEOptions()
        self.pool = pool or WorkspacePool(warm=self.options.warm)
        self.episodes: EpisodeTable[SWEEpisode] = EpisodeTable(
            self._open, self._free, EpisodeLimits(self.options.ttl_s, self.options.max_episodes),
            busy=lambda e: e.busy.locked())
        self._commits: dict[str, str] = {}
        self._solutions: dict[str, list[ToolCall]] = {}
        self.server: Server[Any] = Server(
            "io.mcpworld/swe", version=__version__, title="SWE sandbox",
            description="Repository tasks with editor, shell, search and LSP tools, graded like SWE-bench",
            instructions="Fix the issue in the repository with the tools, then call submit.",
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt,
            get_tool_input_schema=TOOLBOX.input_schema, **no_resources(),
        )
        p.add_control_plane(self.server, self, {"world": "swe", "tasks": len(self.instances)})

    def __len__(self) -> int:
        return len(self.episodes)

    # -- episodes --------------------------------------------------------------------------------------------

    def start_episode(self, task: str | None, seed: int = 0) -> SWEEpisode:
        """Check out the instance's base commit into a private workspace (blocking: call from a thread)."""
        if task is not None and task not in self.instances:
            raise KeyError(f"unknown task {task!r}")
        return self.episodes.start(task, seed)

    def _open(self, task: str | None, seed: int) -> SWEEpisode:
        ordered = list(self.instances.values())
        instance = self.instances[task] if task is not None else ordered[seed % len(ordered)]
        commit = self._commit(instance)
        ws = self.pool.acquire(instance.repo_source, commit, repo_dirname(instance))
        try:
            # The id is also a sessionless client's handle, all that names its episode: unguessable, like a world's.
            return SWEEpisode(f"swe-{id_tag()}{secrets.token_hex(8)}", instance, ws, Editor(ws.root),
                              LspSession(ws.root), self.backend.for_episode(instance),
                              self.options.default_command_timeout_s, self.options.command_timeout_s)
        except BaseException:
            self.pool.release(ws)
            raise

    def _free(self, episode: SWEEpisode) -> None:
        episode.lsp.close()
        self.pool.release(episode.workspace)

    def _commit(self, instance: Instance) -> str:
        if instance.instance_id not in self._commits:
            self._commits[instance.instance_id] = self.pool.cache.commit(instance.repo_source, instance.base_commit)
        return self._commits[instance.instance_id]

    def get(self, episode_id: str) -> SWEEpisode:
        return self.episodes.get(episode_id)

    def close_episode(self, episode_id: str) -> bool:
        return self.episodes.close(episode_id)

    async def end_connection(self, connection: str) -> bool:
        """A client's HTTP session ended: free its default episode's workspace now (after a call in flight)."""
        episode_id = self.episodes.default_id(connection)
        if episode_id is None:
            return False
        async with self.episodes.get(episode_id).busy:
            return await anyio.to_thread.run_sync(self.episodes.close_connection, connection)

    def close_all(self) -> None:
        """Remove every workspace and stop every language server (server shutdown)."""
        self.episodes.shutdown()
        self.pool.close_all()

    async def _episode(self, ctx: Any, handle: str | None) -> tuple[SWEEpisode, bool]:
        """The call's episode and whether it was minted for it (`EpisodeTable.for_call`; a start is a checkout,
        so it runs in a worker thread)."""
        named = requested_episode(ctx, handle)
        if named is not None:
            return self.get(named), False
        return await anyio.to_thread.run_sync(self.episodes.for_call, ctx)

    # -- tools -----------------------------------------------------------------------------------------------

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        call = TOOLBOX.prepare(params)
        if isinstance(call, types.CallToolResult):
            return call
        try:
            episode, minted = await self._episode(ctx, call.handle)
        except (EpisodeError, WorkspaceError) as exc:
            return text_result(str(exc), error=True)
        except Exception as exc:
            return text_result(unexpected_error("starting this connection's episode", exc), error=True)
        async with episode.busy:
            try:
                self.get(episode.id)  # still live: not closed (or evicted) while this call waited for it
            except EpisodeError as exc:
                return text_result(str(exc), error=True)
            result = await TOOLBOX.run(call, episode)
        return with_handle_note(result, episode.id) if minted else result

    # -- prompts (tasks for people in an MCP client) ---------------------------------------------------------

    async def _list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[
            types.Prompt(name=i.instance_id, title=i.instance_id,
                         description=i.problem_statement.strip().splitlines()[0][:200])
            for i in self.instances.values()
        ])

    async def _get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        instance = self.instances.get(params.name)
        if instance is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown task {params.name!r}")
        return types.GetPromptResult(description=f"{instance.repo}: {instance.instance_id}", messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=instance.problem_statement))])

    # -- control plane ---------------------------------------------------------------------------------------

    def _lookup(self, episode_id: str) -> SWEEpisode:
        try:
            return self.get(episode_id)
        except EpisodeError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None

    async def _start(self, ctx: Any, params: p.StartParams) -> p.StartResult:
        try:
            episode = await anyio.to_thread.run_sync(self.start_episode, params.task, params.seed)
        except KeyError:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown task {params.task!r}; list tasks with "
                           f"{p.METHOD_TASKS}") from None
        except (EpisodeError, WorkspaceError) as exc:
            raise MCPError(code=types.INVALID_REQUEST, message=str(exc)) from None
        except Exception as exc:  # a JSON-RPC error that says what happened, not the SDK's code 0
            raise MCPError(code=types.INTERNAL_ERROR, message=unexpected_error("starting the episode", exc)) from None
        return p.StartResult(episode=episode.id, task=episode.instance.instance_id,
                             instruction=instruction(episode.instance, episode.workspace.root),
                             expires_in_s=self.options.ttl_s)

    async def _verify(self, ctx: Any, params: p.VerifyParams) -> p.VerifyResult:
        episode = self._lookup(params.episode)
        async with episode.busy:
            source = "submit" if episode.submission is not None else "workspace"
            patch = episode.submission if episode.submission is not None else \
                await anyio.to_thread.run_sync(episode.workspace.diff)
        try:
            if self.grader is not None:
                verdict = await self.grader(episode.instance, patch)
            else:
                verdict = await anyio.to_thread.run_sync(self._grade, episode.instance, patch, source)
        except WorkspaceError as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=f"grading failed: {exc}") from None
        except Exception as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=unexpected_error("grading", exc)) from None
        closed = await self._close_episode(episode.id) if params.close else False
        return p.VerifyResult(episode=episode.id, task=episode.instance.instance_id, verdict=verdict, closed=closed)

    def _grade(self, instance: Instance, patch: str, source: str) -> Verdict:
        result = grade(instance, patch, self.pool, self.backend, self.options.grade_timeout_s)
        result.extra.update(patch_source=source, patch=patch[-20000:])
        return result.verdict()

    async def _close_episode(self, episode_id: str) -> bool:
        """Close once the episode's call in flight (if any) is done, so its workspace is never pulled from under it."""
        try:
            episode = self.episodes.get(episode_id)
        except EpisodeError:
            return False
        async with episode.busy:
            return await anyio.to_thread.run_sync(self.close_episode, episode_id)

    async def _close(self, ctx: Any, params: p.EpisodeParams) -> p.CloseResult:
        return p.CloseResult(episode=params.episode, closed=await self._close_episode(params.episode))

    async def _tasks(self, ctx: Any, params: p.TasksParams) -> p.TasksResult:
        reveal = self.reveal.allows(params.token)
        infos = await anyio.to_thread.run_sync(
            lambda: [self.task_info(i, reveal) for i in self.instances.values() if params.split in (None, i.split)])
        return p.TasksResult(world="swe", tasks=infos)

    async def _state(self, ctx: Any, params: p.StateParams) -> p.StateResult:
        episode = self._lookup(params.episode)
        patch = await anyio.to_thread.run_sync(episode.workspace.diff)
        return p.StateResult(episode=episode.id, tables={}, diff={"patch": patch[-20000:],
                                                                  "submitted": episode.submission is not None})

    def task_info(self, instance: Instance, reveal: bool = False) -> TaskInfo:
        """What a client may know: the issue (and how to find the repository); with `reveal`, also the reference
        solution (editor calls replaying the gold patch, with paths relative to the repository root)."""
        return TaskInfo(id=instance.instance_id, instruction=instruction(instance), split=instance.split,
                        difficulty=instance.difficulty, kind="state",
                        solution=self.solution(instance) if reveal else [], answer=None)

    def solution(self, instance: Instance) -> list[ToolCall]:
        if instance.instance_id not in self._solutions:
            calls: list[ToolCall] = []
            if instance.patch:
                try:
                    commit = self._commit(instance)
                    calls = solution_calls(instance.patch, lambda path: self.pool.cache.read_file(
                        instance.repo_source, commit, path))
                    calls.append(ToolCall(name="submit"))
                except (PatchError, WorkspaceError) as exc:
                    logger.warning("no reference solution for %s: %s", instance.instance_id, exc)
            self._solutions[instance.instance_id] = calls
        return self._solutions[instance.instance_id]


# -- hosting ---------------------------------------------------------------------------------------------------

def build_swe_server(instances_file: str | Path | None = None, backend: str = "local",
                     options: SWEOptions | None = None, repos_dir: str | Path | None = None,
                     token: str | None = None) -> SWEServer:
    """A SWEServer over an instances file (default: the shipped instances, built on first use) on the backend
    named `backend` (`backends.BACKENDS`)."""
    from mcpworld.swe.backends import make_backend
    from mcpworld.swe.builder import builtin_instances
    from mcpworld.swe.instances import load_instances

    instances = load_instances(instances_file, repos_dir) if instances_file else builtin_instances()
    chosen = make_backend(backend, instances)
    return SWEServer(instances, chosen.execution, options, grader=chosen.grader, token=token)


SWE_PATH = "/swe/mcp"


def swe_routes(sw: SWEServer, host: str = "127.0.0.1", exposure: Exposure | None = None) -> list[Any]:
    """A Mount serving the SWE server at /swe/mcp in any Starlette/FastAPI app (run `running_swe` in its lifespan).

    Its bash tool runs commands, so beyond loopback the endpoint needs the registry token (`mcpworld.core.security`).
    A client that deletes its HTTP session frees its default episode's workspace at once.
    """
    return [mount("/swe", sw.server, exposure or Exposure.of(host), on_session_end=sw.end_connection)]


@contextlib.asynccontextmanager
async def running_swe(sw: SWEServer) -> AsyncIterator[None]:
    """Run the mounted server's HTTP endpoint; on the way out end its sessions, then remove every workspace."""
    async with running([sw.server], [sw.close_all]):
        yield
