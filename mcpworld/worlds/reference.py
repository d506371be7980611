"""The reference as the oracle for the whole database: compare an episode's final state with the reference's.

Both episodes start from the same template, so rows neither touched are equal by construction and only the
two diffs need comparing: the same rows updated (to the same values), deleted, and inserted. An id the world
generated (`new_id`) is replaced by what it names: the new row it is the key of, written out with its own
links replaced the same way ("the new order of Alice's with the gift box"), so the order in which an agent
created rows does not matter, but a note on Bob's new order is not one on Alice's. A world's `free_fields`
(free text, judged by `freetext`) are left out.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from mcpworld.core.models import Check
from mcpworld.worlds.diff import Row, StateDiff

MAX_DETAIL = 900


@dataclass
class TableState:
    """One table's changes in comparable form."""

    updated: dict[str, Row] = field(default_factory=dict)  # key -> comparable row after the update
    deleted: set[str] = field(default_factory=set)
    inserted: Counter[str] = field(default_factory=Counter)  # canonical JSON of each inserted row
    shown: dict[str, Row] = field(default_factory=dict)  # canonical JSON -> row as the agent sees it


@dataclass
class Canonical:
    """A whole diff in comparable form."""

    tables: dict[str, TableState]

    @property
    def is_empty(self) -> bool:
        """No row written: what a refusal's reference must leave."""
        return not any(t.updated or t.deleted or t.inserted for t in self.tables.values())


class _Names:
    """What each generated id stands for in one diff: "<new PREFIX table {its row, links named the same way}>"."""

    def __init__(self, diff: StateDiff, generated: dict[str, str], free_fields: dict[str, tuple[str, ...]]):
        self.generated, self.free_fields, self.keys = generated, free_fields, diff.keys
        self.owner: dict[str, tuple[str, Row]] = {}  # generated id -> the inserted row it is the key of
        for name, table in diff.tables.items():
            for row in table.inserted:
                for column in diff.keys.get(name, ()):
                    if row.get(column) in generated:
                        self.owner.setdefault(row[column], (name, row))
        self.memo: dict[str, str] = {}
        self.visiting: set[str] = set()

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            if value in self.generated:
                return self.name(value)
            if "|" in value:  # a composite key string: map its parts
                return "|".join(str(self.value(part)) for part in value.split("|"))
        return value

    def name(self, new_id: str) -> str:
        plain = f"<new {self.generated[new_id] or 'id'}>"
        if new_id in self.memo:
            return self.memo[new_id]
        if new_id not in self.owner or new_id in self.visiting:  # no row of its own, or a cycle of new rows
            return plain
        table, row = self.owner[new_id]
        self.visiting.add(new_id)
        body = self.row(row, table, skip=self.keys.get(table, ()))
        self.visiting.discard(new_id)
        self.memo[new_id] = f"{plain[:-1]} {table} {json.dumps(body, sort_keys=True, default=str)}>"
        return self.memo[new_id]

    def row(self, row: Row, table: str, skip: tuple[str, ...] = ()) -> Row:
        drop = (*self.free_fields.get(table, ()), *skip)
        return {c: self.value(v) for c, v in row.items() if c not in drop}


def canonical(diff: StateDiff, generated: dict[str, str], free_fields: dict[str, tuple[str, ...]]) -> Canonical:
    """`diff` with generated ids replaced by what they name and free fields dropped."""
    names = _Names(diff, generated, free_fields)
    tables: dict[str, TableState] = {}
    for name, table in diff.tables.items():
        state = TableState()
        for change in table.updated:
            state.updated[str(names.value(change["key"]))] = names.row(change["after"], name)
        state.deleted = {str(names.value(k)) for k in table.deleted_keys}
        for row in table.inserted:
            comparable = names.row(row, name)
            text = json.dumps(comparable, sort_keys=True, default=str)
            state.inserted[text] += 1
            state.shown[text] = comparable
        tables[name] = state
    return Canonical(tables)


_UNTOUCHED = TableState()  # read only


def mismatches(agent: Canonical, reference: Canonical) -> list[str]:
    """Every way the agent's changes differ from the reference's, one line each (empty: they match)."""
    out: list[str] = []
    for name in sorted(set(agent.tables) | set(reference.tables)):
        mine, ref = agent.tables.get(name, _UNTOUCHED), reference.tables.get(name, _UNTOUCHED)
        if not (mine.updated or ref.updated or mine.deleted or ref.deleted or mine.inserted or ref.inserted):
            continue  # neither wrote this table: most tables of most tasks
        for key in sorted(set(mine.updated) | set(ref.updated)):
            if key not in ref.updated:
                out.append(f"{name}[{key}] was changed; the reference leaves it as it was")
            elif key not in mine.updated:
                out.append(f"{name}[{key}] was not changed; the reference changes it")
            else:
                wrong = {c: (mine.updated[key].get(c), v) for c, v in ref.updated[key].items()
                         if mine.updated[key].get(c) != v}
                if wrong:
                    shown = ", ".join(f"{c}={got!r} (reference {want!r})" for c, (got, want) in wrong.items())
                    out.append(f"{name}[{key}] has {shown}")
        for key in sorted(mine.deleted - ref.deleted):
            out.append(f"{name}[{key}] was deleted; the reference keeps it")
        for key in sorted(ref.deleted - mine.deleted):
            out.append(f"{name}[{key}] was not deleted; the reference deletes it")
        extra, missing = mine.inserted - ref.inserted, ref.inserted - mine.inserted
        for text, n in extra.items():
            times = f" (x{n})" if n > 1 else ""
            out.append(f"{name}: unexpected new row{'s' if n > 1 else ''} {mine.shown[text]}{times}")
        for text, n in missing.items():
            out.append(f"{name}: missing new row {ref.shown[text]}" + (f" (x{n})" if n > 1 else ""))
    return out


def reference_check(agent: Canonical, references: list[Canonical]) -> Check:
    """Pass when the agent's changes equal one reference's; the evidence is the first reference's differences."""
    found = [mismatches(agent, ref) for ref in references]
    if any(not m for m in found):
        return Check(name="final state matches the reference", passed=True, group="final state")
    lines = found[0]
    detail = "; ".join(lines)
    if len(detail) > MAX_DETAIL:
        detail = detail[:MAX_DETAIL] + f"… ({len(lines)} differences)"
    return Check(name="final state matches the reference", passed=False, detail=detail, group="final state")
