"""The registry's REST API: the official MCP Registry API (OpenAPI 2025-12-01), served at /v0.1 (stable) and /v0.

Reads are open; writes (publish, status changes, health checks) need a bearer token: the registry token, or, when
anonymous publishing is on, a short-lived token from `POST /v0/auth/none` that may write only names under
`io.modelcontextprotocol.anonymous/` (what `mcp-publisher login none` gets from the official registry). Every
error answers one shape: `{"error": message, "status": code}`, plus `errors: [{path, message}]` when fields are
wrong. Bound beyond loopback, every request's Host and Origin are checked too (`mcpworld.core.security.Exposure`);
`cors_origins` lets a browser UI on those origins call the REST API.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from mcpworld import __version__
from mcpworld.core.episode_server import endpoint, running
from mcpworld.core.security import Exposure, ExposureMiddleware
from mcpworld.registry.mcp_server import registry_mcp_server
from mcpworld.registry.records import ANONYMOUS_NAMESPACE, MAX_RECORD_BYTES, RecordError, validate_record
from mcpworld.registry.store import Conflict, NoChange, NotFound, RegistryStore

ANONYMOUS_TTL_S = 300.0  # upstream's registry tokens live five minutes
CORS_ENV = "MCPWORLD_CORS_ORIGINS"
ANONYMOUS_ENV = "MCPWORLD_REGISTRY_ANONYMOUS"


class StatusChange(BaseModel):
    """The official StatusUpdateRequest."""

    status: Literal["active", "deprecated", "deleted"]
    statusMessage: str | None = Field(default=None, max_length=500)


def error_body(status: int, message: str, errors: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """The one error shape of every registry answer: the official `{error}`, the status, and field errors."""
    body: dict[str, Any] = {"error": message, "status": status}
    if errors:
        body["errors"] = errors
    return body


def _fail(status: int, message: str, errors: list[dict[str, str]] | None = None) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="mcpworld"'} if status == 401 else None
    return JSONResponse(error_body(status, message, errors), status_code=status, headers=headers)


class _Tokens:
    """Who may write: the registry token anything; an anonymous token (minted by /auth/none, in memory, short-lived)
    only names in the anonymous namespace."""

    def __init__(self, token: str, anonymous: bool):
        self.token, self.anonymous = token, anonymous
        self.minted: dict[str, float] = {}  # anonymous token -> expiry (unix seconds)

    def mint(self) -> tuple[str, int]:
        now = time.time()
        self.minted = {t: exp for t, exp in self.minted.items() if exp > now}
        given = secrets.token_urlsafe(24)
        self.minted[given] = now + ANONYMOUS_TTL_S
        return given, int(self.minted[given])

    def check(self, request: Request, name: str | None) -> None:
        """Raise 401/403 unless the request's bearer token may write `name` (None: any name; registry token only)."""
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        given = given.strip()
        if scheme.lower() != "bearer" or not given:
            raise HTTPException(401, "missing bearer token: send 'Authorization: Bearer <registry token>'")
        if secrets.compare_digest(given.encode(), self.token.encode()):
            return
        expiry = self.minted.get(given)
        if expiry is None:
            raise HTTPException(401, "wrong registry token")
        if expiry <= time.time():
            raise HTTPException(401, "expired anonymous token: get a new one from POST /v0/auth/none")
        if name is None or not name.startswith(ANONYMOUS_NAMESPACE):
            raise HTTPException(403, f"an anonymous token may only write names under {ANONYMOUS_NAMESPACE}; "
                                     "use the registry token for other names")


def _read_body_error(body: bytes) -> tuple[Any, JSONResponse | None]:
    try:
        return json.loads(body), None
    except ValueError:
        return None, _fail(422, "body is not JSON", [{"path": "$", "message": "invalid JSON"}])


async def _capped_json(request: Request) -> tuple[Any, JSONResponse | None]:
    """The JSON body, read without ever buffering more than the record cap (whatever Content-Length said)."""
    message = f"server.json is larger than {MAX_RECORD_BYTES // 1024} KiB (the registry's cap per record)"
    too_big = _fail(413, message, [{"path": "$", "message": message}])
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_RECORD_BYTES:
        return None, too_big
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_RECORD_BYTES:
            return None, too_big
    return _read_body_error(bytes(body))


def registry_router(store: RegistryStore, tokens: _Tokens) -> APIRouter:
    """The API's routes; `tokens` is shared by every prefix, so a token minted at /v0 writes at /v0.1 too."""
    router = APIRouter()

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

    @router.get("/servers/{name:path}/versions", summary="All versions of a server, newest first")
    def list_versions(name: str, include_deleted: bool = False) -> dict[str, Any]:
        try:
            servers = store.versions(name, include_deleted)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None
        return {"servers": servers, "metadata": {"count": len(servers)}}

    @router.get("/servers/{name:path}/versions/{version}", summary="One version (or 'latest')")
    def get_version(name: str, version: str, include_deleted: bool = False) -> dict[str, Any]:
        try:
            return store.get(name, version, include_deleted)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None

    @router.post("/publish", summary="Publish a server.json")
    async def publish(request: Request) -> JSONResponse:
        if not request.headers.get("authorization"):  # refuse before reading any body
            tokens.check(request, None)
        doc, failed = await _capped_json(request)
        if failed is not None:
            return failed
        tokens.check(request, doc.get("name") if isinstance(doc, dict) else None)
        try:
            return JSONResponse(store.publish(doc))
        except RecordError as exc:
            return _fail(422, "invalid server.json: " + str(exc)[:300], exc.errors)
        except Conflict as exc:
            raise HTTPException(409, str(exc)) from None

    @router.post("/validate", summary="Check a server.json without publishing it")
    async def validate(request: Request) -> JSONResponse:
        doc, failed = await _capped_json(request)
        if failed is not None:
            return failed
        try:
            validate_record(doc)
        except RecordError as exc:
            issues = [{"type": "schema", "severity": "error", **e} for e in exc.errors]
            return JSONResponse({"valid": False, "issues": issues})
        return JSONResponse({"valid": True, "issues": []})

    @router.post("/auth/none", summary="An anonymous publish token (names under io.modelcontextprotocol.anonymous/)")
    def auth_none() -> dict[str, Any]:
        if not tokens.anonymous:
            raise HTTPException(403, "anonymous publishing is off on this registry: use the registry token "
                                     f"(Authorization: Bearer …), or start the registry with {ANONYMOUS_ENV}=1")
        given, expires_at = tokens.mint()
        return {"registry_token": given, "expires_at": expires_at}

    @router.put("/servers/{name:path}/versions/{version}", summary="Update a version in place (not supported)")
    def update_version(name: str, version: str) -> None:
        raise HTTPException(501, "updating a published version is not supported by this registry (as in the "
                                 "official one): publish a new version, or change its status")

    @router.patch("/servers/{name:path}/versions/{version}/status", summary="Change the status of one version")
    def version_status(name: str, version: str, change: StatusChange, request: Request) -> dict[str, Any]:
        tokens.check(request, name)
        try:
            return store.set_status(name, version, change.status, change.statusMessage)[0]
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None
        except NoChange as exc:
            raise HTTPException(400, str(exc)) from None

    @router.patch("/servers/{name:path}/status", summary="Change the status of every version, in one transaction")
    def server_status(name: str, change: StatusChange, request: Request) -> dict[str, Any]:
        tokens.check(request, name)
        try:
            servers = store.set_status(name, None, change.status, change.statusMessage)
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None
        return {"updatedCount": len(servers), "servers": servers}

    @router.delete("/servers/{name:path}/versions/{version}", summary="Mark a version deleted")
    def delete_version(name: str, version: str, request: Request) -> dict[str, Any]:
        tokens.check(request, name)
        try:
            store.set_status(name, version, "deleted")
        except NoChange:
            pass  # already deleted: DELETE is idempotent
        except NotFound as exc:
            raise HTTPException(404, str(exc)) from None
        return store.get(name, version, include_deleted=True)

    @router.post("/health/check", summary="Check every server now (or the named ones)")
    async def health_check(request: Request, names: list[str] | None = None) -> dict[str, Any]:
        from mcpworld.registry.health import check_all

        tokens.check(request, None)
        return {"results": await check_all(store, names, token=tokens.token)}

    return router


class _RegistryCORS:
    """CORS for the REST API only (/v0, /v0.1), for the origins the operator named: a browser UI there may read it
    (and write with a token). Those origins are the operator's explicit choice, so the exposure guard's Origin check
    is not applied to them; MCP endpoints and every other origin are left exactly as they were."""

    def __init__(self, app: ASGIApp, origins: Sequence[str]):
        self.app, self.origins = app, tuple(origins)
        self.cors = CORSMiddleware(self._without_origin, allow_origins=list(origins),
                                   allow_methods=["GET", "POST", "PATCH", "DELETE", "OPTIONS"],
                                   allow_headers=["Authorization", "Content-Type"], max_age=600)

    async def _without_origin(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(k, v) for k, v in scope.get("headers") or [] if k.lower() != b"origin"]
        await self.app({**scope, "headers": headers}, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path", "").startswith("/v0"):
            origin = dict(scope.get("headers") or []).get(b"origin", b"").decode("latin-1")
            if origin and ("*" in self.origins or origin in self.origins):
                await self.cors(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _env_list(name: str) -> list[str]:
    return [v.strip().rstrip("/") for v in os.environ.get(name, "").split(",") if v.strip()]


def create_app(store: RegistryStore, token: str, *, host: str = "127.0.0.1", allow_hosts: Sequence[str] = (),
               exposure: Exposure | None = None, cors_origins: Sequence[str] | None = None,
               anonymous: bool | None = None) -> FastAPI:
    """The registry: REST at /v0.1 and /v0, its MCP server at /registry/mcp, GET /healthz.

    `mcpworld up` mounts it beside the worlds (`app/up.py`) and enters its lifespan. Bound beyond loopback
    (`host`), every request must name an allowed host (`allow_hosts`, default this machine's names) and come from
    no foreign browser origin; the registry's MCP server is read-only and needs no token.
    `cors_origins` (default $MCPWORLD_CORS_ORIGINS, comma-separated; `*` for any) may call the REST API from a
    browser. `anonymous` (default $MCPWORLD_REGISTRY_ANONYMOUS=1) turns on POST /v0/auth/none.
    """
    exposure = exposure or Exposure.of(host, token, allow_hosts)
    origins = list(cors_origins) if cors_origins is not None else _env_list(CORS_ENV)
    if anonymous is None:
        anonymous = os.environ.get(ANONYMOUS_ENV, "") in ("1", "true", "yes")
    registry_mcp = registry_mcp_server(store)
    mcp_app = endpoint(registry_mcp, exposure, auth=False)  # read-only: no token, Host/Origin checked

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with running([registry_mcp]):
            yield

    app = FastAPI(title="mcpworld registry", version=__version__, lifespan=lifespan,
                  description="MCP servers for agent environments: the official MCP Registry API at /v0.1 and /v0.")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _fail(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def request_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"path": "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e["loc"]),
                   "message": e["msg"]} for e in exc.errors()]
        return _fail(422, "invalid request: " + "; ".join(f"{e['path']}: {e['message']}" for e in errors)[:300],
                     errors)

    app.add_middleware(ExposureMiddleware, exposure=exposure, auth=False)  # on loopback too: Host and Origin
    if origins:
        app.add_middleware(_RegistryCORS, origins=origins)
    tokens = _Tokens(token, anonymous)
    for prefix in ("/v0.1", "/v0"):
        app.include_router(registry_router(store, tokens), prefix=prefix)

    @app.get("/v0/kinds", summary="How many servers of each kind")
    def kinds() -> dict[str, int]:
        return store.kinds()

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "servers": store.count()}

    app.mount("/registry", mcp_app)
    return app
