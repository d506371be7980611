"""Row-level state diff: inserted, deleted and updated rows per table, keyed by primary key.

Computed once per verification and shared by verifiers, the LLM judge and the trajectory record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcpworld.core.models import Check

Row = dict[str, Any]


def row_key(row: Row, pk: tuple[str, ...]) -> str:
    """A row's primary key as one string (composite keys joined by '|')."""
    return "|".join(str(row[c]) for c in pk)


@dataclass
class TableDiff:
    inserted: list[Row] = field(default_factory=list)
    deleted: list[Row] = field(default_factory=list)
    updated: list[dict[str, Any]] = field(default_factory=list)  # {key, before, after, changed}
    deleted_keys: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.inserted or self.deleted or self.updated)


def diff_rows(before: dict[str, Row], after: dict[str, Row]) -> TableDiff:
    """Compare two {key: row} maps of one table."""
    out = TableDiff()
    for key, row in after.items():
        old = before.get(key)
        if old is None:
            out.inserted.append(row)
        elif old != row:
            changed = {c: [old.get(c), v] for c, v in row.items() if old.get(c) != v}
            out.updated.append({"key": key, "before": old, "after": row, "changed": changed})
    for key, row in before.items():
        if key not in after:
            out.deleted.append(row)
            out.deleted_keys.append(key)
    return out


@dataclass
class StateDiff:
    """The changes an episode made, with helpers that turn expectations into named `Check`s."""

    tables: dict[str, TableDiff]
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each table's primary-key columns (how the reference comparison finds the row a generated id names)."""

    @property
    def is_empty(self) -> bool:
        return not any(self.tables.values())

    def _table(self, table: str) -> TableDiff:
        return self.tables.get(table) or TableDiff()

    def updated(self, table: str, key: Any, **expected: Any) -> Check:
        """Row `key` of `table` was updated, and now holds `expected` values."""
        name = f"{table}[{key}] updated" + (f" to {expected}" if expected else "")
        for change in self._table(table).updated:
            if change["key"] == str(key):
                wrong = {c: change["after"].get(c) for c, v in expected.items() if change["after"].get(c) != v}
                return Check(name=name, passed=not wrong, detail=f"found {wrong}" if wrong else "")
        return Check(name=name, passed=False, detail="row not updated")

    def inserted(self, table: str, count: int | None = None, **match: Any) -> Check:
        """Rows matching `match` were inserted into `table` (exactly `count` of them when given)."""
        rows = [r for r in self._table(table).inserted if all(r.get(c) == v for c, v in match.items())]
        want = f"{count}" if count is not None else ">= 1"
        passed = len(rows) == count if count is not None else bool(rows)
        return Check(name=f"{want} row(s) inserted into {table}" + (f" with {match}" if match else ""),
                     passed=passed, detail=f"found {len(rows)}")

    def deleted(self, table: str, key: Any) -> Check:
        """Row `key` was deleted from `table`."""
        return Check(name=f"{table}[{key}] deleted", passed=str(key) in self._table(table).deleted_keys)

    def unchanged(self, *tables: str) -> Check:
        """Nothing changed in `tables` (in any table when none are named)."""
        names = tables or tuple(self.tables)
        touched = [t for t in names if self._table(t)]
        return Check(name="unchanged: " + (", ".join(tables) or "all tables"), passed=not touched,
                     detail=f"changed: {', '.join(touched)}" if touched else "")

    def only(self, *tables: str) -> Check:
        """Changes are confined to `tables` (no collateral writes elsewhere)."""
        extra = [t for t, d in self.tables.items() if d and t not in tables]
        return Check(name=f"only {', '.join(tables)} changed", passed=not extra,
                     detail=f"also changed: {', '.join(extra)}" if extra else "")

    def summary(self) -> dict[str, Any]:
        """A JSON-ready view for evidence and trajectories (empty tables left out)."""
        return {
            t: {"inserted": d.inserted, "deleted": d.deleted, "updated": d.updated}
            for t, d in self.tables.items() if d
        }
