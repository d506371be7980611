"""What a seed changes: the same task on other data, so an answer memorised on one seed fails on another.

Seed 0 is the world as written. Any other seed gets a `View` of it, drawn from the seed alone:

- every string id is renamed everywhere it occurs (keys, references, free text, the instruction): each run of
  three or more digits in a primary key ("MW101-0603", "O1001", "PY-4001") is swapped with a fresh run one digit
  longer, also inside other words (a tool that makes "RT1001-1" from order "O1001" makes its twin from the
  twin), a segment with shorter digit runs ("ZFA04Y") with a fresh one of the same shape, and a key that is a
  word and a short number ("WEB-4") whole, with a number two digits longer ("WEB-517"); so is any value of the
  columns a world lists in `World.codes` (a tracking or card number that is not a key);
- every word of a person's name (the columns a world lists in `World.names`) is swapped with an invented name,
  in its title, lower ("ada@example.com") and upper ("PM-ADA-CARD") forms;
- every date moves by a multiple of 28 years, the Gregorian calendar's cycle between 1901 and 2099, so weekdays,
  month ends and leap days stay where they were; the episode's clock moves with them.

- an answer task whose numbers follow the data (`Number(..., scales=True)`, a sum or a difference of amounts)
  sees every amount column the world lists in `World.amounts` multiplied by a whole factor from 2 to 5: sums,
  differences and ratios between amounts hold as they did, cents stay cents, and the answer moves with them.

Everything else stays as written: a count of rows, a status, a refusal's rule. Their meaning hangs on the
world's rules (a full flight, a fee), which a generic view cannot know; the audit's "memorised" chance level
says per world how much of it a memorised episode still earns. Amounts scale only for answer tasks: a
state task's writes meet the rules' constants (a fee, a limit), which a factor would not move.

Why a view and not a re-seed: the task's references, checks and expected values stay those of seed 0. An episode is
played on the viewed data; when it is judged, its final rows, its submission and its reply are mapped back (the
swaps are their own inverse, the date shift is undone) and judged in seed 0's terms, so nothing an author wrote
needs to know about seeds. A seed-0 id written in a viewed episode maps to the viewed id's twin, which names nothing
in seed 0: a memorised answer fails.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

YEAR_CYCLE = 28  # years after which the Gregorian calendar repeats (weekdays, leap years) within 1901-2099
_SEGMENT = re.compile(r"[A-Za-z0-9]+")
_WORD = re.compile(r"[A-Za-z]{3,}")
_DATE = re.compile(r"(?<![0-9])((?:19|20)[0-9]{2})(?=-[01][0-9]-[0-3][0-9])")
_RUN = re.compile(r"[0-9]{3,}")
_NUMBERED = re.compile(r"([A-Za-z][A-Za-z0-9]*[-_])([0-9]{1,2})")  # a word, a separator, a short number
_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


@dataclass(frozen=True)
class View:
    """One seed's renaming of a task's data: string swaps (an involution) and a shift of every date's year."""

    seed: int
    swaps: dict[str, str] = field(default_factory=dict)
    years: int = 0
    scale: int = 1  # the factor of every amount column (answer tasks whose numbers follow the data)
    amounts: frozenset[tuple[str, str]] = frozenset()  # (table, column) pairs the factor applies to
    _words: re.Pattern[str] | None = None  # segments and name forms, between non-alphanumerics
    _digits: re.Pattern[str] | None = None  # digit runs, between non-digits (and not a decimal's part)

    @property
    def identity(self) -> bool:
        return not self.swaps and not self.years and self.scale == 1

    def text(self, value: str, back: bool = False) -> str:
        """`value` as this seed shows it (or, `back`, as seed 0 does)."""
        if self.identity:
            return value
        for pattern in (self._words, self._digits):
            if pattern is not None:
                value = pattern.sub(lambda m: self.swaps[m.group(0)], value)
        if self.years:
            shift = -self.years if back else self.years
            value = _DATE.sub(lambda m: str(int(m.group(1)) + shift), value)
        return value

    def value(self, value: Any, back: bool = False) -> Any:
        """A JSON value with every string in it viewed (tool arguments, a submission)."""
        if isinstance(value, str):
            return self.text(value, back)
        if isinstance(value, list):
            return [self.value(v, back) for v in value]
        if isinstance(value, dict):
            return {self.text(k, back): self.value(v, back) for k, v in value.items()}
        return value

    def amount(self, value: float, back: bool = False) -> float:
        """An amount as this seed shows it (or, `back`, as seed 0 does); a whole number stays whole when it can."""
        if self.scale == 1 or isinstance(value, bool):
            return value
        if back:
            whole = isinstance(value, int) and value % self.scale == 0
            return value // self.scale if whole else round(value / self.scale, 10)
        return value * self.scale if isinstance(value, int) else round(value * self.scale, 10)

    def moment(self, when: datetime, back: bool = False) -> datetime:
        """A date-time moved as the data's dates are (the episode's clock)."""
        return when.replace(year=when.year + (-self.years if back else self.years)) if self.years else when

    def rewrite(self, conn: sqlite3.Connection, tables: Iterable[str], back: bool = False) -> None:
        """Every text cell of `tables` viewed, in place, in one transaction. Rows are rewritten whole (delete,
        insert) with foreign keys off: a swap may trade two rows' keys, and an update row by row would collide."""
        if self.identity:
            return
        conn.execute("PRAGMA foreign_keys=OFF")
        try:
            conn.execute("BEGIN")
            for table in tables:
                cur = conn.execute(f'SELECT * FROM "{table}"')
                cols = [d[0] for d in cur.description]
                scaled = [(table, c) in self.amounts for c in cols]
                rows = [tuple(self.text(v, back) if isinstance(v, str)
                              else self.amount(v, back) if s and isinstance(v, (int, float)) else v
                              for v, s in zip(row, scaled)) for row in cur]
                conn.execute(f'DELETE FROM "{table}"')
                if rows:
                    names = ", ".join(f'"{c}"' for c in cols)
                    marks = ", ".join("?" * len(cols))
                    conn.executemany(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        finally:
            conn.execute("PRAGMA foreign_keys=ON")


IDENTITY = View(seed=0)


def draw_view(seed: int, world: str, ids: Iterable[str], names: Iterable[str], corpus: str,
              shift_dates: bool = True, amounts: Iterable[tuple[str, str]] = ()) -> View:
    """The view of `seed`: `ids` are the key values to rename, `names` the person names, `corpus` every text the
    task has (its data, instruction, references), which no invented value may occur in; `amounts` the columns a
    factor scales (none unless the task's numbers follow the data)."""
    if seed == 0:
        return IDENTITY
    rng = random.Random(f"mcpworld-view:{world}:{seed}")  # a str seed hashes the same in every process
    taken = corpus.casefold()
    swaps: dict[str, str] = {}

    def pair(old: str, new: str) -> None:
        swaps[old], swaps[new] = new, old

    segments = {s for value in ids for s in _SEGMENT.findall(value)}
    runs = sorted({r for s in segments for r in _RUN.findall(s)})
    for run in runs:
        pair(run, _fresh(rng, lambda: _new_run(rng, run), taken, swaps))
    for segment in sorted(s for s in segments if _shaped(s)):
        if segment not in swaps:
            pair(segment, _fresh(rng, lambda: _new_segment(rng, segment), taken, swaps))
    for value in sorted({v for v in ids if _short_numbered(v)}):  # "WEB-4": renamed whole ("WEB-4" -> "WEB-517")
        if value not in swaps:
            pair(value, _fresh(rng, lambda: _new_numbered(rng, value), taken, swaps))
    for word in sorted({w for value in names for w in _WORD.findall(value)}):
        if word.title() in swaps or word.lower() in swaps:
            continue
        new = _fresh(rng, lambda: _invented_name(rng), taken, swaps)
        forms = {word.lower(): new.lower(), word.upper(): new.upper()}
        forms.setdefault(word, new.title())  # as written ("Ada", "McLeod"), unless all lower or upper case
        forms.setdefault(word.title(), new.title())
        for old_form, new_form in forms.items():
            if old_form not in swaps:
                pair(old_form, new_form)
    shift = YEAR_CYCLE * rng.choice([-1, 1, 2]) if shift_dates else 0
    amounts = frozenset(amounts)
    scale = rng.randint(2, 5) if amounts else 1  # drawn last: the same seed renames alike with or without it
    words = [k for k in swaps if not k.isdigit()]
    digits = [k for k in swaps if k.isdigit()]
    return View(seed=seed, swaps=swaps, years=shift, scale=scale, amounts=amounts,
                _words=_alternation(words, r"(?<![A-Za-z0-9])", r"(?![A-Za-z0-9])"),
                # never a decimal's part, nor a date's year (dates move by whole cycles instead)
                _digits=_alternation(digits, r"(?<![0-9])(?<![0-9]\.)",
                                     r"(?![0-9])(?!\.[0-9])(?!-[01][0-9]-[0-3][0-9])"))


def _alternation(tokens: list[str], before: str, after: str) -> re.Pattern[str] | None:
    if not tokens:
        return None
    alternatives = "|".join(re.escape(k) for k in sorted(tokens, key=len, reverse=True))
    return re.compile(f"{before}(?:{alternatives}){after}")


def _shaped(segment: str) -> bool:
    """Whether an id segment is renamed whole: letters and digits, no digit run long enough to be renamed alone
    ("U03", "ZFA04Y"; never "06" alone: that is also a date's month)."""
    return (any(c.isdigit() for c in segment) and any(c.isalpha() for c in segment)
            and not _RUN.search(segment))


def _short_numbered(value: str) -> bool:
    """Whether an id ends in a number too short to rename alone and nothing else in it is renamed ("WEB-4",
    "MS-12"; not "T-1001" nor "U03", whose runs and segments are)."""
    match = _NUMBERED.fullmatch(value)
    return match is not None and not _RUN.search(value) and not any(_shaped(s) for s in _SEGMENT.findall(value))


def _new_numbered(rng: random.Random, old: str) -> str:
    """The same prefix and a number two digits longer, so ids a tool numbers from a count never meet one."""
    prefix, digits = _NUMBERED.fullmatch(old).groups()  # type: ignore[union-attr]
    return prefix + str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(len(digits) + 1))


def _new_run(rng: random.Random, old: str) -> str:
    """A digit run one digit longer than `old`, so ids a tool numbers from a count ("PY-4003") never meet one."""
    return str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in old)


def _new_segment(rng: random.Random, old: str) -> str:
    """A segment of the same shape: its leading letters kept (a type prefix), each other letter and digit drawn
    again."""
    head = len(old) - len(old.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"))
    rest = "".join(rng.choice("0123456789") if c.isdigit()
                   else rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") if c.isupper()
                   else rng.choice("abcdefghijkmnpqrstuvwxyz") for c in old[head:])
    return old[:head] + rest


def _invented_name(rng: random.Random) -> str:
    syllables = rng.choice([2, 2, 3])
    return "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(syllables)).title()


def _fresh(rng: random.Random, draw: Any, taken: str, swaps: dict[str, str]) -> str:
    """A value `draw` makes that occurs nowhere in the task's texts and is not already in use."""
    for _ in range(1000):
        new = draw()
        if new.casefold() not in taken and new not in swaps and new.lower() not in swaps and new.title() not in swaps:
            return str(new)
    raise RuntimeError("no fresh value for a seed's view after 1000 draws")
