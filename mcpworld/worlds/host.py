"""Run worlds: one world over stdio, or every world over Streamable HTTP at /worlds/<name>/mcp."""

from __future__ import annotations

import base64
import bisect
import contextlib
import gc
import json
import logging
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from mcpworld.core.episode_server import endpoint_app, mount
from mcpworld.core.episode_server import running as serve_endpoints
from mcpworld.core.security import Exposure
from mcpworld.core.serving import DirectEndpoints
from mcpworld.core.stdio import run_stdio
from mcpworld.worlds.episodes import EpisodeLimits
from mcpworld.worlds.loader import load_world, resolve
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.server import WorldServer

logger = logging.getLogger(__name__)


INDEX_PAGE, INDEX_MAX_PAGE = 30, 100  # the /worlds index pages as the registry's /v0/servers does


def load_runtime(name_or_path: str) -> WorldRuntime:
    """A world by catalog name or package path, loaded and with its seeded template built (seed errors now)."""
    runtime = WorldRuntime(load_world(resolve(name_or_path)))
    runtime.template(None)
    return runtime


def serve_stdio(server: WorldServer) -> None:
    """Serve one world on this process's stdin/stdout until the client hangs up (malformed lines get errors)."""
    run_stdio(server.server)


def world_path(name: str) -> str:
    return f"/worlds/{name}/mcp"


def play_path(name: str) -> str:
    """Where `mcpworld up` serves a world for people (start_task/check_task listed); training never uses it."""
    return f"/play/{name}/mcp"


def world_routes(servers: Sequence[WorldServer], host: str = "127.0.0.1",
                 exposure: Exposure | None = None) -> list[Route | Mount]:
    """Routes for an ASGI app hosting `servers`: each at /worlds/<name>/mcp, plus a GET /worlds index (which
    lists `servers` as they are at each request: `mcpworld up` appends worlds installed while it runs).

    Bound beyond loopback, each world endpoint checks Host/Origin and needs the registry token (see `Exposure`).
    """
    exposure = exposure or Exposure.of(host)

    async def index(request: Request) -> JSONResponse:
        by_name = {s.runtime.world.name: s for s in servers}
        ordered = sorted(by_name)
        try:
            names, next_cursor = index_page(ordered, request.query_params.get("cursor"),
                                            request.query_params.get("limit"))
        except ValueError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=400)
        base = str(request.base_url).rstrip("/")
        metadata: dict[str, Any] = {"count": len(names), "total": len(ordered)}
        if next_cursor:
            metadata["nextCursor"] = next_cursor
        return JSONResponse({"worlds": [index_entry(by_name[name], base) for name in names], "metadata": metadata})

    unique = {s.runtime.world.name: s for s in servers}.values()
    return [Route("/worlds", index), *(world_mount(s, exposure) for s in unique)]


def world_mount(server: WorldServer, exposure: Exposure, prefix: str = "/worlds") -> Mount:
    """The Mount serving one world at <prefix>/<name>/mcp, its hot path handed to the transport."""
    return mount(f"{prefix}/{server.runtime.world.name}", server.server, exposure, server.episodes.close_connection,
                 wire=server.wire)


def index_entry(server: WorldServer, base: str) -> dict[str, Any]:
    """A world in the /worlds index: what it offers and whether its starting state is built yet (never built here)."""
    runtime = server.runtime
    error = runtime.template_error(None)
    entry = {"name": runtime.world.name, "url": base + world_path(runtime.world.name), "title": runtime.world.title,
             "tools": len(runtime.tools), "tasks": len(runtime.tasks), "live_episodes": len(server.episodes),
             "seeded": runtime.has_template(None) and error is None}
    if error is not None:
        entry["error"] = error
    return entry


def index_page(names: Sequence[str], cursor: str | None, limit: str | None) -> tuple[list[str], str | None]:
    """One page of sorted `names` after `cursor`, as the registry pages (`?cursor=&limit=`, `nextCursor`)."""
    try:
        size = INDEX_PAGE if limit is None else int(limit)
    except ValueError:
        size = 0
    if not 1 <= size <= INDEX_MAX_PAGE:
        raise ValueError(f"invalid limit {limit!r}: pass a whole number from 1 to {INDEX_MAX_PAGE}")
    start = 0
    if cursor:
        try:
            after = json.loads(base64.urlsafe_b64decode(cursor.encode()))["after"]
            if not isinstance(after, str):
                raise ValueError(after)
        except (ValueError, TypeError, KeyError):
            raise ValueError(f"invalid cursor {cursor!r}: pass metadata.nextCursor from the previous page") from None
        start = bisect.bisect_right(names, after)
    page = list(names[start:start + size])
    more = start + size < len(names)
    cursor = base64.urlsafe_b64encode(json.dumps({"after": page[-1]}).encode()).decode() if more and page else None
    return page, cursor


@contextlib.asynccontextmanager
async def running(servers: Sequence[WorldServer]) -> AsyncIterator[None]:
    """Run the HTTP endpoints of mounted worlds (sub-app lifespans do not run by themselves); on the way out
    every open session ends and every episode is closed."""
    async with serve_endpoints([s.server for s in servers], [s.episodes.close_all for s in servers]):
        yield


def worlds_app(servers: Sequence[WorldServer], host: str = "127.0.0.1", *,
               exposure: Exposure | None = None) -> DirectEndpoints:
    """One ASGI app hosting every world. On loopback the SDK checks Host/Origin on the world endpoints; beyond it
    every route is Host/Origin-checked and the world endpoints need the registry token (`mcpworld.core.security`)."""
    exposure = exposure or Exposure.of(host)
    return endpoint_app(world_routes(servers, host, exposure), lambda: {"worlds": len(servers)},
                        lambda: running(servers), exposure)


def build_servers(names: Sequence[str], limits: EpisodeLimits, interactive: bool = False,
                  skip_broken: bool = False, token: str | None = None) -> list[WorldServer]:
    """WorldServers for `names`; with `skip_broken`, a world that fails to import is reported and left out.

    Lazy: no world's seed runs here. Its template is built on its first episode, where a failing seed is that
    world's error alone (`WorldUnavailable`), so hundreds of installed worlds start in the time their imports take.
    `token` is the secret that unlocks reference solutions (default: the local registry token).
    """
    out = []
    with _collector_paused():
        for name in names:
            try:
                runtime = WorldRuntime(load_world(resolve(name)))
                out.append(WorldServer(runtime, limits, interactive=interactive, token=token))
            except Exception as exc:
                if not skip_broken:
                    raise
                logger.warning("skipping world %s: %s", name, exc)
                print(f"warning: skipping world {name}: {exc}", file=sys.stderr)
    return out


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while worlds load: each full pass rescans every world loaded before, so
    with hundreds of worlds the collector, not the imports, took half the start-up (docs/benchmarks.md)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
