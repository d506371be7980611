"""The registry's store: one row per (server name, version), in SQLite by default or any SQLAlchemy URL.

SQLite runs in WAL mode with a busy timeout, so several processes can publish and check at once.
"""

from __future__ import annotations

import base64
import json
import os
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import NaiveDatetime
from sqlalchemy import Index, event, func, or_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import registry as sa_registry
from sqlmodel import Field, Session, SQLModel, create_engine, select

from mcpworld.core.paths import home
from mcpworld.registry.records import META_KEY, mcpworld_meta, validate_record

Status = Literal["active", "deprecated", "deleted"]
OFFICIAL = "io.modelcontextprotocol.registry/official"


class _Base(SQLModel, registry=sa_registry()):  # type: ignore[call-arg]
    pass


class ServerRow(_Base, table=True):
    __tablename__ = "server_version"
    __table_args__ = (Index("ix_name_version", "name", "version", unique=True),)
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True)
    version: str
    doc: str
    search_text: str = Field(index=True)
    kind: str = Field(index=True)
    status: str = "active"
    status_message: str | None = None
    is_latest: bool = Field(default=True, index=True)
    published_at: NaiveDatetime
    updated_at: NaiveDatetime = Field(index=True)


class HealthRow(_Base, table=True):
    __tablename__ = "health"
    name: str = Field(primary_key=True)
    status: str  # up | down
    latency_ms: float | None = None
    checked_at: NaiveDatetime
    error: str | None = None
    tools: int | None = None


class Conflict(Exception):
    """That version of that server is already published."""


class NotFound(LookupError):
    pass


def default_url() -> str:
    return os.environ.get("MCPWORLD_REGISTRY_DB") or f"sqlite:///{home() / 'registry.db'}"


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _iso(ts: datetime) -> str:
    return ts.replace(tzinfo=timezone.utc).isoformat().replace("+00:00", "Z")


def _search_text(doc: dict[str, Any]) -> str:
    meta = mcpworld_meta(doc)
    return " ".join([doc["name"], doc.get("title") or "", doc["description"], *meta.get("tags", [])]).lower()


class RegistryStore:
    """CRUD over server.json versions, shaped for the /v0 API."""

    def __init__(self, url: str | None = None):
        self.url = url or default_url()
        sqlite = self.url.startswith("sqlite")
        connect_args = {"timeout": 30, "check_same_thread": False} if sqlite else {}
        self.engine = create_engine(self.url, connect_args=connect_args)
        if sqlite:
            @event.listens_for(self.engine, "connect")
            def _pragmas(conn: Any, _: Any) -> None:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA busy_timeout=30000")
        _Base.metadata.create_all(self.engine)

    # -- writes ----------------------------------------------------------------------------------------

    def publish(self, doc: dict[str, Any], *, replace: bool = False) -> dict[str, Any]:
        """Add a version (Conflict if it exists, unless `replace`, which `mcpworld up` uses to stay idempotent)."""
        validate_record(doc)
        name, version, ts = doc["name"], doc["version"], _now()
        with Session(self.engine) as db:
            row = db.exec(select(ServerRow).where(ServerRow.name == name, ServerRow.version == version)).first()
            if row is not None and not replace:
                raise Conflict(f"{name} version {version} is already published; publish a new version")
            if row is None:
                row = ServerRow(name=name, version=version, doc="", search_text="", kind="", published_at=ts,
                                updated_at=ts)
            row.doc = json.dumps(doc)
            row.search_text = _search_text(doc)
            row.kind = mcpworld_meta(doc).get("kind", "external")
            row.status = "active"
            row.updated_at = ts
            db.exec(update(ServerRow).where(ServerRow.name == name).values(is_latest=False))
            row.is_latest = True
            db.add(row)
            try:
                db.commit()
            except IntegrityError:
                raise Conflict(f"{name} version {version} is already published") from None
            db.refresh(row)
            return self._response(row, None)

    def set_status(self, name: str, version: str | None, status: Status, message: str | None = None) -> int:
        """Deprecate, delete or reactivate one version (or all versions when `version` is None)."""
        with Session(self.engine) as db:
            query = select(ServerRow).where(ServerRow.name == name)
            if version is not None:
                query = query.where(ServerRow.version == version)
            rows = list(db.exec(query))
            if not rows:
                raise NotFound(f"no server {name!r}" + (f" version {version!r}" if version else ""))
            for row in rows:
                row.status, row.status_message, row.updated_at = status, message, _now()
                db.add(row)
            db.commit()
            return len(rows)

    def record_health(self, name: str, status: str, latency_ms: float | None, error: str | None,
                      tools: int | None = None) -> None:
        with Session(self.engine) as db:
            db.merge(HealthRow(name=name, status=status, latency_ms=latency_ms, checked_at=_now(), error=error,
                               tools=tools))
            db.commit()

    # -- reads -----------------------------------------------------------------------------------------

    def _response(self, row: ServerRow, health: HealthRow | None) -> dict[str, Any]:
        doc = json.loads(row.doc)
        if health is not None:
            meta = doc.setdefault("_meta", {}).setdefault(META_KEY, {"kind": "external"})
            meta["health"] = {"status": health.status, "latency_ms": health.latency_ms,
                              "checked_at": _iso(health.checked_at), "error": health.error}
        official = {"status": row.status, "publishedAt": _iso(row.published_at),
                    "updatedAt": _iso(row.updated_at), "isLatest": row.is_latest}
        if row.status_message:
            official["statusMessage"] = row.status_message
        return {"server": doc, "_meta": {OFFICIAL: official}}

    def _with_health(self, db: Session, rows: list[ServerRow]) -> list[dict[str, Any]]:
        names = {r.name for r in rows}
        health = {h.name: h for h in db.exec(select(HealthRow).where(HealthRow.name.in_(names)))} if names else {}
        return [self._response(r, health.get(r.name)) for r in rows]

    def list(self, *, search: str | None = None, cursor: str | None = None, limit: int = 30,
             updated_since: datetime | None = None, version: str | None = None, kind: str | None = None,
             include_deleted: bool = False) -> tuple[list[dict[str, Any]], str | None]:
        """One page of records, ordered by name then version; returns (records, next cursor)."""
        limit = max(1, min(limit, 100))
        query = select(ServerRow)
        if search:
            query = query.where(ServerRow.search_text.contains(search.lower()))
        if kind:
            query = query.where(ServerRow.kind == kind)
        if version == "latest":
            query = query.where(ServerRow.is_latest == True)  # noqa: E712
        elif version:
            query = query.where(ServerRow.version == version)
        if updated_since is not None:
            query = query.where(ServerRow.updated_at >= updated_since.astimezone(timezone.utc).replace(tzinfo=None))
        elif not include_deleted:
            query = query.where(ServerRow.status != "deleted")
        if cursor:
            name, ver = decode_cursor(cursor)
            query = query.where(or_(ServerRow.name > name, (ServerRow.name == name) & (ServerRow.version > ver)))
        query = query.order_by(ServerRow.name, ServerRow.version).limit(limit + 1)
        with Session(self.engine) as db:
            rows = list(db.exec(query))
            page = rows[:limit]
            next_cursor = encode_cursor(page[-1].name, page[-1].version) if len(rows) > limit else None
            return self._with_health(db, page), next_cursor

    def versions(self, name: str) -> list[dict[str, Any]]:
        with Session(self.engine) as db:
            rows = list(db.exec(select(ServerRow).where(ServerRow.name == name).order_by(ServerRow.published_at)))
            if not rows:
                raise NotFound(f"no server {name!r}")
            return self._with_health(db, rows)

    def get(self, name: str, version: str = "latest") -> dict[str, Any]:
        with Session(self.engine) as db:
            query = select(ServerRow).where(ServerRow.name == name)
            query = query.where(ServerRow.is_latest == True) if version == "latest" else query.where(  # noqa: E712
                ServerRow.version == version)
            row = db.exec(query).first()
            if row is None:
                raise NotFound(f"no server {name!r}" + ("" if version == "latest" else f" version {version!r}"))
            return self._with_health(db, [row])[0]

    def count(self) -> int:
        with Session(self.engine) as db:
            return db.exec(select(func.count()).select_from(ServerRow)).one()

    def kinds(self) -> dict[str, int]:
        with Session(self.engine) as db:
            rows = db.exec(select(ServerRow.kind, func.count()).where(ServerRow.is_latest == True,  # noqa: E712
                                                                     ServerRow.status != "deleted")
                           .group_by(ServerRow.kind))
            return dict(rows.all())


def encode_cursor(name: str, version: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([name, version]).encode()).decode()


def decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        name, version = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return str(name), str(version)
    except Exception:
        raise ValueError(f"invalid cursor {cursor!r}: pass metadata.nextCursor from the previous page") from None
