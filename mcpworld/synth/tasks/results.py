"""Reading tool results: every scalar with where it sits, and how to point at a row without leaking it.

Tool results are JSON of any shape (rows, wrappers with `data` and `meta`, spreadsheet grids); synthesis
needs the values in them, the object each value belongs to, and that object's siblings.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mcpworld.synth.tasks.names import (
    GENERIC_CONTAINERS,
    NOISE_FIELDS,
    aliases,
    looks_like_id,
    singular,
    snake,
    tool_noun,
)

SELECTOR_FIELDS = ("name", "title", "summary", "email", "label", "notation", "username", "handle", "code",
                   "author", "display_name", "subject", "flight_number", "number")
ORDINALS = ("first", "second", "third", "fourth", "fifth")


@dataclass
class Occurrence:
    """One scalar found in a result: its field, the object it sits in, and that object's siblings."""

    field: str
    container: str
    value: Any
    row: dict[str, Any] | None = None
    siblings: list[Any] | None = None
    index: int = 0

    @property
    def names(self) -> set[str]:
        return aliases(self.field, self.container)


def occurrences(value: Any, container: str, depth: int = 0) -> Iterator[Occurrence]:
    """Every scalar in a JSON value, with where it was found (objects inside lists know their siblings)."""
    if depth > 5:
        return
    if isinstance(value, list):
        if _is_grid(value):  # [[header...], [cells...], ...] as returned by spreadsheet-like tools
            header = value[0]
            value = [dict(zip(header, row)) for row in value[1:]]
        for i, item in enumerate(value[:100]):
            if isinstance(item, dict):
                yield from _in_object(item, container, depth, value, i)
            elif isinstance(item, list):
                yield from occurrences(item, container, depth + 1)
    elif isinstance(value, dict):
        yield from _in_object(value, container, depth, None, 0)


def _in_object(obj: dict[str, Any], container: str, depth: int, siblings: list[Any] | None,
               index: int) -> Iterator[Occurrence]:
    for key, item in obj.items():
        if isinstance(item, dict):
            yield from occurrences(item, key if key not in GENERIC_CONTAINERS else container, depth + 1)
        elif isinstance(item, list):
            if item and all(scalar(x) for x in item):
                for x in item[:20]:
                    yield Occurrence(key, container, x, obj, siblings, index)
            else:
                yield from occurrences(item, key if key not in GENERIC_CONTAINERS else container, depth + 1)
        elif scalar(item):
            yield Occurrence(key, container, item, obj, siblings, index)


def _is_grid(value: list[Any]) -> bool:
    return len(value) >= 2 and all(isinstance(r, list) for r in value) and \
        all(isinstance(h, str) and h for h in value[0]) and len(set(value[0])) == len(value[0]) and \
        all(len(r) == len(value[0]) and all(scalar(c) or c is None for c in r) for r in value[1:])


def scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def empty(value: Any) -> bool:
    """No information: None, empty containers, or only empty containers and noise inside."""
    if value in (None, "", [], {}):
        return True
    if isinstance(value, dict):
        return all(empty(v) or k in NOISE_FIELDS or k in ("total", "count") for k, v in value.items())
    return False


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def answer_text(value: Any) -> str:
    """How a value is written in an answer: 420.0 -> "420", so "420.00" and "$420" both mention it."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def row_target(occ: Occurrence, producer: str, avoid: set[str]) -> str | None:
    """How to point at the row `occ` is in without leaking it: by a unique descriptive field or position."""
    noun = singular(snake(occ.container)) if occ.container not in GENERIC_CONTAINERS else tool_noun(producer)
    noun = noun.replace("_", " ")
    siblings = [s for s in (occ.siblings or []) if isinstance(s, dict)]
    if len(siblings) <= 1 or occ.row is None:
        return f"that {noun}"
    keys = sorted((k for k, v in occ.row.items() if isinstance(v, str) and 0 < len(v) <= 60 and k != occ.field
                   and not looks_like_id(k, v) and k not in NOISE_FIELDS and v.lower() not in avoid),
                  key=lambda k: (k not in SELECTOR_FIELDS, SELECTOR_FIELDS.index(k) if k in SELECTOR_FIELDS else 0, k))
    for key in keys:
        value = occ.row[key]
        if sum(1 for s in siblings if s.get(key) == value) == 1:
            return f"the {noun} whose {key.replace('_', ' ')} is {value!r}"
    if occ.index < len(ORDINALS):
        return f"the {ORDINALS[occ.index]} {noun} listed"
    return None


