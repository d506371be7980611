"""τ² state as JSON documents in the world's tables, and τ²'s way of printing a tool's result.

Each τ² collection (airline `flights`, `users`, `reservations`) is a table of rows `(key, pos, data)`, `data` the
record as τ²'s `model_dump()` prints it (field order, `None` fields present, floats where τ² declares floats). The
runtime forks these tables per episode like any world's, and its change log names each row a call wrote.

A call works on `Docs`: the records it reads, parsed once per call, handed to the domain code as plain dicts and
lists that it mutates in place, as τ²'s tools mutate their models; `flush` writes back every record whose JSON
changed, whether the call returned or raised (τ² never rolls back).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from sqlmodel import Session


def dumps(doc: Any) -> str:
    """A record as stored: compact JSON, insertion order kept (it is the order τ² prints)."""
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


class Docs:
    """The records of one call, read on demand from the episode's tables and written back by `flush`."""

    def __init__(self, db: Session):
        self.conn = db.connection()
        self._seen: dict[tuple[str, str], tuple[str | None, Any]] = {}  # (table, key) -> (text as read, doc)
        self._next_pos: dict[str, int] = {}

    def get(self, table: str, key: Any) -> Any:
        """The record `key` of `table` (None when absent); the same object for the whole call."""
        if not isinstance(key, str):  # τ²'s dicts are keyed by str: any other key is not there (or cannot be looked up)
            hash(key)  # TypeError: unhashable type: 'list', as `key in dict` says
            return None
        found = self._seen.get((table, key))
        if found is None:
            row = self.conn.exec_driver_sql(f'SELECT data FROM "{table}" WHERE key = ?', (key,)).fetchone()
            if row is None:
                return None
            found = self._seen[(table, key)] = (row[0], json.loads(row[0]))
        return found[1]

    def has(self, table: str, key: Any) -> bool:
        return self.get(table, key) is not None

    def values(self, table: str) -> Iterator[Any]:
        """Every record of `table` in τ²'s order (the file's, then insertion)."""
        for key, data in self.conn.exec_driver_sql(f'SELECT key, data FROM "{table}" ORDER BY pos').fetchall():
            found = self._seen.get((table, key))
            if found is None:
                found = self._seen[(table, key)] = (data, json.loads(data))
            yield found[1]

    def put(self, table: str, key: str, doc: Any) -> None:
        """Set record `key` (a new one goes last, as a new dict key does in τ²)."""
        old = self._seen.get((table, key))
        if old is None and self.has(table, key):
            old = self._seen[(table, key)]
        self._seen[(table, key)] = (old[0] if old else None, doc)

    def flush(self) -> None:
        """Write every record whose JSON changed (inserting new ones), in the call's transaction."""
        for (table, key), (text, doc) in self._seen.items():
            new = dumps(doc)
            if text is None:
                pos = self._next_pos.get(table)
                if pos is None:
                    pos = self.conn.exec_driver_sql(f'SELECT COALESCE(MAX(pos), -1) + 1 FROM "{table}"').scalar()
                self._next_pos[table] = pos + 1
                self.conn.exec_driver_sql(f'INSERT INTO "{table}" (key, pos, data) VALUES (?, ?, ?)', (key, pos, new))
            elif new != text:
                self.conn.exec_driver_sql(f'UPDATE "{table}" SET data = ? WHERE key = ?', (new, key))
        self._seen.clear()


class Record(dict):  # type: ignore[type-arg]
    """A record printed as τ² prints a model: its dump as is (no value turned into text)."""


def record(value: BaseModel | dict[str, Any]) -> Record:
    return Record(value.model_dump() if isinstance(value, BaseModel) else value)


def _process(value: Any) -> Any:
    """τ²'s rule for a result that is not text: a model is its dump; a bare number or bool becomes its text, at
    the top or as a value of a plain list or dict; dates their ISO form; containers walked."""
    if isinstance(value, (Record, BaseModel)):
        return dict(value) if isinstance(value, Record) else value.model_dump()
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, (int, float, bool)):
        return str(value)
    if isinstance(value, list):
        return [_process(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_process(v) for v in value)
    if isinstance(value, dict):
        return {k: _process(v) for k, v in value.items()}
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise ValueError(f"Unsupported type: {type(value)}")


def render(value: Any) -> str:
    """A tool's result as the text τ² gives the agent: text as it is, anything else as JSON (default separators,
    ASCII escapes, `str` for what JSON cannot hold)."""
    return value if isinstance(value, str) else json.dumps(_process(value), default=str)


def tree_hash(tree: dict[str, Any]) -> str:
    """τ²'s `get_db_hash` over a database dump: sha256 of its sorted-key JSON."""
    return hashlib.sha256(json.dumps(tree, sort_keys=True, default=str).encode()).hexdigest()
