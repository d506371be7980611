"""Direct edits of an episode's database that the reference never makes: one unrelated row changed, or a row
copied (the collateral attack). Each is a function of the episode that returns what it did, or raises `Skip`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from mcpworld.worlds.audit.attempts import Skip, TaskContext
from mcpworld.worlds.runtime import Episode, WorldRuntime


def _sql_type(runtime: WorldRuntime, table: str, column: str) -> type | None:
    try:
        return runtime.metadata.tables[table].columns[column].type.python_type
    except (KeyError, NotImplementedError):  # SQLAlchemy types without a Python type (JSON, custom) are skipped
        return None


def _edited(kind: type | None, value: Any) -> Any:
    if kind is bool:
        return 0 if value else 1
    if kind in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value + 1
    if kind is str and isinstance(value, str):
        return value + " (edited)"
    return Skip


def _editable_columns(ctx: TaskContext, table: str) -> list[tuple[str, type | None]]:
    sa_table = ctx.runtime.metadata.tables[table]
    free = set(ctx.world.free_fields.get(table, ()))
    cols = []
    for col in sa_table.columns:
        if col.primary_key or col.foreign_keys:
            continue
        kind = _sql_type(ctx.runtime, table, col.name)
        if kind in (bool, int, float, str):
            cols.append((col.name, kind))
    return sorted(cols, key=lambda c: c[0] in free)  # stable: non-free columns first, in declaration order


def collateral_edit(ctx: TaskContext, table: str) -> Callable[[Episode], str]:
    """An edit of the first row of `table` the reference leaves alone: one column changed."""
    pk = ctx.runtime.primary_keys[table]
    changes = ctx.reference_diff.tables.get(table)
    touched = {c["key"] for c in changes.updated} | set(changes.deleted_keys) if changes else set()
    rows = [(k, r) for k, r in sorted(ctx.initial.get(table, {}).items()) if k not in touched]
    columns = _editable_columns(ctx, table)

    def edit(episode: Episode) -> str:
        for key, row in rows:
            for col, kind in columns:
                new = _edited(kind, row.get(col))
                if new is Skip:
                    continue
                where = " AND ".join(f'"{c}" = ?' for c in pk)
                try:
                    cur = episode.conn.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE {where}',
                                               (new, *(row[c] for c in pk)))
                except sqlite3.Error:
                    continue
                if cur.rowcount:
                    return f"{table}[{key}].{col} = {new!r}"
        raise Skip

    return edit


def copy_row(ctx: TaskContext, table: str) -> Callable[[Episode], str] | None:
    """An edit inserting a copy of the first row of `table` under a fresh key (None: no key to make up)."""
    pk = ctx.runtime.primary_keys[table]
    rows = sorted(ctx.initial.get(table, {}).items())
    if len(pk) != 1 or not rows:
        return None
    key_col = pk[0]
    kind = _sql_type(ctx.runtime, table, key_col)
    existing = [r[key_col] for _, r in rows]
    if kind is int and all(isinstance(v, int) for v in existing):
        fresh: Any = max(existing) + 1
    elif kind is str:
        fresh = f"{existing[0]}-COPY"
    else:
        return None
    row = dict(rows[0][1])
    row[key_col] = fresh

    def edit(episode: Episode) -> str:
        cols = ", ".join(f'"{c}"' for c in row)
        try:
            episode.conn.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({", ".join("?" * len(row))})',
                                 tuple(row.values()))
        except sqlite3.Error as exc:
            raise Skip from exc
        return f"{table}: copy of {rows[0][0]} as {fresh!r}"

    return edit
