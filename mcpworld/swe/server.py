"""The SWE sandbox as an MCP server: editor, bash, search, lsp and submit tools over per-episode workspaces.

Only domain tools appear in tools/list. Episodes are driven through the same `io.mcpworld/episode` extension
methods as worlds (start / verify / close / tasks / state), so `EpisodeControl` and the agent work unchanged; a
client that sends no episode id gets one default episode per connection. Blocking work (git, commands, the language
server, grading) runs in worker threads so one slow episode never stalls the others.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from jsonschema import Draft202012Validator
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from mcpworld import __version__
from mcpworld.core import protocol as p
from mcpworld.core.models import TaskInfo, ToolCall, Verdict
from mcpworld.core.security import Exposure
from mcpworld.swe.editor import Editor, EditorError
from mcpworld.swe.grading import grade, repo_dirname
from mcpworld.swe.instances import Instance
from mcpworld.swe.lsp import LspError, LspSession
from mcpworld.swe.oracle import PatchError, solution_calls
from mcpworld.swe.search import SearchError, search
from mcpworld.swe.shell import ExecutionBackend, LocalBackend, format_result, refusal, scrubbed_env
from mcpworld.swe.workspace import Workspace, WorkspaceError, WorkspacePool

logger = logging.getLogger(__name__)
MAX_ARGUMENT_BYTES = 1024 * 1024

TOOLS = [
    types.Tool(
        name="str_replace_editor",
        description=(
            "Custom editing tool for viewing, creating and editing files.\n"
            "* State is persistent across calls.\n"
            "* `view` on a file prints it with `cat -n` line numbers; on a directory it lists non-hidden files and "
            "directories up to 2 levels deep.\n"
            "* `create` cannot overwrite an existing file.\n"
            "* Long outputs are clipped and marked with `<response clipped>`.\n"
            "* `undo_edit` reverts the last edit made to the file at `path`.\n"
            "Notes for `str_replace`: `old_str` must match EXACTLY one or more consecutive lines of the file "
            "(whitespace included) and be unique in it; include enough context to make it unique. `new_str` "
            "replaces it."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "command": {"type": "string", "enum": ["view", "create", "str_replace", "insert", "undo_edit"],
                            "description": "The command to run."},
                "path": {"type": "string", "description": "Absolute path to a file or directory in the repository."},
                "file_text": {"type": "string", "description": "Content of the file to create (`create`)."},
                "old_str": {"type": "string", "description": "Exact text to replace (`str_replace`)."},
                "new_str": {"type": "string",
                            "description": "Replacement text (`str_replace`) or text to insert (`insert`)."},
                "insert_line": {"type": "integer", "description": "Insert `new_str` AFTER this line (0 = top)."},
                "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2,
                               "description": "[start, end] lines to view, 1-based; end -1 means to the end."},
            },
            "required": ["command", "path"],
            "additionalProperties": False,
        },
    ),
    types.Tool(
        name="bash",
        description=(
            "Run one bash command in the repository root and return its output and exit code.\n"
            "* Each call is a fresh shell: `cd` and variables do not carry over, and background jobs end with the "
            "call.\n"
            "* Interactive programs (editors, pagers, a bare `python`) are refused: there is no terminal.\n"
            "* Long output is truncated in the middle; the command is killed, with everything it started, when the "
            "timeout passes."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command to run."},
                "timeout": {"type": "integer", "minimum": 1, "description": "Seconds before the command is killed."},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    ),
    types.Tool(
        name="search",
        description=(
            "Search the repository without a shell. kind=content: lines matching the regular expression `pattern` "
            "(as path:line:text). kind=files: files whose name (or repository-relative path) matches the glob "
            "`pattern`. Hidden folders, caches and binary files are skipped."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string", "description": "File or directory to search in (default: the repository)."},
                "kind": {"type": "string", "enum": ["content", "files"], "default": "content"},
                "include": {"type": "string", "description": "Only files whose name matches this glob, e.g. *.py."},
                "ignore_case": {"type": "boolean", "default": False},
                "fixed_strings": {"type": "boolean", "default": False,
                                  "description": "Treat `pattern` as plain text, not a regular expression."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="lsp",
        description=(
            "Python language server queries (jedi). definition / references / hover: name the `symbol` as written on "
            "1-based `line` of `file_path`; definitions come back as the numbered source of the enclosing function "
            "or class. document_symbols: the outline of `file_path`. workspace_symbols: symbols matching `query`."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "command": {"type": "string",
                            "enum": ["definition", "references", "hover", "document_symbols", "workspace_symbols"]},
                "file_path": {"type": "string", "description": "Absolute path of a Python file in the repository."},
                "symbol": {"type": "string", "description": "The name to look up, as it appears on `line`."},
                "line": {"type": "integer", "minimum": 1, "description": "1-based line where `symbol` appears."},
                "query": {"type": "string", "description": "Name or prefix to find (workspace_symbols)."},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="submit",
        description="Submit your work: returns the patch (git diff of the repository against the base commit, new "
                    "files included) that will be graded. Call it when the issue is fixed.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
]
_VALIDATORS = {t.name: Draft202012Validator(t.input_schema) for t in TOOLS}


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


@dataclass(eq=False)
class SWEEpisode:
    id: str
    instance: Instance
    workspace: Workspace
    editor: Editor
    lsp: LspSession
    submission: str | None = None
    last_used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)


class EpisodeError(LookupError):
    """An unknown, expired or over-limit episode; the message says what to do."""


class SWEServer:
    """Binds instances, a workspace pool and an execution backend to an MCP `Server`."""

    def __init__(self, instances: list[Instance], backend: ExecutionBackend | None = None,
                 options: SWEOptions | None = None, pool: WorkspacePool | None = None,
                 grader: Callable[[Instance, str | None], Verdict] | None = None, token: str | None = None):
        """`grader` replaces real grading (e.g. SWR, the virtual test runner, in simulated mode); `token`
        unlocks reference solutions in the task list (default: the local registry token)."""
        self.reveal = p.Reveal(token)
        if not instances:
            raise ValueError("the SWE server needs at least one instance")
        self.instances = {i.instance_id: i for i in instances}
        self.backend = backend or LocalBackend()
        self.grader = grader
        self.options = options or SWEOptions()
        self.pool = pool or WorkspacePool(warm=self.options.warm)
        self._episodes: dict[str, SWEEpisode] = {}
        self._defaults: dict[str, str] = {}
        self._commits: dict[str, str] = {}
        self._solutions: dict[str, list[ToolCall]] = {}
        self._lock = threading.Lock()
        self._starting = 0  # episode slots reserved by starts still checking out (counted against max_episodes)
        self._ids = itertools.count(1)
        self._closed = False
        self.server: Server[Any] = Server(
            "io.mcpworld/swe", version=__version__, title="SWE sandbox",
            description="Repository tasks with editor, shell, search and LSP tools, graded like SWE-bench",
            instructions="Fix the issue in the repository with the tools, then call submit.",
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt,
        )
        p.add_control_plane(self.server, self, {"world": "swe", "tasks": len(self.instances)})

    def __len__(self) -> int:
        return len(self._episodes)

    # -- episodes --------------------------------------------------------------------------------------------

    def start_episode(self, task: str | None, seed: int = 0) -> SWEEpisode:
        """Check out the instance's base commit into a private workspace (blocking: call from a thread)."""
        self.sweep()
        if task is None:
            instance = list(self.instances.values())[seed % len(self.instances)]
        elif task in self.instances:
            instance = self.instances[task]
        else:
            raise KeyError(f"unknown task {task!r}")
        with self._lock:  # reserve the slot before the slow checkout, so concurrent starts cannot overshoot
            if self._closed:
                raise EpisodeError("the server is shutting down")
            live = len(self._episodes) + self._starting
            if live >= self.options.max_episodes:
                raise EpisodeError(f"too many live episodes ({live} of max {self.options.max_episodes}, counting "
                                   "starts in progress); close finished episodes first")
            self._starting += 1
        ws = None
        try:
            commit = self._commit(instance)
            ws = self.pool.acquire(instance.repo_source, commit, repo_dirname(instance))
            episode = SWEEpisode(f"swe-{next(self._ids)}-{ws.parent.name[-8:]}", instance, ws, Editor(ws.root),
                                 LspSession(ws.root))
        except BaseException:
            with self._lock:
                self._starting -= 1
            if ws is not None:
                self.pool.release(ws)
            raise
        with self._lock:
            self._starting -= 1
            closed = self._closed
            if not closed:
                self._episodes[episode.id] = episode
        if closed:  # close_all ran during the checkout: do not leak the workspace
            episode.lsp.close()
            self.pool.release(ws)
            raise EpisodeError("the server is shutting down")
        bind = getattr(self.backend, "bind", None)  # backends that need the instance (simulated) are told it
        if bind is not None:
            bind(ws.root, instance)
        return episode

    def _commit(self, instance: Instance) -> str:
        if instance.instance_id not in self._commits:
            self._commits[instance.instance_id] = self.pool.cache.commit(instance.repo_source, instance.base_commit)
        return self._commits[instance.instance_id]

    def get(self, episode_id: str) -> SWEEpisode:
        self.sweep()
        episode = self._episodes.get(episode_id)
        if episode is None:
            raise EpisodeError(f"unknown episode {episode_id!r}: it was closed, expired after "
                               f"{self.options.ttl_s:g}s idle, or never existed; start a new one")
        episode.last_used = time.monotonic()
        return episode

    def close_episode(self, episode_id: str) -> bool:
        with self._lock:
            episode = self._episodes.pop(episode_id, None)
        if episode is None:
            return False
        unbind = getattr(self.backend, "unbind", None)
        if unbind is not None:
            unbind(episode.workspace.root)
        with episode.lock:
            episode.lsp.close()
            self.pool.release(episode.workspace)
        return True

    def sweep(self) -> None:
        now = time.monotonic()
        for eid, e in list(self._episodes.items()):
            if now - e.last_used > self.options.ttl_s and not e.lock.locked():
                self.close_episode(eid)

    def close_all(self) -> None:
        """Remove every workspace and stop every language server (server shutdown)."""
        with self._lock:
            self._closed = True
            ids = list(self._episodes)
        for eid in ids:
            self.close_episode(eid)
        self.pool.close_all()

    async def _episode(self, ctx: Any) -> SWEEpisode:
        meta = getattr(ctx, "meta", None)
        episode_id = meta.get(p.EPISODE_META_KEY) if meta else None
        if episode_id is not None:
            return self.get(str(episode_id))
        key = connection_key(ctx)
        existing = self._defaults.get(key)
        if existing in self._episodes:
            return self.get(existing)  # type: ignore[arg-type]
        episode = await anyio.to_thread.run_sync(self.start_episode, None, 0)
        self._defaults[key] = episode.id
        return episode

    # -- tools -----------------------------------------------------------------------------------------------

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        size = len(json.dumps(arguments, default=str))
        if size > MAX_ARGUMENT_BYTES:
            return _text(f"arguments too large: {size} bytes (max {MAX_ARGUMENT_BYTES})", error=True)
        validator = _VALIDATORS.get(params.name)
        if validator is None:
            return _text(f"unknown tool {params.name!r}; tools: {', '.join(_VALIDATORS)}", error=True)
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
        if errors:
            return _text("; ".join(f"{'.'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors),
                         error=True)
        try:
            episode = await self._episode(ctx)
        except (EpisodeError, WorkspaceError) as exc:
            return _text(str(exc), error=True)
        handler: Callable[[SWEEpisode, dict[str, Any]], types.CallToolResult] = getattr(self, f"_tool_{params.name}")

        def run() -> types.CallToolResult:
            with episode.lock:
                try:
                    return handler(episode, arguments)
                except (EditorError, SearchError, LspError, WorkspaceError) as exc:
                    return _text(str(exc), error=True)

        return await anyio.to_thread.run_sync(run)

    def _tool_str_replace_editor(self, episode: SWEEpisode, a: dict[str, Any]) -> types.CallToolResult:
        return _text(episode.editor.run(a["command"], a["path"], a.get("file_text"), a.get("old_str"),
                                        a.get("new_str"), a.get("insert_line"), a.get("view_range")))

    def _tool_bash(self, episode: SWEEpisode, a: dict[str, Any]) -> types.CallToolResult:
        why = refusal(a["command"])
        if why:
            return _text(why, error=True)
        timeout = min(float(a.get("timeout") or self.options.default_command_timeout_s),
                      self.options.command_timeout_s)
        ws = episode.workspace
        result = self.backend.run(a["command"], ws.root, timeout, env=scrubbed_env(ws.home), writable=ws.parent)
        return _text(format_result(result, timeout), error=result.timed_out)

    def _tool_search(self, episode: SWEEpisode, a: dict[str, Any]) -> types.CallToolResult:
        return _text(search(episode.workspace.root, a["pattern"], a.get("path"), a.get("kind", "content"),
                            a.get("include"), bool(a.get("ignore_case")), bool(a.get("fixed_strings")),
                            a.get("max_results", 100)))

    def _tool_lsp(self, episode: SWEEpisode, a: dict[str, Any]) -> types.CallToolResult:
        return _text(episode.lsp.run(a["command"], a.get("file_path"), a.get("symbol"), a.get("line"),
                                     a.get("query")))

    def _tool_submit(self, episode: SWEEpisode, a: dict[str, Any]) -> types.CallToolResult:
        patch = episode.workspace.diff()
        episode.submission = patch
        if not patch.strip():
            return _text("Submitted an empty patch: the repository has no changes against the base commit.",
                         structured={"patch": ""})
        return _text(f"Submitted. The patch to be graded:\n\n{patch}", structured={"patch": patch})

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
        return p.StartResult(episode=episode.id, task=episode.instance.instance_id,
                             instruction=instruction(episode.instance, episode.workspace.root),
                             expires_in_s=self.options.ttl_s)

    async def _verify(self, ctx: Any, params: p.VerifyParams) -> p.VerifyResult:
        episode = self._lookup(params.episode)

        def run() -> Any:
            with episode.lock:
                source = "submit" if episode.submission is not None else "workspace"
                patch = episode.submission if episode.submission is not None else episode.workspace.diff()
            if self.grader is not None:
                return self.grader(episode.instance, patch)
            result = grade(episode.instance, patch, self.pool, self.backend, self.options.grade_timeout_s)
            result.extra.update(patch_source=source, patch=patch[-20000:])
            return result.verdict()

        try:
            verdict = await anyio.to_thread.run_sync(run)
        except WorkspaceError as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=f"grading failed: {exc}") from None
        closed = await anyio.to_thread.run_sync(self.close_episode, episode.id) if params.close else False
        return p.VerifyResult(episode=episode.id, task=episode.instance.instance_id, verdict=verdict, closed=closed)

    async def _close(self, ctx: Any, params: p.EpisodeParams) -> p.CloseResult:
        closed = await anyio.to_thread.run_sync(self.close_episode, params.episode)
        return p.CloseResult(episode=params.episode, closed=closed)

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


def connection_key(ctx: Any) -> str:
    """Which default episode a plain client gets: its HTTP session when it has one, else the process's."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    session_id = headers.get("mcp-session-id") if headers is not None else None
    return f"session:{session_id}" if session_id else "default"


def _text(text: str, *, error: bool = False, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured,
                                is_error=error)


# -- hosting ---------------------------------------------------------------------------------------------------

def build_swe_server(instances_file: str | Path | None = None, backend: str = "local",
                     options: SWEOptions | None = None, repos_dir: str | Path | None = None,
                     token: str | None = None) -> SWEServer:
    """A SWEServer over an instances file (default: the shipped instances, built on first use)."""
    from mcpworld.swe.builder import builtin_instances
    from mcpworld.swe.instances import load_instances
    from mcpworld.swe.shell import make_backend

    instances = load_instances(instances_file, repos_dir) if instances_file else builtin_instances()
    return SWEServer(instances, make_backend(backend), options, token=token)


SWE_PATH = "/swe/mcp"


def swe_routes(sw: SWEServer, host: str = "127.0.0.1", exposure: Exposure | None = None) -> list[Any]:
    """A Mount serving the SWE server at /swe/mcp in any Starlette/FastAPI app (run `running_swe` in its lifespan).

    Its bash tool runs commands, so beyond loopback the endpoint needs the registry token (`mcpworld.core.security`).
    """
    from starlette.routing import Mount

    exposure = exposure or Exposure.of(host)
    return [Mount("/swe", app=exposure.mcp_app(sw.server))]


@contextlib.asynccontextmanager
async def running_swe(sw: SWEServer) -> AsyncIterator[None]:
    """Run the mounted server's HTTP session manager; remove every workspace on the way out."""
    try:
        async with sw.server.session_manager.run():
            yield
    finally:
        await anyio.to_thread.run_sync(sw.close_all)
