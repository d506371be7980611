"""The reference as the oracle for the whole database: compare an episode's final state with the reference's.

Both episodes start from the same template, so rows neither touched are equal by construction and only the
two diffs need comparing: the same rows updated (to the same values), deleted, and inserted. Ids the world
generated (`new_id`) become "a new PREFIX id" before comparing, so the order in which an agent created rows
does not matter; a world's `free_fields` (free text judged by its own checks) are left out.
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


def _canon_value(value: Any, generated: dict[str, str]) -> Any:
    if isinstance(value, str):
        if value in generated:
            return f"<new {generated[value] or 'id'}>"
        if "|" in value:  # a composite key string: map its parts
            return "|".join(str(_canon_value(part, generated)) for part in value.split("|"))
    return value


def _comparable(row: Row, generated: dict[str, str], free: tuple[str, ...]) -> Row:
    return {c: _canon_value(v, generated) for c, v in row.items() if c not in free}


def canonical(diff: StateDiff, generated: dict[str, str], free_fields: dict[str, tuple[str, ...]]) -> Canonical:
    """`diff` with generated ids replaced by placeholders and free fields dropped."""
    tables: dict[str, TableState] = {}
    for name, table in diff.tables.items():
        free = free_fields.get(name, ())
        state = TableState()
        for change in table.updated:
            state.updated[str(_canon_value(change["key"], generated))] = _comparable(change["after"], generated, free)
        state.deleted = {str(_canon_value(k, generated)) for k in table.deleted_keys}
        for row in table.inserted:
            comparable = _comparable(row, generated, free)
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
        return Check(name="final state matches the reference", passed=True)
    lines = found[0]
    detail = "; ".join(lines)
    if len(detail) > MAX_DETAIL:
        detail = detail[:MAX_DETAIL] + f"… ({len(lines)} differences)"
    return Check(name="final state matches the reference", passed=False, detail=detail)
