"""Typed answers: what an answer task expects, the schema its submission takes, and an exact comparison.

A task declares its answer as parts (a number, a count, a date, a time, yes/no, entities). The agent submits
one typed value per part through the `submit_answer` tool (`mcpworld.worlds.submissions`); this module turns the
parts into that argument's JSON schema and a one-line description, reads a submission into canonical values
(`read_submission`: a malformed one is an error the agent can fix, never a verdict), and compares canonical
values exactly (`judge_answer`): numbers within the part's tolerance, counts as integers, dates and times as
values, entities as a set of identities matched by id or exact name. Prose is never read here: a side remark,
a hedge or a homoglyph has no typed value to hide in.
"""

from __future__ import annotations

import datetime
import json
import re
import unicodedata
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, Field, field_validator

from mcpworld.core.models import Check

__all__ = [
    "AnswerPart",
    "Count",
    "DateAnswer",
    "Entities",
    "Number",
    "SubmissionError",
    "TimeAnswer",
    "YesNo",
    "accepted_forms",
    "answer_schema",
    "describe_answer",
    "entity",
    "judge_answer",
    "part_keys",
    "read_submission",
    "reference_submission",
    "scales",
]


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
    scales: bool = False
    """Whether the value follows the world's amounts (a balance, a sum, a difference of them, no constant from
    the rules): on other seeds the amounts are multiplied by a factor, and so is the expected value."""
    allow: list[float] = Field(default_factory=list)
    """Kept for task files written for prose answers; a typed submission is one value, so it is not read."""
    label: str = ""


class Count(_Positional):
    """A whole count; number words count too ("eight", "two issues")."""

    type: Literal["count"] = "count"
    value: int
    scales: bool = False
    """Whether the count is an amount column or a difference of them (seats left): scaled as `Number.scales`."""
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
    """Wrong candidates, or a "table.column" of the starting state: the values `mcpworld world audit` submits."""
    negated_ok: bool = False
    """Whether a negated mention ("not WEB-3") still counts as naming an expected entity."""
    label: str = ""

    @field_validator("expected")
    @classmethod
    def _has_aliases(cls, value: list[list[str]]) -> list[list[str]]:
        if any(not any(a.strip() for a in aliases) for aliases in value):
            raise ValueError("every expected entity needs at least one alias")
        return value


def _hhmm(value: str) -> str:
    """A task file's "H:MM" as "HH:MM" (a ValueError for anything else)."""
    try:
        return _clock(value, "time")
    except SubmissionError as exc:
        raise ValueError(str(exc)) from None


AnswerPart = Annotated[Union[Number, Count, DateAnswer, TimeAnswer, YesNo, Entities], Field(discriminator="type")]


def entity(*aliases: str, among: list[str] | str = (), label: str = "") -> Entities:  # type: ignore[assignment]
    """One expected entity, known by any of `aliases`."""
    return Entities(expected=[list(aliases)], among=among if isinstance(among, str) else list(among), label=label)



# --- submissions: schema, description, reading -------------------------------------------------------------


class SubmissionError(ValueError):
    """A submission that is not of the task's answer type: the agent is told why and may submit again."""


_KEY_RE = re.compile(r"[^a-z0-9]+")
_DEFAULT_KEYS = {"number": "amount", "count": "count", "date": "date", "time": "time", "yesno": "yes",
                 "entities": "names"}


def part_keys(parts: list[AnswerPart]) -> list[str]:
    """The key each part takes in a several-part submission: its label as a slug, else its type's word."""
    keys: list[str] = []
    for part in parts:
        base = _KEY_RE.sub("_", part.label.lower()).strip("_") or _DEFAULT_KEYS[part.type]
        key, n = base, 2
        while key in keys:
            key, n = f"{base}_{n}", n + 1
        keys.append(key)
    return keys


def _part_schema(part: AnswerPart) -> dict[str, Any]:
    if isinstance(part, Count):
        return {"type": "integer", "description": "a whole count"}
    if isinstance(part, Number):
        return {"type": "number", "description": "a number (an amount in the record's own unit)"}
    if isinstance(part, DateAnswer):
        return {"type": "string", "format": "date", "description": "a date, YYYY-MM-DD"}
    if isinstance(part, TimeAnswer):
        if part.end is None:
            return {"type": "string", "pattern": r"^\d{1,2}:\d{2}$", "description": "a time of day, HH:MM (24-hour)"}
        clock = {"type": "string", "pattern": r"^\d{1,2}:\d{2}$"}
        return {"type": "object", "properties": {"start": clock, "end": clock}, "required": ["start", "end"],
                "additionalProperties": False, "description": "a time range, {\"start\": HH:MM, \"end\": HH:MM}"}
    if isinstance(part, YesNo):
        return {"type": "boolean", "description": "true for yes, false for no"}
    return {"type": "array", "items": {"type": "string"}, "uniqueItems": True,
            "description": "every entity the question asks for, each by its id or its exact name"}


def answer_schema(parts: list[AnswerPart]) -> dict[str, Any]:
    """The JSON schema of `submit_answer`'s `answer` for these parts: the part's own for one, an object for several."""
    if len(parts) == 1:
        return _part_schema(parts[0])
    keys = part_keys(parts)
    return {"type": "object", "properties": {k: _part_schema(p) for k, p in zip(keys, parts)},
            "required": keys, "additionalProperties": False}


def _part_words(part: AnswerPart) -> str:
    return str(_part_schema(part)["description"])


def describe_answer(parts: list[AnswerPart]) -> str:
    """One sentence an agent reads to know what to submit (it names types, never values)."""
    if len(parts) == 1:
        return f"Answer by calling submit_answer once, with `answer`: {_part_words(parts[0])}."
    fields = "; ".join(f'"{k}": {_part_words(p)}' for k, p in zip(part_keys(parts), parts))
    return f"Answer by calling submit_answer once, with `answer`: an object with {fields}."


_NUMBER_TEXT_RE = re.compile(r"[$€£]?\s*-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SubmissionError(f"{what}: expected a number, got {type(value).__name__} {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if not _NUMBER_TEXT_RE.fullmatch(text):
            raise SubmissionError(f"{what}: {value!r} is not a number (write digits, e.g. 1250.5)")
        value = float(re.sub(r"[$€£,\s]", "", text))
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise SubmissionError(f"{what}: {value!r} is not a finite number")
    return number


def _clock(value: Any, what: str) -> str:
    match = re.fullmatch(r"(\d{1,2}):(\d{2})(?::00)?", value.strip()) if isinstance(value, str) else None
    if match is None or int(match[1]) > 23 or int(match[2]) > 59:
        raise SubmissionError(f"{what}: expected a time of day as HH:MM (24-hour), got {value!r}")
    return f"{int(match[1]):02d}:{match[2]}"


def _name(value: str) -> str:
    """How entity names compare: Unicode-normalized (NFKC: compatibility forms, not other scripts), case-folded,
    spaces collapsed. A Cyrillic "а" stays a different letter from a Latin "a"."""
    return " ".join(unicodedata.normalize("NFKC", value).casefold().split())


def _read_part(part: AnswerPart, value: Any, what: str) -> Any:
    """A submitted value as the part's canonical value; SubmissionError when it is not of the part's type."""
    if isinstance(part, Count):
        number = _number(value, what)
        if not number.is_integer():
            raise SubmissionError(f"{what}: expected a whole count, got {value!r}")
        return int(number)
    if isinstance(part, Number):
        return _number(value, what)
    if isinstance(part, DateAnswer):
        try:
            if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
                raise ValueError
            return datetime.date.fromisoformat(value.strip())
        except ValueError:
            raise SubmissionError(f"{what}: expected a date as YYYY-MM-DD, got {value!r}") from None
    if isinstance(part, TimeAnswer):
        if part.end is None:
            return _clock(value, what)
        if isinstance(value, str) and value.count("-") == 1:
            value = dict(zip(("start", "end"), value.split("-")))
        elif isinstance(value, list) and len(value) == 2:
            value = dict(zip(("start", "end"), value))
        if not isinstance(value, dict) or set(value) != {"start", "end"}:
            raise SubmissionError(f"{what}: expected a range {{\"start\": \"HH:MM\", \"end\": \"HH:MM\"}}, "
                                  f"got {value!r}")
        return (_clock(value["start"], f"{what}.start"), _clock(value["end"], f"{what}.end"))
    if isinstance(part, YesNo):
        if isinstance(value, bool):
            return value
        words = {"yes": True, "true": True, "no": False, "false": False}
        if isinstance(value, str) and value.strip().lower() in words:
            return words[value.strip().lower()]
        raise SubmissionError(f"{what}: expected true or false, got {value!r}")
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(i, str) and i.strip() for i in items):
        raise SubmissionError(f"{what}: expected a list of ids or names (strings), got {value!r}")
    return frozenset(_name(i) for i in items)


def read_submission(parts: list[AnswerPart], answer: Any) -> list[Any]:
    """`answer` read into one canonical value per part, or SubmissionError saying what is wrong and where.

    Accepted forms: a count as 8, 8.0 or "8"; a number as 12.5, "12.5" or "1,250.50"; an entity list or a
    single id/name string; yes/no as a boolean or "yes"/"no"; a range as an object, a pair or "HH:MM-HH:MM".
    With one part, the bare value or an object holding it under the part's key. Any of these may also come as its
    JSON text (a client whose tool schema made `answer` a string).
    """
    keys = part_keys(parts)
    if isinstance(answer, str) and answer.strip()[:1] in ("{", "["):  # the value as JSON text (string-typed tools)
        try:
            answer = json.loads(answer)
        except ValueError:
            pass
    if len(parts) == 1:
        if isinstance(answer, dict) and set(answer) == {keys[0]}:
            answer = answer[keys[0]]
        return [_read_part(parts[0], answer, "answer")]
    if not isinstance(answer, dict):
        raise SubmissionError(f"answer: expected an object with {', '.join(keys)}, got {type(answer).__name__}")
    missing, unknown = [k for k in keys if k not in answer], [k for k in answer if k not in keys]
    if missing or unknown:
        said = (f"missing {', '.join(missing)}" if missing else "") + ("; " if missing and unknown else "") + (
            f"unknown {', '.join(map(str, unknown))}" if unknown else "")
        raise SubmissionError(f"answer: {said} (the keys are {', '.join(keys)})")
    return [_read_part(p, answer[k], f"answer.{k}") for k, p in zip(keys, parts)]


# --- the reference and its accepted forms ----------------------------------------------------------------------


def _reference_value(part: AnswerPart) -> Any:
    if isinstance(part, (Count, Number)):
        return part.value
    if isinstance(part, DateAnswer):
        return part.value.isoformat()
    if isinstance(part, TimeAnswer):
        return part.start if part.end is None else {"start": part.start, "end": part.end}
    if isinstance(part, YesNo):
        return part.value
    return [aliases[0] for aliases in part.expected]


def reference_submission(parts: list[AnswerPart], amount: Callable[[Any], Any] | None = None) -> Any:
    """The correct submission in its plainest form (what the oracle submits); `amount` shows the parts that follow
    the world's amounts as a seed does (`View.amount`)."""
    values = [amount(_reference_value(p)) if amount is not None and scales(p) else _reference_value(p)
              for p in parts]
    if len(parts) == 1:
        return values[0]
    return dict(zip(part_keys(parts), values))


def scales(part: AnswerPart) -> bool:
    """Whether a part's value follows the world's amounts (see `Number.scales`)."""
    return isinstance(part, (Number, Count)) and part.scales


def _forms(part: AnswerPart) -> list[Any]:
    value = _reference_value(part)
    if isinstance(part, Count):
        return [value, float(value), str(value)]
    if isinstance(part, Number):
        return [value, str(value), f"{value:,.2f}", value + part.tolerance / 2]
    if isinstance(part, TimeAnswer):
        return [value] if part.end is None else [value, f"{part.start}-{part.end}", [part.start, part.end]]
    if isinstance(part, YesNo):
        return [value, "yes" if value else "no"]
    if isinstance(part, Entities):
        forms: list[Any] = [value]
        for i in range(max(len(a) for a in part.expected)):  # each alias in turn, and in other cases and order
            forms.append([aliases[i % len(aliases)] for aliases in reversed(part.expected)])
        forms.append([a[0].upper() for a in part.expected])
        if len(part.expected) == 1:
            forms.append(part.expected[0][-1])
        return forms
    return [value]


def accepted_forms(parts: list[AnswerPart]) -> list[Any]:
    """Correct submissions in every form a part accepts (each must pass: the audit and tests play them)."""
    keys = part_keys(parts)
    per_part = [_forms(p) for p in parts]
    out: list[Any] = []
    for i in range(max(len(f) for f in per_part)):
        chosen = [forms[i % len(forms)] for forms in per_part]
        out.append(chosen[0] if len(parts) == 1 else dict(zip(keys, chosen)))
    if len(parts) == 1:
        out.append({keys[0]: per_part[0][0]})
    return out


# --- judging ---------------------------------------------------------------------------------------------------


def _show(value: Any) -> str:
    if isinstance(value, frozenset):
        return "{" + ", ".join(sorted(value)) + "}"
    if isinstance(value, tuple):
        return "-".join(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _matches(part: AnswerPart, got: Any) -> tuple[bool, str]:
    """Whether a canonical value is the part's expected one, and the expected value in words (for the trainer)."""
    if isinstance(part, Number):
        return abs(got - part.value) <= part.tolerance + 1e-9, f"{_show(part.value)} ± {part.tolerance:g}"
    if isinstance(part, Entities):
        remaining = [{_name(a) for a in aliases} for aliases in part.expected]
        unmatched = set(got)
        for name in got:  # each submitted name must be an alias of exactly one expected entity, each entity named
            owners = [i for i, aliases in enumerate(remaining) if name in aliases]
            if len(owners) == 1:
                unmatched.discard(name)
        covered = all(any(n in aliases for n in got) for aliases in remaining)
        return covered and not unmatched, "{" + ", ".join(a[0] for a in part.expected) + "}"
    want = _read_part(part, _reference_value(part), "reference")
    return got == want, _show(want)


def judge_answer(parts: list[AnswerPart], submitted: list[Any]) -> list[Check]:
    """One check per part: the canonical submitted value against the expected one, exactly (numbers within
    tolerance, entities as a set). Details name expected values: they reach only token holders (sealed verdicts)."""
    checks = []
    for key, part, got in zip(part_keys(parts), parts, submitted):
        ok, want = _matches(part, got)
        checks.append(Check(name=f"answer {key}", passed=ok, detail=f"submitted {_show(got)}; expected {want}",
                            group="answer"))
    return checks
