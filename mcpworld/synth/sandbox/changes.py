"""The SQL that replays a worker's row changes (standard library only: the server and workers both import it).

One definition, because an AWM episode's session in its worker mirrors the server's database byte for byte by
running the very statements the server runs (`packages.apply_changes`), and the two are compared by digest.
"""

from __future__ import annotations

from typing import Any


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def insert_sql(table: str, cols: list[str]) -> str:
    return f"INSERT INTO {quote(table)} ({', '.join(map(quote, cols))}) VALUES ({', '.join('?' for _ in cols)})"


def change_statements(changes: list[dict[str, Any]],
                      primary_keys: dict[str, tuple[str, ...]]) -> list[tuple[str, tuple[Any, ...]]]:
    """Each change (`{"table", "before", "after"}`, a row dict or None) as one statement and its parameters."""
    out: list[tuple[str, tuple[Any, ...]]] = []
    for change in changes:
        table, before, after = change["table"], change["before"], change["after"]
        pk = primary_keys[table]
        where = " AND ".join(f'"{c}" = ?' for c in pk)
        if after is None:
            out.append((f'DELETE FROM "{table}" WHERE {where}', tuple(before[c] for c in pk)))
        elif before is None:
            cols = list(after)
            out.append((insert_sql(table, cols), tuple(after[c] for c in cols)))
        else:
            cols = list(after)
            sets = ", ".join(f'"{c}" = ?' for c in cols)
            out.append((f'UPDATE "{table}" SET {sets} WHERE {where}',
                        tuple(after[c] for c in cols) + tuple(before[c] for c in pk)))
    return out
