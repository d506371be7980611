"""How English prose writes numbers and dates: the word tables, reading numbers out of text, and writing them.

Why one module: a refusal's message is checked for protected numbers written in any form (`numbers_in`), the
audit tries to leak them in other forms (`number_forms`), and validation looks for a task's expected date in
its prose answer (`date_forms`). What "in words" means is said once, here, for both the reading and the writing.
"""

from __future__ import annotations

import datetime
import re

__all__ = ["MONTHS", "SCALES", "SMALL", "TENS", "date_forms", "number_forms", "numbers_in"]

SMALL = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "k": 1_000, "m": 1_000_000}
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")

_WORD = "|".join(sorted({*SMALL, *TENS, "hundred", "thousand", "million"}, key=len, reverse=True))
_WORDS_RE = re.compile(rf"\b(?:{_WORD})(?:(?:\s+and\s+|\s*-\s*|\s+)(?:{_WORD}))*\b", re.I)
_DIGITS_RE = re.compile(r"(\d+(?:[,\s]\d{3})*(?:\.\d+)?)\s*(k|m|thousand|million)?\b", re.I)


def _word_value(run: str) -> float:
    total = current = 0
    for word in re.findall(r"[a-z]+", run.lower()):
        if word == "and":
            continue
        if word == "hundred":
            current = (current or 1) * SCALES[word]
        elif word in ("thousand", "million"):
            total, current = total + (current or 1) * SCALES[word], 0
        else:
            current += SMALL.get(word, TENS.get(word, 0))
    return float(total + current)


def numbers_in(text: str) -> list[float]:
    """Every number a text states, however written: digits with grouping, "5.3k", "1.2 million", number words."""
    found = [float(re.sub(r"[,\s]", "", m[1])) * (SCALES[m[2].lower()] if m[2] else 1)
             for m in _DIGITS_RE.finditer(text)]
    return found + [_word_value(m[0]) for m in _WORDS_RE.finditer(text)]


def number_forms(number: float) -> list[str]:
    """Other ways prose states `number`: grouped with two decimals ("5,310.00") and rounded in thousands
    ("about 5.3k"); `numbers_in` reads both back."""
    return [f"{number:,.2f}", f"about {number / SCALES['k']:.1f}k"]


def date_forms(day: datetime.date) -> set[str]:
    """The ways prose names a date, case-folded: ISO, "march 5", "5 march", "mar 5"."""
    month = MONTHS[day.month - 1]
    return {day.isoformat(), f"{month} {day.day}".casefold(), f"{day.day} {month}".casefold(),
            f"{month[:3]} {day.day}".casefold()}
