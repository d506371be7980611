"""SWT and SWR as MCP servers, their registry records, and what `mcpworld up` mounts when endpoints are configured.

SWT: one tool, `simulate(instance_id, command, patch?)` -> {stdout, stderr, exit_code}. SWR: one tool,
`score(instance_id, patch, k?)` -> {status, score, samples...}. A model failure is an `isError` result that says so.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from pydantic import Field

from mcpworld import __version__
from mcpworld.core.episode_server import ToolBox, mount, no_resources, running, text_result
from mcpworld.core.security import Exposure
from mcpworld.core.tools import Absent, tool
from mcpworld.swe.instances import Instance
from mcpworld.swe.shell import ExecResult, format_result
from mcpworld.swe.workspace import WorkspaceError, WorkspacePool
from mcpworld.worldmodels.context import Budget, SWTContext, build_swt_context
from mcpworld.worldmodels.grader import SWRGrader
from mcpworld.worldmodels.llm_pool import ModelPool, parse_urls
from mcpworld.worldmodels.repo import base_commit, patched_checkout
from mcpworld.worldmodels.swr import DEFAULT_K, SWR, SWRScorer
from mcpworld.worldmodels.swt import SWT, SimulatorError
from mcpworld.worldmodels.vllm import SWR_NAME, SWT_NAME

BASE_PATH = "/world-models"
MAX_ARGUMENT_BYTES = 1024 * 1024


class UnknownInstance(LookupError):
    """The tool named an instance this server does not have; the message lists some it has."""

    def __str__(self) -> str:
        return str(self.args[0])


class ModelServer:
    """A low-level MCP server whose tools are typed functions of the server itself (`mcpworld.core.tools`)."""

    name: str
    title: str
    description: str
    functions: list[Callable[..., Any]]

    def __init__(self, instances: list[Instance]):
        if not instances:
            raise ValueError("a world-model server needs at least one instance")
        self.instances = {i.instance_id: i for i in instances}
        self.toolbox = ToolBox(self.functions, max_argument_bytes=MAX_ARGUMENT_BYTES,
                               expected=(UnknownInstance, WorkspaceError))
        self.server: Server[Any] = Server(
            f"io.mcpworld/{self.name}", version=__version__, title=self.title, description=self.description,
            instructions=self.description, on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            get_tool_input_schema=self.toolbox.input_schema, **no_resources())

    def instance(self, instance_id: str) -> Instance:
        found = self.instances.get(instance_id)
        if found is None:
            known = ", ".join(sorted(self.instances)[:20])
            raise UnknownInstance(f"unknown instance {instance_id!r}; known: {known}")
        return found

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.toolbox.tools)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        call = self.toolbox.prepare(params)
        if isinstance(call, types.CallToolResult):
            return call
        return await self.toolbox.run(call, self)

    def close(self) -> None:  # pragma: no cover - overridden
        pass


def _d(text: str) -> Any:
    return Field(description=text)


@tool(description="Predict what running a shell command prints in an SWE instance's repository, with an optional "
                  "patch applied, without running it (SWT world model). Returns stdout, stderr and exit_code.")
async def simulate(
    model: SWTServer,
    instance_id: Annotated[str, _d("The SWE instance whose repository the command runs in.")],
    command: Annotated[str, _d("The shell command, run in the repository root.")],
    patch: Annotated[str | Absent, _d("Unified diff applied to the base commit first (default none).")] = None,
) -> types.CallToolResult:
    """SWT's prediction from a throwaway checkout with `patch` applied; a model failure is a tool error."""
    instance = model.instance(instance_id)
    ctx = await anyio.to_thread.run_sync(model.context, instance, command, patch or "")
    try:
        p = await model.swt.predict(ctx)
    except SimulatorError as exc:
        return text_result(f"simulator failed: {exc}", error=True)
    result = ExecResult(p.stdout, p.stderr, p.exit_code)
    return text_result(format_result(result, 0), structured={"stdout": p.stdout, "stderr": p.stderr,
                                                             "exit_code": p.exit_code})


@tool(description="Judge a patch for an SWE instance without running tests (SWR world model): k samples of a "
                  "pytest-style report and a 0/1 reward, averaged. An empty patch scores 0.")
async def score(
    model: SWRServer,
    instance_id: str,
    patch: Annotated[str, _d("The candidate fix as a unified diff.")],
    k: Annotated[Annotated[int, Field(ge=1, le=16)] | Absent, _d(f"Samples (default {DEFAULT_K}).")] = None,
) -> types.CallToolResult:
    """SWR's mean reward over k samples; a result with no usable sample is a tool error that says so."""
    result = await model.scorer.score(model.instance(instance_id), patch, k)
    data = result.to_dict()
    if result.score is None:
        return text_result(f"SWR result invalid: none of the {result.invalid} samples was usable: "
                           + "; ".join(result.errors)[:2000], error=True, structured=data)
    text = (f"score {result.score:.3f} ({result.status}; {result.valid} valid, {result.invalid} invalid samples)"
            + (f"\n\n{result.samples[0].test_report}" if result.samples else ""))
    return text_result(text, structured=data)


class SWTServer(ModelServer):
    functions = [simulate]
    name = SWT_NAME
    title = "SWT (terminal world model)"
    description = "Predicts the output of shell commands in SWE repositories without running them."

    def __init__(self, swt: SWT, instances: list[Instance], pool: WorkspacePool | None = None,
                 include_gold: bool = False, budget: Budget | None = None):
        self.swt, self.include_gold, self.budget = swt, include_gold, budget or Budget()
        self.pool = pool or WorkspacePool(warm=0)
        self._analysis: dict[str, str] = {}
        super().__init__(instances)

    def context(self, instance: Instance, command: str, patch: str) -> SWTContext:
        """Blocking: a checkout with `patch`, read for SWT's context, then removed."""
        with patched_checkout(instance, patch, self.pool) as ws:
            ctx = build_swt_context(instance, command, ws.root, base_commit(ws.root, instance),
                                    include_gold=self.include_gold, budget=self.budget,
                                    analysis=self._analysis.get(instance.instance_id))
            self._analysis.setdefault(instance.instance_id, ctx.analysis)  # computed once per instance
            return ctx

    def close(self) -> None:
        self.pool.close_all()


class SWRServer(ModelServer):
    functions = [score]
    name = SWR_NAME
    title = "SWR (reward world model)"
    description = "Scores patches for SWE instances like a test run would, without running tests."

    def __init__(self, scorer: SWRScorer):
        self.scorer = scorer
        super().__init__(list(scorer.instances.values()))

    def close(self) -> None:
        self.scorer.close()


# -- records and mounting ----------------------------------------------------------------------------------------

def world_model_path(name: str) -> str:
    return f"{BASE_PATH}/{name}/mcp"


def world_model_record(name: str, base_url: str | None, facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """server.json for SWT or SWR, kind world-model, HTTP at base_url/world-models/<name>/mcp and over stdio."""
    from mcpworld.registry.records import local_record

    about = {SWT_NAME: ("SWT: predicts shell command output in SWE repositories (world model)", "SWT"),
             SWR_NAME: ("SWR: scores SWE patches like a test run, without running tests (world model)", "SWR")}
    description, title = about[name]
    return local_record(name, description, "world-model", title=title,
                        url=f"{base_url.rstrip('/')}{world_model_path(name)}" if base_url else None,
                        stdio_args=["serve", "world-model", name, "--stdio"],
                        facts={"tags": ["world-model", "swe", name], "tools": 1, **(facts or {})})


@dataclass
class WorldModelConfig:
    """Endpoints and options; `from_env` reads MCPWORLD_SWT_URL / MCPWORLD_SWR_URL (comma-separated replicas)."""

    swt_url: str | None = None
    swr_url: str | None = None
    swt_model: str = SWT_NAME
    swr_model: str = SWR_NAME
    api_key: str | None = None
    instances_file: str | None = None  # None: the shipped instances
    k: int = DEFAULT_K
    timeout_s: float = 120.0
    strategy: str = "round_robin"
    include_gold: bool = False

    @classmethod
    def from_env(cls, **overrides: Any) -> WorldModelConfig:
        env = os.environ
        values: dict[str, Any] = {
            "swt_url": env.get("MCPWORLD_SWT_URL") or None, "swr_url": env.get("MCPWORLD_SWR_URL") or None,
            "swt_model": env.get("MCPWORLD_SWT_MODEL", SWT_NAME), "swr_model": env.get("MCPWORLD_SWR_MODEL", SWR_NAME),
            "instances_file": env.get("MCPWORLD_SWE_INSTANCES") or None,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def pool(self, which: str) -> ModelPool | None:
        url, model = (self.swt_url, self.swt_model) if which == SWT_NAME else (self.swr_url, self.swr_model)
        if not parse_urls(url):
            return None
        return ModelPool.from_urls(url, model, self.api_key, timeout_s=self.timeout_s,  # type: ignore[arg-type]
                                   strategy=self.strategy)

    def instances(self) -> list[Instance]:
        from mcpworld.swe.builder import builtin_instances
        from mcpworld.swe.instances import load_instances

        return load_instances(self.instances_file) if self.instances_file else builtin_instances()


@dataclass
class MountedWorldModel:
    """One world-model server ready to mount: call `routes` before `running_world_models`."""

    name: str
    server: Server[Any]
    closer: Callable[[], None]
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        return world_model_path(self.name)

    def record(self, base_url: str) -> dict[str, Any]:
        return world_model_record(self.name, base_url, self.facts)

    def routes(self, host: str = "127.0.0.1", exposure: Exposure | None = None) -> list[Any]:
        """The Mount at /world-models/<name>/mcp; beyond loopback it needs the registry token (core.security)."""
        return [mount(f"{BASE_PATH}/{self.name}", self.server, exposure or Exposure.of(host))]


def build_swt_server(config: WorldModelConfig, instances: list[Instance] | None = None) -> SWTServer | None:
    models = config.pool(SWT_NAME)
    if models is None:
        return None
    return SWTServer(SWT(models), instances or config.instances(), include_gold=config.include_gold)


def build_swr_server(config: WorldModelConfig, instances: list[Instance] | None = None) -> SWRServer | None:
    models = config.pool(SWR_NAME)
    if models is None:
        return None
    return SWRServer(SWRScorer.of(SWR(models, k=config.k), instances or config.instances()))


def world_model_servers(config: WorldModelConfig | None = None) -> list[MountedWorldModel]:
    """The SWT and/or SWR servers whose endpoints are configured (none when neither is)."""
    config = config or WorldModelConfig.from_env()
    out: list[MountedWorldModel] = []
    instances: list[Instance] | None = None
    for name, build in ((SWT_NAME, build_swt_server), (SWR_NAME, build_swr_server)):
        if config.pool(name) is None:
            continue
        instances = instances or config.instances()
        srv = build(config, instances)
        if srv is not None:
            model = config.swt_model if name == SWT_NAME else config.swr_model
            out.append(MountedWorldModel(name, srv.server, srv.close,
                                         {"model": model, "tasks": len(instances)}))
    return out


@contextlib.asynccontextmanager
async def running_world_models(mounted: list[MountedWorldModel]) -> AsyncIterator[None]:
    """Run each mounted server's HTTP endpoint (inside the app's lifespan); clean up on the way out."""
    async with running([m.server for m in mounted], [m.closer for m in mounted]):
        yield


def swr_grader(config: WorldModelConfig, instances: list[Instance]) -> SWRGrader | None:
    """SWR as the SWE server's grader when an SWR endpoint is configured (simulated mode), else None."""
    models = config.pool(SWR_NAME)
    if models is None:
        return None
    return SWRGrader(SWRScorer.of(SWR(models, k=config.k), instances))
