"""The SQLite side of a world: engines over one connection, the one engine every episode shares (routed to the
episode being served), the session world code runs on and the rows it holds, and the change log.

Why apart from the runtime: the runtime (forks, calls) and the judge (`verify.py`: task checks, mapping a
seed's view back) both open sessions on an episode's database and read or rewrite its change log.
"""

from __future__ import annotations

import contextvars
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.pool import StaticPool
from sqlmodel import Session

__all__ = ["CHANGES_TABLE", "MAX_HELD_ROWS", "WorldSession", "activate", "engine_for", "hold_rows",
           "install_change_log", "key_sql", "shared_engine"]

CHANGES_TABLE = "_mcpworld_changes"
MAX_HELD_ROWS = 512  # loaded rows an episode keeps between its calls (beyond it, none: memory stays bounded)


def _begin(conn: Any) -> None:
    # The driver runs in autocommit mode (isolation_level=None), so the transaction is ours to open: this is
    # SQLAlchemy's documented recipe for pysqlite, and lets foreign keys be checked at commit time.
    raw = conn.connection.driver_connection  # straight to sqlite3: this runs on every tool call
    raw.execute("BEGIN")
    raw.execute("PRAGMA defer_foreign_keys=ON")


def engine_for(conn: sqlite3.Connection | Callable[[], Any]) -> Engine:
    """An engine over one connection. Foreign keys are checked at commit, whatever order the ORM inserts in."""
    creator = conn if callable(conn) and not isinstance(conn, sqlite3.Connection) else (lambda: conn)
    engine = create_engine("sqlite://", creator=creator, poolclass=StaticPool)
    event.listen(engine, "begin", _begin)
    return engine


_active: contextvars.ContextVar[sqlite3.Connection] = contextvars.ContextVar("mcpworld_active_episode")


class _ActiveConnection:
    """The DBAPI connection of whichever episode is running in this context.

    One engine per world then serves every episode: SQLAlchemy initializes its dialect and compiles each
    statement once per engine, which with an engine per episode cost ~2 ms on every episode's first call.
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(_active.get(), name)


def shared_engine() -> Engine:
    """One engine for every episode of a world: its connection is that of the episode `activate` made current."""
    return engine_for(_ActiveConnection)


@contextmanager
def activate(conn: sqlite3.Connection) -> Iterator[None]:
    """Make `conn` the connection the shared engine serves, for the block (this context only)."""
    token = _active.set(conn)
    try:
        yield
    finally:
        _active.reset(token)


class WorldSession(Session):
    """The session world code runs on: sqlmodel's, plus the rows `hold_rows` keeps (only on these sessions)."""

    held: dict[int, Any] | None = None  # id -> row, once `hold_rows` turned holding on


def key_sql(ref: str, pk: tuple[str, ...]) -> str:
    """SQL for a row's key string (its primary key columns joined by "|"), the way the change log records it."""
    return " || '|' || ".join(f'CAST({ref}."{c}" AS TEXT)' for c in pk)


def install_change_log(conn: sqlite3.Connection, primary_keys: dict[str, tuple[str, ...]]) -> None:
    """Triggers that record the key of every row written, so a diff reads only changed rows.

    They live in the template, so every fork inherits them for free; being in the same transaction as the
    write, a rolled-back tool call leaves no trace in the log either.
    """
    conn.execute(f"CREATE TABLE {CHANGES_TABLE} (tbl TEXT NOT NULL, pk TEXT NOT NULL, PRIMARY KEY (tbl, pk)) "
                 "WITHOUT ROWID")
    for table, pk in primary_keys.items():
        log = f"INSERT OR IGNORE INTO {CHANGES_TABLE} VALUES ('{table}', {{}});"
        new, old = log.format(key_sql("NEW", pk)), log.format(key_sql("OLD", pk))
        conn.executescript(f"""
            CREATE TRIGGER "_mcpworld_{table}_i" AFTER INSERT ON "{table}" BEGIN {new} END;
            CREATE TRIGGER "_mcpworld_{table}_u" AFTER UPDATE ON "{table}" BEGIN {old} {new} END;
            CREATE TRIGGER "_mcpworld_{table}_d" AFTER DELETE ON "{table}" BEGIN {old} END;
        """)
    conn.commit()


def hold_rows(session: WorldSession) -> None:
    """Keep the rows `session` loads alive between calls, so reading a row again costs no query (SQLAlchemy's
    identity map holds rows weakly: without this, every call's rows die with it and are read again).

    Why it is safe: a held row is trusted only while nothing has written to the episode's database since it was
    current. A call that writes (through the ORM or around it: triggers, cascades, raw SQL) moves the connection's
    write counter and every row is expired, to be reloaded on its next use; so does a write beside the session
    (`WorldRuntime.call` compares the counter first); a rollback expires them too. At most MAX_HELD_ROWS are held.
    """
    session.held = {}


@event.listens_for(WorldSession, "loaded_as_persistent")
@event.listens_for(WorldSession, "pending_to_persistent")
@event.listens_for(WorldSession, "detached_to_persistent")
def _hold(session: WorldSession, instance: Any) -> None:
    held = session.held
    if held is not None and len(held) < MAX_HELD_ROWS:
        held[id(instance)] = instance


@event.listens_for(WorldSession, "persistent_to_detached")
@event.listens_for(WorldSession, "persistent_to_deleted")
@event.listens_for(WorldSession, "persistent_to_transient")
def _release(session: WorldSession, instance: Any) -> None:
    held = session.held
    if held is not None:
        held.pop(id(instance), None)

