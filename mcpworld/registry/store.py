"""The registry's store: one row per (server name, version), in SQLite by default or PostgreSQL (any SQLAlchemy URL).

SQLite runs in WAL mode with a busy timeout, so several processes can publish and check at once. PostgreSQL
(`postgresql://…`, the `postgres` extra's psycopg driver) lets several registry processes on several hosts share
one store: every read-modify-write of a server's rows (publish, status changes) first takes a transaction-scoped
advisory lock on the server's name, so two registries never lose each other's update nor leave two versions
marked latest; health and replicas are single-statement upserts (each replica its own row), so concurrent
checks and registrations never overwrite one another. SQLite serializes writers itself; a publish that races
another to insert the same version retries as an update.

Replicas (`add_replica`): more servers answering for one record (`mcpworld up --ray` registers each actor). A
response's `remotes` are the published ones plus the replicas that pass their health checks (all of them when
none does, so a client fails as an infrastructure error instead of falling back to a local launch), and its
`_meta` lists every replica with its state: clients spread over them with no configuration of their own.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import NaiveDatetime
from sqlalchemy import Index, delete, event, func, inspect, or_, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import registry as sa_registry
from sqlmodel import Field, Session, SQLModel, create_engine, select

from mcpworld.core.paths import home
from mcpworld.registry.records import OFFICIAL, REGISTRY_META, mcpworld_meta, validate_record

Status = Literal["active", "deprecated", "deleted"]


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
    status_changed_at: NaiveDatetime | None = None
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


class ReplicaRow(_Base, table=True):
    """One more server answering for (name, version): its URL, where it runs, and what its last check said."""
    __tablename__ = "replica"
    __table_args__ = (Index("ix_replica_name_version_url", "name", "version", "url", unique=True),)
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True)
    version: str
    url: str
    node: str | None = None
    status: str = "up"  # up | down
    error: str | None = None
    registered_at: NaiveDatetime
    checked_at: NaiveDatetime | None = None


class Conflict(Exception):
    """That version of that server is already published."""


class NotFound(LookupError):
    pass


class NoChange(ValueError):
    """A status change that changes nothing (the official API answers 400)."""


def default_url() -> str:
    return os.environ.get("MCPWORLD_REGISTRY_DB") or f"sqlite:///{home() / 'registry.db'}"


def engine_url(url: str) -> str:
    """`url` with a driver SQLAlchemy can load: PostgreSQL URLs without one (`postgresql://`, `postgres://`) use
    psycopg 3 (the `postgres` extra), and a clear error names the extra when it is missing."""
    scheme, sep, rest = url.partition("://")
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        from mcpworld.core.extras import require

        require("postgres", "psycopg", why=f"a PostgreSQL registry store ({scheme}://…)")
        return f"postgresql+psycopg{sep}{rest}"
    return url


def _lock_key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for a server name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


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
        self.engine = create_engine(engine_url(self.url), connect_args=connect_args, pool_pre_ping=not sqlite)
        self.postgres = self.engine.dialect.name == "postgresql"
        if sqlite:
            @event.listens_for(self.engine, "connect")
            def _pragmas(conn: Any, _: Any) -> None:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA busy_timeout=30000")
        if self.postgres:  # registries starting together on one database: one creates the tables, the rest wait
            with self.engine.begin() as conn:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _lock_key("mcpworld schema")})
                _Base.metadata.create_all(conn)
        else:
            _Base.metadata.create_all(self.engine)
        self._add_missing_columns()

    def _lock(self, db: Session, name: str) -> None:
        """Serialize this transaction's writes to `name`'s rows with every other registry's (PostgreSQL: an
        advisory lock held until commit; SQLite serializes writers itself)."""
        if self.postgres:
            db.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _lock_key(name)})

    def _upsert(self, db: Session, table: Any, values: dict[str, Any], keys: list[str]) -> None:
        """Insert `values`, or update the row with the same `keys`, in one statement (no read-then-write)."""
        if self.postgres:
            from sqlalchemy.dialects.postgresql import insert
        elif self.engine.dialect.name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:  # another database: the ORM's merge (fine for one registry process)
            db.merge(table(**values))
            return
        statement = insert(table).values(**values)
        db.execute(statement.on_conflict_do_update(index_elements=keys,
                                                   set_={k: v for k, v in values.items() if k not in keys}))

    def _add_missing_columns(self) -> None:
        """Stores made by older versions lack newer nullable columns: add them, keeping every row."""
        have = {c["name"] for c in inspect(self.engine).get_columns(ServerRow.__tablename__)}
        if "status_changed_at" not in have:
            with self.engine.begin() as conn:
                conn.execute(text(f"ALTER TABLE {ServerRow.__tablename__} ADD COLUMN status_changed_at TIMESTAMP"))

    # -- writes ----------------------------------------------------------------------------------------

    def publish(self, doc: dict[str, Any], *, replace: bool = False) -> dict[str, Any]:
        """Add a version (Conflict if it exists, unless `replace`, which `mcpworld up` uses to stay idempotent)."""
        validate_record(doc)
        for attempt in range(3):
            try:
                return self._publish(doc, replace)
            except IntegrityError:  # another process inserted this version between our read and our write
                if not replace or attempt == 2:
                    raise Conflict(f"{doc['name']} version {doc['version']} is already published") from None
        raise AssertionError("unreachable")

    def _publish(self, doc: dict[str, Any], replace: bool) -> dict[str, Any]:
        name, version, ts = doc["name"], doc["version"], _now()
        with Session(self.engine) as db:
            self._lock(db, name)
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
            db.commit()
            db.refresh(row)
            return self._response(row, None)

    def set_status(self, name: str, version: str | None, status: Status,
                   message: str | None = None) -> list[dict[str, Any]]:
        """Deprecate, delete or reactivate one version (or every version, in one transaction, when `version` is
        None); returns the changed records. NoChange when one version already has that status and message."""
        with Session(self.engine) as db:
            self._lock(db, name)
            query = select(ServerRow).where(ServerRow.name == name)
            if version is not None:
                query = query.where(ServerRow.version == version)
            rows = list(db.exec(query.order_by(ServerRow.published_at)))
            if not rows:
                raise NotFound(f"no server {name!r}" + (f" version {version!r}" if version else ""))
            if version is not None and (rows[0].status, rows[0].status_message) == (status, message):
                raise NoChange(f"no changes to apply: {name} {version} is already {status}")
            ts = _now()
            for row in rows:
                if row.status != status:
                    row.status_changed_at = ts
                row.status, row.status_message, row.updated_at = status, message, ts
                db.add(row)
            db.commit()
            for row in rows:
                db.refresh(row)
            return self._with_health(db, rows)

    def record_health(self, name: str, status: str, latency_ms: float | None, error: str | None,
                      tools: int | None = None) -> None:
        with Session(self.engine) as db:
            self._upsert(db, HealthRow, {"name": name, "status": status, "latency_ms": latency_ms,
                                         "checked_at": _now(), "error": error, "tools": tools}, ["name"])
            db.commit()

    # -- replicas --------------------------------------------------------------------------------------

    def add_replica(self, name: str, version: str, url: str, node: str | None = None) -> None:
        """Register (or re-register, as up) one more server answering for `name` `version` at `url`."""
        ts = _now()
        with Session(self.engine) as db:
            self._upsert(db, ReplicaRow, {"name": name, "version": version, "url": url, "node": node, "status": "up",
                                          "error": None, "registered_at": ts, "checked_at": None},
                         ["name", "version", "url"])
            db.exec(update(ServerRow).where(ServerRow.name == name, ServerRow.version == version)
                    .values(updated_at=ts))
            db.commit()

    def remove_replica(self, name: str, url: str, version: str | None = None) -> int:
        """Forget the replica at `url` (of one version, or every version); returns how many rows went."""
        with Session(self.engine) as db:
            query = delete(ReplicaRow).where(ReplicaRow.name == name, ReplicaRow.url == url)
            if version is not None:
                query = query.where(ReplicaRow.version == version)
            gone = db.execute(query).rowcount
            if gone:
                db.exec(update(ServerRow).where(ServerRow.name == name).values(updated_at=_now()))
            db.commit()
            return gone

    def replica_health(self, name: str, url: str, status: str, error: str | None = None) -> bool:
        """Record a check of a registered replica (never re-adds a removed one); True when its status changed."""
        ts = _now()
        with Session(self.engine) as db:
            changed = db.execute(update(ReplicaRow).where(ReplicaRow.name == name, ReplicaRow.url == url,
                                                          ReplicaRow.status != status)
                                 .values(status=status, error=error, checked_at=ts)).rowcount
            db.execute(update(ReplicaRow).where(ReplicaRow.name == name, ReplicaRow.url == url)
                       .values(error=error, checked_at=ts))
            if changed:  # clients polling updated_since see the record's remotes change
                db.exec(update(ServerRow).where(ServerRow.name == name).values(updated_at=ts))
            db.commit()
            return bool(changed)

    def replicas(self, names: list[str] | None = None) -> list[dict[str, Any]]:
        """Every registered replica (of `names`), as dicts."""
        with Session(self.engine) as db:
            query = select(ReplicaRow)
            if names is not None:
                query = query.where(ReplicaRow.name.in_(names))
            return [{"name": r.name, "version": r.version, "url": r.url, "node": r.node, "status": r.status,
                     "error": r.error, "checked_at": _iso(r.checked_at) if r.checked_at else None}
                    for r in db.exec(query.order_by(ReplicaRow.name, ReplicaRow.id))]

    # -- reads -----------------------------------------------------------------------------------------

    def _response(self, row: ServerRow, health: HealthRow | None,
                  replicas: list[ReplicaRow] | None = None) -> dict[str, Any]:
        """{server, _meta}: the record as published, and what the registry itself knows about it (official
        status and dates; mcpworld's health checks; its replicas) in the response's own `_meta`. Replicas that
        pass their checks (all, when none does) join the record's `remotes`."""
        official = {"status": row.status, "publishedAt": _iso(row.published_at),
                    "updatedAt": _iso(row.updated_at), "isLatest": row.is_latest}
        if row.status_message:
            official["statusMessage"] = row.status_message
        if row.status_changed_at is not None:
            official["statusChangedAt"] = _iso(row.status_changed_at)
        meta: dict[str, Any] = {OFFICIAL: official}
        if health is not None:
            meta[REGISTRY_META] = {"health": {"status": health.status, "latency_ms": health.latency_ms,
                                              "checked_at": _iso(health.checked_at), "error": health.error,
                                              "tools": health.tools}}
        doc = json.loads(row.doc)
        if replicas:
            live = [r for r in replicas if r.status == "up"] or replicas
            remotes = list(doc.get("remotes") or [])
            known = {r.get("url") for r in remotes}
            remotes += [{"type": "streamable-http", "url": r.url} for r in live if r.url not in known]
            doc["remotes"] = remotes
            meta.setdefault(REGISTRY_META, {})["replicas"] = [
                {"url": r.url, "node": r.node, "status": r.status, "error": r.error,
                 "checked_at": _iso(r.checked_at) if r.checked_at else None} for r in replicas]
        return {"server": doc, "_meta": meta}

    def _with_health(self, db: Session, rows: list[ServerRow]) -> list[dict[str, Any]]:
        names = {r.name for r in rows}
        health = {h.name: h for h in db.exec(select(HealthRow).where(HealthRow.name.in_(names)))} if names else {}
        replicas: dict[tuple[str, str], list[ReplicaRow]] = {}
        if names:
            for rep in db.exec(select(ReplicaRow).where(ReplicaRow.name.in_(names))
                               .order_by(ReplicaRow.id)):
                replicas.setdefault((rep.name, rep.version), []).append(rep)
        return [self._response(r, health.get(r.name), replicas.get((r.name, r.version))) for r in rows]

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

    def versions(self, name: str, include_deleted: bool = False) -> list[dict[str, Any]]:
        """Every version of a server, newest first (deleted ones only with `include_deleted`)."""
        with Session(self.engine) as db:
            query = select(ServerRow).where(ServerRow.name == name)
            if not include_deleted:
                query = query.where(ServerRow.status != "deleted")
            rows = list(db.exec(query.order_by(ServerRow.published_at.desc(), ServerRow.id.desc())))  # type: ignore[attr-defined,union-attr]
            if not rows:
                raise NotFound(f"no server {name!r}" + ("" if include_deleted else " (or only deleted versions)"))
            return self._with_health(db, rows)

    def get(self, name: str, version: str = "latest", include_deleted: bool = False) -> dict[str, Any]:
        """One version, or the latest; a deleted version only with `include_deleted`."""
        with Session(self.engine) as db:
            query = select(ServerRow).where(ServerRow.name == name)
            query = query.where(ServerRow.is_latest == True) if version == "latest" else query.where(  # noqa: E712
                ServerRow.version == version)
            if not include_deleted:
                query = query.where(ServerRow.status != "deleted")
            row = db.exec(query).first()
            if row is None:
                which = "" if version == "latest" else f" version {version!r}"
                raise NotFound(f"no server {name!r}{which}" + ("" if include_deleted else " (or it is deleted)"))
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
