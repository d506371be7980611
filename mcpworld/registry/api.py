"""The registry's REST API, in the official MCP Registry's /v0 shapes (served at /v0 and /v0.1).

Reads are open; writes (publish, status changes, health checks) need the bearer token. Bound beyond loopback, every
request's Host and Origin are checked too (`mcpworld.core.security.Exposure`).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from mcpworld import __version__
from mcpworld.core.security import Exposure, ExposureMiddleware
from mcpworld.registry.mcp_server import registry_mcp_server
from mcpworld.registry.records import MAX_RECORD_BYTES, RecordError
from mcpworld.registry.store import Conflict, NotFound, RegistryStore, Status


class StatusChange(BaseModel):
    status: Status
    statusMessage: str | None = None


def _require_token(token: str):  # type: ignore[no-untyped-def]
    def check(request: Request) -> None:
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given:
            raise HTTPException(401, "missing bearer token: send 'Authorization: Bearer <registry token>'")
        if not secrets.compare_digest(given.strip(), token):
            raise HTTPException(401, "wrong registry token")

    return check


def registry_router(store: RegistryStore, token: str) -> APIRouter:
    router = APIRouter()
    auth = Depends(_require_token(token))

    @router.get("/servers", summary="List MCP servers")
    def list_servers(cursor: str | None = None, limit: int = Query(30, ge=1, le=100), search: str | None = None,
                     updated_since: datetime | None = None, version: str | None = None, kind: str | None = None,
                     include_deleted: bool = False) -> dict[str, Any]:
        try:
            servers, next_cursor = store.list(search=search, cursor=cursor, limit=limit,
                                              updated_since=updated_since, version=version, kind=kind,
                                              include_deleted=include_deleted)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        metadata: dict[str, Any] = {"count": len(servers)}
        if next_cursor:
            metadata["nextCursor"] = next_cursor
        return {"servers": servers, "metadata": metadata}

    @router.get("/servers/{name:path}/versions", summary="All versions of a server")
    def list_versions(name: str) -> dict[str, Any]:
        try:
            servers = store.versions(name)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None
        return {"servers": servers, "metadata": {"count": len(servers)}}

    @router.get("/servers/{name:path}/versions/{version}", summary="One version (or 'latest')")
    def get_version(name: str, version: str) -> dict[str, Any]:
        try:
            return store.get(name, version)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None

    @router.post("/publish", summary="Publish a server.json", dependencies=[auth])
    async def publish(request: Request) -> JSONResponse:
        message = f"server.json is larger than {MAX_RECORD_BYTES // 1024} KiB (the registry's cap per record)"
        too_big = JSONResponse({"error": message, "detail": message,
                                "errors": [{"path": "$", "message": message}]}, status_code=413)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_RECORD_BYTES:
            return too_big
        body = bytearray()
        async for chunk in request.stream():  # never buffer more than the cap, whatever the header said
            body += chunk
            if len(body) > MAX_RECORD_BYTES:
                return too_big
        try:
            doc = json.loads(bytes(body))
        except ValueError:
            return JSONResponse({"error": "body is not JSON", "errors": [{"path": "$", "message": "invalid JSON"}]},
                                status_code=422)
        try:
            return JSONResponse(store.publish(doc))
        except RecordError as exc:
            return JSONResponse({"error": "invalid server.json", "errors": exc.errors}, status_code=422)
        except Conflict as exc:
            raise HTTPException(409, str(exc)) from None

    @router.put("/servers/{name:path}/versions/{version}/status", dependencies=[auth],
                summary="Deprecate, delete or reactivate one version")
    def version_status(name: str, version: str, change: StatusChange) -> dict[str, Any]:
        try:
            store.set_status(name, version, change.status, change.statusMessage)
            return store.get(name, version)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None

    @router.put("/servers/{name:path}/status", dependencies=[auth], summary="Change the status of every version")
    def server_status(name: str, change: StatusChange) -> dict[str, Any]:
        try:
            return {"updated": store.set_status(name, None, change.status, change.statusMessage)}
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None

    @router.delete("/servers/{name:path}/versions/{version}", dependencies=[auth], summary="Mark a version deleted")
    def delete_version(name: str, version: str) -> dict[str, Any]:
        try:
            store.set_status(name, version, "deleted")
            return store.get(name, version)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None

    @router.post("/health/check", dependencies=[auth], summary="Check every server now (or the named ones)")
    async def health_check(names: list[str] | None = None) -> dict[str, Any]:
        from mcpworld.registry.health import check_all

        return {"results": await check_all(store, names, token=token)}

    return router


def create_app(store: RegistryStore, token: str, *, host: str = "127.0.0.1",
               extra: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
               allow_hosts: Sequence[str] = (), exposure: Exposure | None = None) -> FastAPI:
    """The registry: REST at /v0 (and /v0.1), its MCP server at /registry/mcp, GET /healthz.

    `extra` is a lifespan to run inside the registry's own (how `mcpworld up` adds the worlds). Bound beyond
    loopback (`host`), every request must name an allowed host (`allow_hosts`, default this machine's names) and
    come from no foreign browser origin; the registry's MCP server is read-only and needs no token.
    """
    exposure = exposure or Exposure.of(host, token, allow_hosts)
    registry_mcp = registry_mcp_server(store)
    mcp_app = exposure.mcp_app(registry_mcp, auth=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with registry_mcp.session_manager.run():
            if extra is None:
                yield
            else:
                async with extra(app):
                    yield

    app = FastAPI(title="mcpworld registry", version=__version__, lifespan=lifespan,
                  description="MCP servers for agent environments, in the official MCP Registry's /v0 shapes.")
    if exposure.exposed:
        app.add_middleware(ExposureMiddleware, exposure=exposure, auth=False)
    router = registry_router(store, token)
    app.include_router(router, prefix="/v0")
    app.include_router(router, prefix="/v0.1", include_in_schema=False)

    @app.get("/v0/kinds", summary="How many servers of each kind")
    def kinds() -> dict[str, int]:
        return store.kinds()

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "servers": store.count()}

    app.mount("/registry", mcp_app)
    return app
