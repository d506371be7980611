"""Typed answers: what an answer or refusal task expects, and a reading of the final answer that substrings can't game.

A task declares its answer as parts (a number, a count, a date, a time, yes/no, entities). The checker reads
the answer the way a person would: whole words and whole numbers only, number words and formats, negation,
and a second, different value counts against the answer, so hedging ("8 or 12") and listing every candidate
fail while paraphrases ("eight seats are still free") pass. Values the user wrote in the instruction are echoes,
never conflicts.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Annotated, Any, ClassVar, Literal, TypeVar, Union

from pydantic import BaseModel, Field, field_validator

from mcpworld.core.models import Check

__all__ = [
    "AnswerContext",
    "AnswerPart",
    "Count",
    "DateAnswer",
    "Entities",
    "Number",
    "TimeAnswer",
    "YesNo",
    "check_answer",
    "entity",
    "refusal_checks",
]

T = TypeVar("T")


@dataclass
class AnswerContext:
    """What the checker knows besides the answer: the instruction (whose values are echoes) and the start state."""

    instruction: str = ""
    resolve: Callable[[str], list[str]] | None = None
    """"table.column" -> every value of that column in the task's starting database (as strings)."""
    max_chars: int = 400


# --- answer parts ------------------------------------------------------------------------------------------------


class _Positional(BaseModel):
    """Parts read best with their value first: `Count(8)`, `TimeAnswer("13:00", "14:00")`."""

    positional: ClassVar[tuple[str, ...]] = ("value",)

    def __init__(self, *args: Any, **data: Any) -> None:
        names = type(self).positional
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} positional argument(s)")
        data.update(zip(names, args))
        super().__init__(**data)



class Number(_Positional):
    """A number or money amount, equal within an absolute tolerance."""

    type: Literal["number"] = "number"
    value: float
    tolerance: float = 0.005
    allow: list[float] = Field(default_factory=list)
    """Other numbers the answer may also state (e.g. the parts of a total)."""
    label: str = ""


class Count(_Positional):
    """A whole count; number words count too ("eight", "two issues")."""

    type: Literal["count"] = "count"
    value: int
    allow: list[float] = Field(default_factory=list)
    label: str = ""


class DateAnswer(_Positional):
    """A calendar date; a date the answer writes without a year takes this one's year."""

    type: Literal["date"] = "date"
    value: datetime.date
    allow: list[datetime.date] = Field(default_factory=list)
    label: str = ""


class TimeAnswer(_Positional):
    """A time of day, or a range when `end` is set; "HH:MM" 24-hour strings."""

    positional: ClassVar[tuple[str, ...]] = ("start", "end")

    type: Literal["time"] = "time"
    start: str
    end: str | None = None
    allow: list[str] = Field(default_factory=list)
    label: str = ""

    @field_validator("start", "end")
    @classmethod
    def _clock_time(cls, value: str | None) -> str | None:
        return None if value is None else _hhmm(value)

    @field_validator("allow")
    @classmethod
    def _clock_times(cls, values: list[str]) -> list[str]:
        return [_hhmm(v) for v in values]


class YesNo(_Positional):
    """A yes/no answer, read from the answer's first clause."""

    type: Literal["yesno"] = "yesno"
    value: bool
    label: str = ""


class Entities(_Positional):
    """One entity or a set of entities, named by id or name; `among` are the wrong candidates."""

    positional: ClassVar[tuple[str, ...]] = ("expected",)

    type: Literal["entities"] = "entities"
    expected: list[list[str]]
    """Each inner list holds the aliases of ONE expected entity, e.g. [["Lucas", "Lucas Brown", "P03"], ["Grace"]]."""
    among: list[str] | str = Field(default_factory=list)
    """Wrong candidates, or a "table.column" reference resolved by `AnswerContext.resolve`."""
    negated_ok: bool = False
    """Whether a negated mention ("not WEB-3") still counts as naming an expected entity."""
    label: str = ""

    @field_validator("expected")
    @classmethod
    def _has_aliases(cls, value: list[list[str]]) -> list[list[str]]:
        if any(not any(a.strip() for a in aliases) for aliases in value):
            raise ValueError("every expected entity needs at least one alias")
        return value


AnswerPart = Annotated[Union[Number, Count, DateAnswer, TimeAnswer, YesNo, Entities], Field(discriminator="type")]


def entity(*aliases: str, among: list[str] | str = (), label: str = "") -> Entities:  # type: ignore[assignment]
    """One expected entity, known by any of `aliases`."""
    return Entities(expected=[list(aliases)], among=among if isinstance(among, str) else list(among), label=label)


# --- text: normalizing, mentions, negation, masking --------------------------------------------------------------

_CHARS = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-",
                        "\u2011": "-", "\u2212": "-", "\u00a0": " "})
_AMPM_RE = re.compile(r"(?<![a-z])([ap])\.m(?:\.|(?![a-z]))", re.I)
_ISO_T_RE = re.compile(r"(?<=\d{4}-\d\d-\d\d)T(?=\d\d:)")
_CLAUSE_RE = re.compile(r"[.,;:!?](?!\d)|\bbut\b", re.I)
_WORD_RE = re.compile(r"[\w']+")
_NEGATIONS = frozenset({"not", "no", "never", "cannot", "without", "except", "neither", "nor", "isn't", "aren't",
                        "wasn't", "n't"})
_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]+(?:[-_./][A-Za-z0-9]+)*")
_NOT_ID_RE = re.compile(r"\d+(?:st|nd|rd|th|am|pm)?(?:[-/.:]\d+(?:st|nd|rd|th|am|pm)?)*(?:-[a-z]+)*", re.I)
_CAPS_ID_RE = re.compile(r"(?<![\w-])[A-Z]{2,}(?:-[A-Z0-9]+)+(?![\w-])")
_EMAIL_RE = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL_RE = re.compile(r"https?://\S+")
_PLAIN_NUMBER_RE = re.compile(r"[-+$]?\d[\d,]*(?:\.\d+)?%?")


def _normalize(text: str) -> str:
    """Typographic variants folded to ASCII, keeping every position (masks and mentions share offsets)."""
    text = _AMPM_RE.sub(lambda m: m[1] + "m" + " " * (len(m[0]) - 2), text.translate(_CHARS))
    return _ISO_T_RE.sub(" ", text)


@lru_cache(maxsize=4096)
def _name_re(name: str) -> re.Pattern[str]:
    """A whole-word, case-insensitive pattern for a name: "E03" is not in "E031", "Beta 1" not in "Beta 1.5"."""
    body = r"\s+".join(map(re.escape, name.split()))
    return re.compile(rf"(?<!\w)(?<!\w[-/])(?<!\d[.,]){body}(?!\w)(?![-/]\w)(?![.,]\d)", re.I)


def _key(name: str) -> str:
    """How names compare: normalized, trimmed, case-folded."""
    return _normalize(name).strip().lower()


def _finds(name: str, text: str) -> bool:
    return bool(name.strip()) and _name_re(_key(name)).search(text) is not None


def _longest_first(hits: Iterable[tuple[int, int, T]]) -> list[tuple[int, int, T]]:
    """Non-overlapping hits, longer ones winning overlaps, in reading order."""
    taken: list[tuple[int, int, T]] = []
    for hit in sorted(hits, key=lambda h: (h[0] - h[1], h[0])):
        if all(hit[1] <= t[0] or hit[0] >= t[1] for t in taken):
            taken.append(hit)
    return sorted(taken, key=lambda h: h[0])


def _spans(hits: Iterable[tuple[int, int, Any]]) -> list[tuple[int, int]]:
    return [(h[0], h[1]) for h in hits]


def _negated(text: str, pos: int) -> bool:
    """A negation word within three words before `pos`, in the same clause ("it is not delayed")."""
    start = max((m.end() for m in _CLAUSE_RE.finditer(text, 0, pos)), default=0)
    words = [w.strip("'").lower() for w in _WORD_RE.findall(text[start:pos])[-3:]]
    return any(w in _NEGATIONS or w.endswith("n't") for w in words)


_DENIED_AFTER_RE = re.compile(r"\s+(?:(?:is|are|was|were|does|do|did|has|have)\s+(?:not|never)|isn't|aren't|wasn't|"
                              r"weren't|doesn't|don't|didn't|hasn't|haven't)\b", re.I)


def _denied(text: str, end: int) -> bool:
    """The mention is the subject of a negated verb right after it ("WEB-3 is not a blocker", "Lucas isn't")."""
    return _DENIED_AFTER_RE.match(text, end) is not None


@dataclass(frozen=True)
class _Mention:
    start: int
    end: int
    name: str  # normalized, lower-case
    negated: bool


def _mentions(text: str, names: Iterable[str]) -> list[_Mention]:
    """Every whole-word mention of `names` in (normalized) `text`; the longer name wins an overlap."""
    keys = {_key(n) for n in names if n.strip()}
    hits = ((m.start(), m.end(), key) for key in keys for m in _name_re(key).finditer(text))
    return [_Mention(s, e, key, _negated(text, s) or _denied(text, e)) for s, e, key in _longest_first(hits)]


def _mask(text: str, spans: Iterable[tuple[int, int]]) -> str:
    chars = list(text)
    for s, e in spans:
        chars[s:e] = " " * (e - s)
    return "".join(chars)


def _id_spans(text: str) -> list[tuple[int, int]]:
    """Id-like tokens (T-1001, MW101-0603, CU04, PM-ADA-GIFT), emails and links: none is a free-standing value."""
    spans = [m.span() for m in _TOKEN_RE.finditer(text) if re.search("[A-Za-z]", m[0]) and re.search(r"\d", m[0])
             and not _NOT_ID_RE.fullmatch(m[0])]
    return spans + [m.span() for rx in (_CAPS_ID_RE, _EMAIL_RE, _URL_RE) for m in rx.finditer(text)]


# --- values: dates, times, numbers -------------------------------------------------------------------------------

_MONTHS = {name: i for i, names in enumerate(
    (("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
     ("july", "jul"), ("august", "aug"), ("september", "sept", "sep"), ("october", "oct"), ("november", "nov"),
     ("december", "dec")), start=1) for name in names}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_YEAR = r"(?:(?:,\s*|\s+)(?P<y>\d{4})(?!\w))?"
_DATE_RES = (
    re.compile(r"(?<![\w/.-])(?P<y>\d{4})[-/](?P<m>\d{1,2})[-/](?P<d>\d{1,2})(?![\w/]|[-.]\d)"),
    re.compile(rf"\b(?P<mon>{_MONTH})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?![\w:]|\.\d){_YEAR}", re.I),
    re.compile(rf"(?<![\w.,-])(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{_MONTH})\b\.?{_YEAR}", re.I),
    re.compile(r"(?<![\w/.-])(?P<m>\d{1,2})/(?P<d>\d{1,2})(?:/(?P<y>\d{4}|\d{2}))?(?![\w/]|[.-]\d)"),
)
_TIME_RE = re.compile(
    r"(?<![\w:.])(?P<h>\d{1,2})(?::(?P<m>\d\d)(?::\d\d)?(?:\s*(?P<ap>[ap])m)?|\s*(?P<ap2>[ap])m)(?!\w)"
    r"|\b(?P<word>noon|midday|midnight)\b", re.I)
_RANGE_START_RE = re.compile(
    r"(?:(?<![\w:.])(?P<h>\d{1,2})(?::(?P<m>\d\d))?\s*(?:-|to|until|till)"
    r"|\bbetween\s+(?P<bh>\d{1,2})(?::(?P<bm>\d\d))?\s+and)\s*$", re.I)
_NUM_RE = re.compile(
    r"(?:(?<![^\s(\[])(?P<sign>-))?(?:[$€£]\s?)?(?<![\w.])(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?(?!\w|\.\d)")
_SMALL = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_NUMBER_WORD = "|".join(sorted({*_SMALL, *_TENS, *_SCALES}, key=len, reverse=True))
_WORDS_RE = re.compile(
    rf"(?<![\w-])(?:{_NUMBER_WORD})(?:(?:\s+and\s+|\s*-\s*|\s+)(?:{_NUMBER_WORD}))*(?!\w|-\w)", re.I)
_DETERMINERS = frozenset({"the", "this", "that", "which", "each", "any", "every", "no", "another", "a", "some"})
_ONE_RE = re.compile(r"\ba\s+single\b", re.I)
_ZERO_RE = re.compile(r"\bnone\b|\bno\b(?=\s+[a-z])", re.I)


def _hhmm(value: str) -> str:
    m = re.fullmatch(r"(\d{1,2}):(\d\d)", value.strip())
    minutes = _clock(int(m[1]), int(m[2]), "") if m else None
    if minutes is None:
        raise ValueError(f"not an HH:MM time: {value!r}")
    return _show_time(minutes)


def _clock(hour: int, minute: int, meridiem: str) -> int | None:
    """Minutes after midnight, or None for an impossible time."""
    if minute > 59:
        return None
    if meridiem:
        return (hour % 12 + (12 if meridiem == "p" else 0)) * 60 + minute if 1 <= hour <= 12 else None
    return hour * 60 + minute if hour <= 23 else None


def _show_time(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _dates(text: str, year: int) -> list[tuple[int, int, datetime.date]]:
    """ISO, "April 4(th)(, 2026)", "4 April 2026", "4/4/2026" (month first); a missing year is `year`."""
    hits = []
    for rx in _DATE_RES:
        for m in rx.finditer(text):
            g = m.groupdict()
            month = int(g["m"]) if g.get("m") else _MONTHS[g["mon"].lower()]
            y = int(g["y"]) if g.get("y") else year
            try:
                hits.append((m.start(), m.end(), datetime.date(y + 2000 if y < 100 else y, month, int(g["d"]))))
            except ValueError:
                continue
    return _longest_first(hits)


def _times(text: str) -> list[tuple[int, int, str]]:
    """Times of day ("11 am", "14:00", "2:30pm", "noon"), and the bare start of a range ("1-2 pm", "from 1 to 2 pm")."""
    hits: list[tuple[int, int, str]] = []
    for m in _TIME_RE.finditer(text):
        if m["word"]:
            hits.append((m.start(), m.end(), "00:00" if m["word"].lower() == "midnight" else "12:00"))
            continue
        meridiem = (m["ap"] or m["ap2"] or "").lower()
        end = _clock(int(m["h"]), int(m["m"] or 0), meridiem)
        if end is None:
            continue
        hits.append((m.start(), m.end(), _show_time(end)))
        r = _RANGE_START_RE.search(text, 0, m.start())
        if r:
            start = _clock(int(r["h"] or r["bh"]), int(r["m"] or r["bm"] or 0), meridiem)
            if start is not None and meridiem == "p" and start > end:
                start -= 12 * 60  # "11-1 pm" starts at 11 am
            if start is not None:
                hits.append((r.start(), r.start() + len(r[0].rstrip()), _show_time(start)))
    return _longest_first(hits)


def _word_numbers(run: str) -> list[int]:
    """Number words to values: "one hundred and five" -> [105], "twenty-one" -> [21], "two three" -> [2, 3]."""
    out: list[int] = []
    total = current = 0
    previous = ""
    for word in re.findall(r"[a-z]+", run.lower()):
        if word == "and":
            continue
        if word in _SCALES:
            if _SCALES[word] == 100:
                current = (current or 1) * 100
            else:
                total, current = total + (current or 1) * _SCALES[word], 0
            previous = "scale"
            continue
        value = _SMALL.get(word, _TENS.get(word, 0))
        if previous and previous != "scale" and not (previous == "tens" and 0 < value < 10):
            out.append(total + current)
            total = current = 0
        current += value
        previous = "tens" if word in _TENS else "small"
    return [*out, total + current] if previous else out


def _numbers(text: str) -> list[float]:
    """Free-standing numbers in digits ("8", "1,000", "$1,000.50", "-300", "12.5%") or words, in reading order."""
    hits: list[tuple[int, float]] = []
    for m in _NUM_RE.finditer(text):
        value = float(m["int"].replace(",", "") + (m["frac"] or ""))
        hits.append((m.start(), -value if m["sign"] else value))
    for m in _WORDS_RE.finditer(text):
        before = _WORD_RE.findall(text[:m.start()])
        if m[0].lower() == "one" and before and before[-1].lower() in _DETERMINERS:
            continue  # "the one in business class", "no one"
        sign = -1.0 if before and before[-1].lower() in ("minus", "negative") else 1.0
        hits += [(m.start(), sign * float(v)) for v in _word_numbers(m[0])]
    return [v for _, v in sorted(hits, key=lambda h: h[0])]


class _Reading:
    """A text normalized, with what is not a free-standing value masked: names, id-like tokens, emails, links."""

    def __init__(self, text: str, names: Iterable[str]) -> None:
        self.text = _normalize(text)
        names = [n for n in names if not _PLAIN_NUMBER_RE.fullmatch(n.strip())]  # a bare number stays a number
        spans = [(m.start, m.end) for m in _mentions(self.text, names)] + _id_spans(self.text)
        self.masked = _mask(self.text, spans)

    def dates(self, year: int) -> list[datetime.date]:
        return [d for _, _, d in _dates(self.masked, year)]

    @cached_property
    def _date_spans(self) -> list[tuple[int, int]]:
        return _spans(_dates(self.masked, 2000))  # a leap year, so that "Feb 29" is masked too

    @cached_property
    def _time_hits(self) -> list[tuple[int, int, str]]:
        return _times(_mask(self.masked, self._date_spans))

    @property
    def times(self) -> list[str]:
        return [t for _, _, t in self._time_hits]

    @cached_property
    def _numeric(self) -> str:
        return _mask(self.masked, self._date_spans + _spans(self._time_hits))

    def numbers(self, count: int | None = None) -> list[float]:
        """The numbers stated; for an expected count of 1 also "a single", of 0 also "none"/"no seats"."""
        found = _numbers(self._numeric)
        extra = {1: _ONE_RE, 0: _ZERO_RE}.get(count) if count is not None else None
        if extra is None or count is None:
            return found
        return found + [float(count)] * len(extra.findall(self._numeric))


# --- checks ------------------------------------------------------------------------------------------------------


def _show_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.10g}"


def _part_name(part: AnswerPart) -> str:
    if isinstance(part, YesNo):
        return f"answer says {'yes' if part.value else 'no'}" + (f" ({part.label})" if part.label else "")
    if isinstance(part, Entities):
        return f"answer names {part.label or ', '.join(aliases[0] for aliases in part.expected) or 'no candidate'}"
    return f"answer states {part.label + ': ' if part.label else ''}{_want(part)}"


def _want(part: Number | Count | DateAnswer | TimeAnswer) -> str:
    if isinstance(part, DateAnswer):
        return part.value.isoformat()
    if isinstance(part, TimeAnswer):
        return part.start + (f"-{part.end}" if part.end else "")
    return _show_number(part.value)


def _unique(values: Iterable[T], same: Callable[[T, T], bool]) -> list[T]:
    out: list[T] = []
    for v in values:
        if not any(same(v, o) for o in out):
            out.append(v)
    return out


def _value_check(name: str, want: list[T], found: list[T], excused: list[T], same: Callable[[T, T], bool],
                 show: Callable[[T], str], what: str, wanted: str) -> Check:
    """Every wanted value stated, and no other value unless excused (an echo of the instruction, or allowed)."""
    found = _unique(found, same)
    missing = [w for w in want if not any(same(w, f) for f in found)]
    extra = [f for f in found if not any(same(f, x) for x in [*want, *excused])]
    if not found:
        return Check(name=name, passed=False, detail=f"expected {wanted}; found no {what}")
    stated = ", ".join(map(show, found))
    if missing or extra:
        return Check(name=name, passed=False, detail=f"expected {wanted}; the answer states {stated}")
    excused_found = [f for f in found if not any(same(f, w) for w in want)]
    also = f" (and {', '.join(map(show, excused_found))}: echoed or allowed)" if excused_found else ""
    return Check(name=name, passed=True, detail=f"states {wanted}{also}")


_YES_RE = re.compile(r"\b(?:yes|yeah|yep|yup|correct|indeed|sure|it is|it's|it does)\b(?!\s+(?:not|no|never)\b)",
                     re.I)
_NO_RE = re.compile(r"\b(?:no|nope|not|never|cannot|nah)\b|\b\w+n't\b", re.I)


def _yes_no(part: YesNo, text: str) -> Check:
    """Polarity of the first clause: "No, it's delayed" is no; "It is not on time" is no; both or neither fails."""
    name = _part_name(part)
    clause = _CLAUSE_RE.split(text.strip(), maxsplit=1)[0]
    yes = [m for m in _YES_RE.finditer(clause) if not _negated(clause, m.start())]
    no = _NO_RE.search(clause)
    if bool(yes) == bool(no):
        return Check(name=name, passed=False, detail=f"no clear yes or no in {clause.strip()!r}")
    said = bool(yes)
    return Check(name=name, passed=said == part.value,
                 detail=f"expected {'yes' if part.value else 'no'}; the answer says {'yes' if said else 'no'}")



def _candidates(part: Entities, ctx: AnswerContext) -> list[str] | None:
    """The wrong candidates: listed, or every value of a start-state column (None when it can't be resolved).

    Expected aliases are never wrong candidates.
    """
    if isinstance(part.among, str):
        if ctx.resolve is None:
            return None
        among = [str(v) for v in ctx.resolve(part.among) if v is not None]
    else:
        among = part.among
    expected = {_key(a) for aliases in part.expected for a in aliases}
    return [c for c in dict.fromkeys(among) if c.strip() and _key(c) not in expected]


def _entities(part: Entities, candidates: list[str] | None, text: str, instruction: str) -> Check:
    """Every expected entity named (un-negated unless `negated_ok`), and no wrong candidate named un-negated."""
    name = _part_name(part)
    if candidates is None:  # failing beats silently checking against no candidates at all
        return Check(name=name, passed=False, detail=f"cannot resolve {part.among!r}: the context has no resolver")
    mentions = _mentions(text, [a for aliases in part.expected for a in aliases] + candidates)
    problems = []
    for aliases in part.expected:
        keys = {_key(a) for a in aliases}
        said = [m for m in mentions if m.name in keys]
        if not any(part.negated_ok or not m.negated for m in said):
            problems.append(f"{text[said[0].start:said[0].end]!r} is negated" if said else
                            f"does not name {aliases[0]}")
    # A candidate the user wrote is an echo, but only when it came from the database: an explicit `among` is the
    # author's list of wrong picks ("Cedar or Oak?" answered "Cedar or Oak" hedges, it does not echo).
    echoes_ok = isinstance(part.among, str)
    wrong = {_key(c): c for c in candidates if not (echoes_ok and _finds(c, instruction))}
    named_wrong = list(dict.fromkeys(wrong[m.name] for m in mentions if m.name in wrong and not m.negated))
    if named_wrong:
        problems.append(f"names wrong candidates: {', '.join(named_wrong)}")
    return Check(name=name, passed=not problems, detail="; ".join(problems) or "names " + ", ".join(
        text[m.start:m.end] for m in mentions if not m.negated and m.name not in wrong))


def _length(answer: str | None, ctx: AnswerContext) -> Check:
    size = len(answer or "")
    return Check(name=f"answer at most {ctx.max_chars} characters",
                 passed=bool((answer or "").strip()) and size <= ctx.max_chars,
                 detail=f"{size} characters; the cap is {ctx.max_chars}" if (answer or "").strip() else "no answer")


def check_answer(answer: str | None, parts: list[AnswerPart], ctx: AnswerContext) -> list[Check]:
    """One check per part, then the length check. Every failing check says what was expected and what was found."""
    text = (answer or "").strip()
    if not text:
        return [*(Check(name=_part_name(p), passed=False, detail="no answer") for p in parts), _length(answer, ctx)]
    candidates = {id(p): _candidates(p, ctx) for p in parts if isinstance(p, Entities)}
    names = [n for p in parts if isinstance(p, Entities)
             for n in [*(a for aliases in p.expected for a in aliases), *(candidates[id(p)] or [])]]
    said, echo = _Reading(text, names), _Reading(ctx.instruction, names)
    checks = []
    for part in parts:
        others = [q for q in parts if q is not part]
        name = _part_name(part)
        if isinstance(part, (Number, Count)):
            tolerance = part.tolerance if isinstance(part, Number) else 1e-9
            hint = part.value if isinstance(part, Count) else None
            excused = [*echo.numbers(), *part.allow,
                       *(v for q in others if isinstance(q, (Number, Count)) for v in (q.value, *q.allow))]
            def close(a: float, b: float, t: float = tolerance) -> bool:
                return abs(a - b) <= t + 1e-9

            checks.append(_value_check(name, [float(part.value)], said.numbers(hint), excused, close, _show_number,
                                       "count" if isinstance(part, Count) else "number", _want(part)))
        elif isinstance(part, DateAnswer):
            year = part.value.year
            excused_dates = [*echo.dates(year), *part.allow,
                             *(d for q in others if isinstance(q, DateAnswer) for d in (q.value, *q.allow))]
            checks.append(_value_check(name, [part.value], said.dates(year), excused_dates, lambda a, b: a == b,
                                       datetime.date.isoformat, "date", _want(part)))
        elif isinstance(part, TimeAnswer):
            want = [part.start] + ([part.end] if part.end else [])
            excused_times = [*echo.times, *part.allow,
                             *(t for q in others if isinstance(q, TimeAnswer) for t in (q.start, q.end, *q.allow) if t)]
            checks.append(_value_check(name, want, said.times, excused_times, lambda a, b: a == b, str, "time",
                                       _want(part)))
        elif isinstance(part, YesNo):
            checks.append(_yes_no(part, said.text))
        else:
            checks.append(_entities(part, candidates[id(part)], said.text, echo.text))
    return [*checks, _length(answer, ctx)]


# --- refusals ----------------------------------------------------------------------------------------------------

_REFUSAL_RE = re.compile(
    r"\b(?:cannot|can'?t|can not|couldn'?t|could not|unable|won'?t be able|will not be able|refuse[sd]?|declined?"
    r"|(?:not|isn'?t|aren'?t|wasn'?t) (?:able|possible|allowed|permitted|eligible)|ineligible|must not|may not"
    r"|can only|only\s+(?:[\w'-]+\s+){0,4}?(?:can|may))\b",
    re.I)
_DONE_VERBS = (r"cancell?ed|refunded|processed|updated|changed|booked|rebooked|moved|issued|applied|closed|deleted"
               r"|removed|transferred|completed|submitted|reassigned|assigned|added|granted|approved|unfrozen"
               r"|rescheduled|scheduled|placed|created|upgraded|downgraded|reopened|merged")
_SUCCESS_RE = re.compile(
    rf"^\W*(?:done|all set|completed|success)\b|\bsuccessfully\b"
    rf"|\bi(?:'ve| have)?\s+(?:now\s+|just\s+|already\s+|also\s+|gone ahead and\s+|went ahead and\s+)?"
    rf"(?:{_DONE_VERBS})\b", re.I)


def refusal_checks(answer: str | None, reason_cues: Sequence[str], other_cues: Sequence[str],
                   ctx: AnswerContext) -> list[Check]:
    """A correct refusal's answer: it says no, gives this task's reason, cites no other rule, and is short.

    Other cues that are (in) a reason cue, or that the instruction itself mentions, are not counted against it.
    """
    names = ("answer refuses", "gives this task's reason", "cites no other rule")
    text = _normalize((answer or "").strip())
    if not text:
        return [*(Check(name=n, passed=False, detail="no answer") for n in names), _length(answer, ctx)]
    refusal, claim = _REFUSAL_RE.search(text), _SUCCESS_RE.search(text)
    if claim:
        refuses = Check(name=names[0], passed=False, detail=f"claims to have done it: {claim[0].strip()!r}")
    else:
        refuses = Check(name=names[0], passed=refusal is not None,
                        detail=f"says {refusal[0]!r}" if refusal else "no refusal phrase (cannot, unable, ...)")
    reasons = [c for c in reason_cues if _finds(c, text)]
    reason = Check(name=names[1], passed=bool(reasons),
                   detail=f"mentions {', '.join(reasons)}" if reasons else
                   f"mentions none of: {', '.join(reason_cues) or '(no reason cues)'}")
    instruction = _normalize(ctx.instruction)
    rest = _mask(text, ((m.start, m.end) for m in _mentions(text, reason_cues)))
    others = {_key(c): c for c in other_cues
              if not any(_finds(c, _normalize(r).lower()) for r in reason_cues) and not _finds(c, instruction)}
    cited = list(dict.fromkeys(others[m.name] for m in _mentions(rest, others) if m.name in others))
    other = Check(name=names[2], passed=not cited, detail=f"cites {', '.join(cited)}" if cited else "")
    return [refuses, reason, other, _length(answer, ctx)]
