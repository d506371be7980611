"""`mcpworld up`: the registry, every world over HTTP, registered and health-checked, on one port.

Composition only: each part (registry API, registry MCP server, world host) is built by its own module.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from mcpworld.core.episode_server import endpoint_app
from mcpworld.core.paths import home, up_state_file
from mcpworld.core.security import Exposure, public_host
from mcpworld.core.serving import DirectEndpoints
from mcpworld.core.workers import port_free
from mcpworld.registry.api import create_app
from mcpworld.registry.health import check_all
from mcpworld.registry.records import local_record
from mcpworld.registry.store import RegistryStore
from mcpworld.swe.server import SWE_PATH, SWEServer, running_swe, swe_routes
from mcpworld.swe.server import TOOLS as SWE_TOOLS
from mcpworld.worldmodels.servers import MountedWorldModel, running_world_models
from mcpworld.worlds.host import play_path, running, world_mount, world_path, world_routes
from mcpworld.worlds.loader import discover
from mcpworld.worlds.server import WorldServer

logger = logging.getLogger(__name__)


class AlreadyRunning(RuntimeError):
    pass


@dataclass
class Stack:
    """What `up` serves: where, with which token, and which world servers.

    `allow_hosts`: the names clients may use for this machine when `host` is not loopback (`--allow-host`).
    """

    host: str
    port: int
    store: RegistryStore
    token: str
    worlds: list[WorldServer]
    health_interval_s: float = 60.0
    swe: SWEServer | None = None
    world_models: list[MountedWorldModel] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    allow_hosts: tuple[str, ...] = ()
    interactive: bool = False  # worlds add start_task/check_task, so a person in any MCP client can play a task
    primary: bool = True  # publishes the records and runs the health checks (one process of `--workers N`)
    # builds the servers of worlds installed while `up` runs (names -> servers); None: serve only those given
    add_worlds: Callable[[list[str]], list[WorldServer]] | None = None
    play: list[WorldServer] = field(default_factory=list)  # each world for people: /play/<name>/mcp (`play_server`)
    poll_s: float = 2.0  # how often the installed worlds are listed again for new ones
    # `up --ray`: the worlds are served by Ray actors (`app.cluster.Placement`), registered as the records' replicas;
    # this process keeps the registry, the SWE sandbox and the world models
    cluster: Any = None

    @property
    def base_url(self) -> str:
        """The URL records advertise: a wildcard bind (0.0.0.0) is named by --allow-host or this machine's name."""
        host = public_host(self.host, self.allow_hosts)
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.port}"

    @property
    def exposure(self) -> Exposure:
        return Exposure.of(self.host, self.token, self.allow_hosts)

    def play_server(self, server: WorldServer) -> WorldServer:
        """The world as people play it from an HTTP client: start_task/check_task listed, its own episodes, the
        same runtime. With --interactive the training endpoint is that already."""
        if self.interactive:
            return server
        return WorldServer(server.runtime, server.episodes.limits, interactive=True, token=self.token)


def world_records(stack: Stack) -> list[dict[str, Any]]:
    return [world_record(stack, s) for s in stack.worlds]


def world_record(stack: Stack, server: WorldServer) -> dict[str, Any]:
    """The server.json record of one world `stack` serves."""
    w = server.runtime.world
    remote = stack.cluster is None  # on Ray the remotes are the actors' (replicas), none of this process's
    return local_record(
        w.name, w.description, "world", title=w.title, version=w.version,
        url=stack.base_url + world_path(w.name) if remote else None,
        play_url=stack.base_url + play_path(w.name) if remote else None,
        stdio_args=["serve", "world", w.name, "--stdio", *(["--interactive"] if stack.interactive else [])],
        facts={"tags": w.tags, "tools": len(server.runtime.tools), "tasks": len(server.runtime.tasks)})


def swe_record(base_url: str, sw: SWEServer | None = None) -> dict[str, Any]:
    """The server.json record for the SWE sandbox served at `base_url`/swe/mcp (and over stdio)."""
    facts: dict[str, Any] = {"tags": ["swe", "coding", "swe-bench"],
                             "tools": len(SWE_TOOLS)}
    if sw is not None:
        facts["tasks"] = len(sw.instances)
    return local_record("swe", "SWE sandbox: fix issues in repositories with editor, shell, search and LSP tools",
                        "swe", title="SWE sandbox", url=f"{base_url.rstrip('/')}{SWE_PATH}",
                        stdio_args=["serve", "swe", "--stdio"], facts=facts)


def build_app(stack: Stack) -> Any:
    """One app, its parts mounted side by side: every world at /worlds/<name>/mcp, the SWE sandbox, the world
    models, and the registry (REST, its MCP server) for every other path; the worlds registered and
    health-checked while it runs.

    Off loopback every request's Host/Origin is checked, and the world, SWE and world-model endpoints need the
    registry token (`mcpworld.core.security.Exposure`); the registry's reads stay open.
    """
    exposure = stack.exposure
    registry = create_app(stack.store, stack.token, host=stack.host, exposure=exposure)

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        stack.records = world_records(stack)
        if stack.swe is not None:
            stack.records.append(swe_record(stack.base_url, stack.swe))
        stack.records += [m.record(stack.base_url) for m in stack.world_models]
        for record in stack.records if stack.primary else []:
            stack.store.publish(record, replace=True)
        if stack.cluster is not None:  # the actors serve and are registered before `up` says it is up
            stack.cluster.records = [(r["name"], r["version"], world_path(s.runtime.world.name))
                                     for r, s in zip(stack.records, stack.worlds)]
            await anyio.to_thread.run_sync(stack.cluster.start, stack.store)
        swe = running_swe(stack.swe) if stack.swe is not None else contextlib.nullcontext()
        async with registry.router.lifespan_context(registry), running(stack.worlds if local else []), \
                running(people), swe, \
                running_world_models(stack.world_models), contextlib.AsyncExitStack() as added, \
                anyio.create_task_group() as tg:
            if stack.primary:
                tg.start_soon(_health_loop, stack)
            if stack.add_worlds is not None:
                tg.start_soon(_serve_new_worlds, stack, app, added)
            if stack.cluster is not None:
                tg.start_soon(stack.cluster.keep, stack.store)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
                if stack.cluster is not None:
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(stack.cluster.stop, stack.store)

    local = stack.cluster is None  # on Ray the actors serve the worlds
    routes = world_routes(stack.worlds if local else [], stack.host, exposure)
    people = [s for s in stack.play if s not in stack.worlds] if local else []  # --interactive: the same endpoints
    routes += [world_mount(s, exposure, "/play") for s in stack.play] if local else []
    if stack.cluster is not None:
        routes += cluster_routes(stack)
    if stack.swe is not None:
        routes += swe_routes(stack.swe, stack.host, exposure)
    for model in stack.world_models:
        routes += model.routes(stack.host, exposure)
    app = endpoint_app(routes, lambda: {"servers": stack.store.count()}, lifespan, exposure, fallback=registry)
    return app


def cluster_routes(stack: Stack) -> list[Any]:
    """`up --ray`'s replicas: GET /cluster/replicas lists them; POST {"replicas": N} (registry token) scales to N
    while runs play (new actors are registered; leaving ones drain first)."""
    import secrets

    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def replicas(request: Request) -> JSONResponse:
        if request.method == "POST":
            given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not secrets.compare_digest(given.encode(), stack.token.encode()):
                return JSONResponse({"error": "scaling needs 'Authorization: Bearer <registry token>'",
                                     "status": 401}, status_code=401)
            try:
                wanted = int((await request.json())["replicas"])
                if not 1 <= wanted <= 4096:
                    raise ValueError(wanted)
            except (ValueError, KeyError, TypeError):
                return JSONResponse({"error": 'send {"replicas": N} with N from 1 to 4096', "status": 400},
                                    status_code=400)
            await anyio.to_thread.run_sync(stack.cluster.scale, stack.store, wanted)
        return JSONResponse({"replicas": stack.cluster.status()})

    return [Route("/cluster/replicas", replicas, methods=["GET", "POST"])]


async def _serve_new_worlds(stack: Stack, app: DirectEndpoints, added: contextlib.AsyncExitStack) -> None:
    """Serve each world installed while `up` runs (`mcpworld world new`, `synth install`): list the installed
    worlds every `poll_s`, mount a new one beside the others, start it and (primary) publish its record."""
    assert stack.add_worlds is not None
    tried = {s.runtime.world.name for s in stack.worlds}
    while True:
        await anyio.sleep(stack.poll_s)
        new = [r.name for r in discover() if r.name not in tried]
        if not new:
            continue
        tried.update(new)
        servers = await anyio.to_thread.run_sync(stack.add_worlds, new)  # imports the packages: off the loop
        for server in servers:
            player = stack.play_server(server)
            for mount in (world_mount(server, stack.exposure), world_mount(player, stack.exposure, "/play")):
                routes = app.app.router.routes
                routes.insert(len(routes) - 1, mount)  # before the registry, which answers every other path
                app.add(mount)
            await added.enter_async_context(running([server] if player is server else [server, player]))
            stack.worlds.append(server)
            stack.play.append(player)
            record = world_record(stack, server)
            stack.records.append(record)
            if stack.primary:
                stack.store.publish(record, replace=True)
                logger.warning("serving %s, installed while up runs, at %s", server.runtime.world.name,
                               stack.base_url + world_path(server.runtime.world.name))


async def _health_loop(stack: Stack) -> None:
    await anyio.sleep(0.5)  # let the server start accepting connections first
    names = [r["name"] for r in stack.records]
    while True:
        try:
            await check_all(stack.store, names, token=stack.token)
        except Exception:  # a check must never take `up` down
            logger.exception("health check failed")
        await anyio.sleep(stack.health_interval_s)


# -- one `up` at a time ------------------------------------------------------------------------------------

def lock_path() -> Path:
    return up_state_file()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def acquire(stack: Stack) -> None:
    """Refuse to start beside another `up` (same MCPWORLD_HOME) or on a port something else holds."""
    path = lock_path()
    if path.is_file():
        try:
            other = json.loads(path.read_text())
        except ValueError:
            other = {}
        if other.get("pid") and _alive(int(other["pid"])) and other["pid"] != os.getpid():
            raise AlreadyRunning(
                f"mcpworld up is already running (pid {other['pid']}) at {other.get('url')}; use it, or stop it "
                f"with Ctrl-C in its terminal (or `kill {other['pid']}`)"
            )
    # SO_REUSEADDR as the server binds: a port whose last connections sit in TIME_WAIT (an `up` just stopped) is
    # free, while one another program listens on is not.
    if not port_free(stack.host, stack.port):
        raise AlreadyRunning(f"port {stack.port} on {stack.host} is already in use by another program; "
                             "pass --port to pick another")
    path.write_text(json.dumps({"pid": os.getpid(), "url": stack.base_url}))


def release() -> None:
    path = lock_path()
    with contextlib.suppress(FileNotFoundError, ValueError):
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()


def banner(stack: Stack, token_is_new: bool) -> str:
    """What `up` prints once its port answers: where each part is, the token, and what to do next (short: the
    client configs are one `registry export` away, not pasted here)."""
    base = stack.base_url
    names = [s.runtime.world.name for s in stack.worlds]
    first = names[0] if names else "<world>"
    lines = [f"mcpworld is up at {base}", "",
             f"  registry   {base}/v0/servers  (API docs {base}/docs, MCP {base}/registry/mcp)",
             f"  worlds     {base}/worlds/<name>/mcp  ({len(names)}: {', '.join(names) or 'none'})",
             f"  play       {base}/play/<name>/mcp  (for people: start_task, play, check_task)"]
    if stack.cluster is not None:
        slots = [s for s in stack.cluster.slots if s.url]
        lines[2:4] = [f"  worlds     on {len(slots)} Ray replica(s), each at <replica>/worlds/<name>/mcp "
                      f"({len(names)}: {', '.join(names) or 'none'}); the registry lists them as remotes",
                      *(f"             {s.url}  ({s.node})" for s in slots)]
    if stack.swe is not None:
        lines.append(f"  swe        {base}{SWE_PATH}")
    for model in stack.world_models:
        lines.append(f"  {model.name:<10} {base}{model.path}")
    token_note = f"(new, shown once; saved in {home() / 'registry.token'})" if token_is_new else \
        f"(from MCPWORLD_REGISTRY_TOKEN or {home() / 'registry.token'})"
    lines.append(f"  token      {stack.token if token_is_new else stack.token[:4] + '…'}  {token_note}")
    exposure = stack.exposure
    if exposure.exposed:
        lines += ["", f"  bound to {stack.host}: world, swe and world-model endpoints need 'Authorization: Bearer "
                  "<token>'", "  (mcpworld clients: export MCPWORLD_REGISTRY_TOKEN=<token>)",
                  f"  Host names accepted: {', '.join(exposure.allowed_hosts)} (add more with --allow-host)"]
    lines += ["", "Next, in another terminal:",
              "  mcpworld registry export --format claude-code -o .mcp.json   # play in Claude Code "
              "(or vscode, cursor, claude-desktop)",
              f"  mcpworld run --server {first} --policy oracle               # play every task with the reference",
              "  mcpworld tui                                                 # browse and drive every server",
              "", "Press Ctrl-C to stop."]
    return "\n".join(lines)
