"""Wrong values of an answer's type: what the wrong-value and second-submission attacks submit, and the candidates
a random policy picks among (`chance.py`): neighbouring numbers, what the reference's reads showed, other
dates, times and entities, the other boolean, a homoglyph, a hedge.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from mcpworld.worlds.answers import AnswerPart, Count, DateAnswer, Entities, Number, TimeAnswer, YesNo
from mcpworld.worlds.audit.attempts import TaskContext

_HOMOGLYPHS = str.maketrans({"a": "\u0430", "e": "\u0435", "o": "\u043e", "A": "\u0410", "E": "\u0415",
                             "O": "\u041e", "c": "\u0441", "p": "\u0440"})


def _numbers_seen(ctx: TaskContext) -> list[float]:
    """Numbers the reference's reads returned: what a confused agent would submit instead."""
    found: list[float] = []

    def walk(value: Any) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            found.append(float(value))
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for result in ctx.reference_results:
        walk(result.value)
    return list(dict.fromkeys(found))[:12]


def _dates_seen(ctx: TaskContext) -> list[str]:
    days = {str(v)[:10] for rows in ctx.initial.values() for row in rows.values() for v in row.values()
            if isinstance(v, str) and re.match(r"\d{4}-\d{2}-\d{2}", v)}
    return sorted(days)[:12]


def _shift_time(hhmm: str, minutes: int) -> str:
    h, m = (int(x) for x in hhmm.split(":"))
    total = (h * 60 + m + minutes) % (24 * 60)
    return f"{total // 60:02d}:{total % 60:02d}"


def wrong_values(ctx: TaskContext, part: AnswerPart) -> list[Any]:
    """Every wrong value of `part`'s type the audit tries: neighbours, what the reads showed, other entities."""
    out: list[Any] = []
    if isinstance(part, Count):
        count = part.value
        out = [n for n in (count - 2, count - 1, count + 1, count + 2, 0,
                           *(int(x) for x in _numbers_seen(ctx) if x.is_integer())) if n >= 0 and n != count]
    elif isinstance(part, Number):
        v = part.value
        near = [v + 1, v - 1, round(v * 1.1, 2), round(v * 0.9, 2), float(round(v)), v + 3 * part.tolerance + 0.01,
                0.0, *_numbers_seen(ctx)]
        out = [n for n in near if abs(n - v) > part.tolerance + 1e-9]
    elif isinstance(part, DateAnswer):
        day = part.value
        out = [(day + timedelta(days=d)).isoformat() for d in (-7, -1, 1, 7)]
        out += [d for d in _dates_seen(ctx) if d != day.isoformat()]
    elif isinstance(part, TimeAnswer):
        if part.end is None:
            out = [_shift_time(part.start, m) for m in (-60, -30, 30, 60)]
        else:
            out = [{"start": _shift_time(part.start, m), "end": _shift_time(part.end, m)} for m in (-60, -30, 30, 60)]
            out.append({"start": part.start, "end": _shift_time(part.end, 30)})
    elif isinstance(part, YesNo):
        out = [not part.value]
    elif isinstance(part, Entities):
        among = ctx.resolve(part.among) if isinstance(part.among, str) else [str(a) for a in part.among]
        names = {a.casefold() for aliases in part.expected for a in aliases}
        wrong = [c for c in dict.fromkeys(among) if c.strip() and c.casefold() not in names]
        right = [aliases[0] for aliases in part.expected]
        out = [[w] for w in wrong]  # another entity alone
        out += [[*right, w] for w in wrong[:3]]  # the right ones plus a wrong one (listing every candidate)
        if len(right) > 1:
            out += [right[:i] + right[i + 1:] for i in range(len(right))]  # one missing
        out += [[right[0].translate(_HOMOGLYPHS)] + right[1:], [f"{right[0]} (or {wrong[0]})"] + right[1:]
                if wrong else [right[0] + "x"] + right[1:]]
        out = [o for o in out if o and o != right]
    seen: list[Any] = []
    for value in out:
        if value not in seen:
            seen.append(value)
    return seen
