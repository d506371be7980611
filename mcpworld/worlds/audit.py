"""`mcpworld world audit`: play a suite of wrong policies against every task; each must fail.

A verifier is only as good as the cheapest wrong episode it rejects. For every task the audit plays the
reference solution (it must pass), a few correct paraphrases of the reference answer (they must pass too),
and a suite of deliberately wrong policies: doing nothing, echoing the instruction, refusing generically,
stuffing every rule's cues into a refusal, dumping the database or what the read tools return into the
answer, stopping early, writing collateral rows, calling the right tool with the wrong arguments, giving
the reference answer with its numbers changed, random calls. A wrong policy that passes a task is a reward
hack an RL policy will find; the report names the task, the policy and the attempt that got through.

Everything runs in-process on a `WorldRuntime` (the same runtime the MCP server uses), on fresh forks with
seed 0, so the audit is deterministic and fast.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any

from mcpworld.core.models import Check, ToolCall
from mcpworld.core.schemas import random_value
from mcpworld.worlds.diff import Row, StateDiff
from mcpworld.worlds.reference import Canonical, canonical, mismatches
from mcpworld.worlds.runtime import CallResult, Episode, UnknownTask, WorldRuntime
from mcpworld.worlds.world import REFUSAL_WORDS, Task

__all__ = ["KINDS", "POLICIES", "AuditReport", "PolicyResult", "audit"]

KINDS = ("answer", "state", "refusal")
SEED = 0
GENERIC_REFUSAL = "I'm sorry, but I cannot do that."
DETAIL_CHARS = 300


# -- results ----------------------------------------------------------------------------------------------


@dataclass
class PolicyResult:
    """One policy on one task: whether any of its attempts passed (all of them, for the must-pass probes)."""

    task: str
    kind: str
    policy: str
    passed: bool
    expected_pass: bool
    attempts: int
    detail: str = ""
    attempt: str = ""  # the label of the attempt the detail is about

    @property
    def ok(self) -> bool:
        """A wrong policy failed, or a must-pass probe passed."""
        return self.passed == self.expected_pass


@dataclass
class AuditReport:
    """Every policy's result on every audited task of one world."""

    world: str
    tasks: list[str] = field(default_factory=list)
    results: list[PolicyResult] = field(default_factory=list)

    @property
    def failures(self) -> list[PolicyResult]:
        """Wrong policies that passed a task, references that failed, paraphrases that failed."""
        return [r for r in self.results if not r.ok]

    @property
    def ok(self) -> bool:
        return not self.failures

    def policies(self) -> list[str]:
        seen = [p.name for p in POLICIES if any(r.policy == p.name for r in self.results)]
        return seen + sorted({r.policy for r in self.results} - set(seen))

    def table(self) -> list[dict[str, Any]]:
        """One row per policy: "passed/total" per task kind and in all (cells with no tasks are "-")."""
        rows = []
        for name in self.policies():
            mine = [r for r in self.results if r.policy == name]
            row: dict[str, Any] = {"policy": name, "expected_pass": mine[0].expected_pass}
            for kind in (*KINDS, "total"):
                cell = [r for r in mine if kind == "total" or r.kind == kind]
                row[kind] = f"{sum(r.passed for r in cell)}/{len(cell)}" if cell else "-"
            row["ok"] = all(r.ok for r in mine)
            rows.append(row)
        return rows

    def as_dict(self) -> dict[str, Any]:
        return {
            "world": self.world,
            "ok": self.ok,
            "tasks": list(self.tasks),
            "table": self.table(),
            "failures": [asdict(r) for r in self.failures],
            "results": [asdict(r) for r in self.results],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent, default=str)


# -- attempts ---------------------------------------------------------------------------------------------


class _Skip(Exception):
    """An attempt that turned out not to apply (no row to edit, a perturbation with no effect)."""


@dataclass
class Attempt:
    """One episode to play: calls, an optional direct edit of the database, then a final answer.

    `answer` may be a function of the calls' results (for policies that dump what they saw). With
    `must_differ`, an attempt whose final state equals the reference's exactly (free fields included) is
    dropped: it did nothing wrong (a perturbed argument the tool ignores, a prefix that skips only reads).
    """

    label: str
    calls: list[ToolCall] = field(default_factory=list)
    answer: str | None | Callable[[list[CallResult]], str | None] = None
    edit: Callable[[Episode], str] | None = None
    must_differ: bool = False
    wording: bool = False  # a perturbation of text the agent words itself: a difference only in free fields is fine


@dataclass
class _Outcome:
    label: str
    passed: bool
    checks: list[Check]
    answer: str | None


@dataclass
class TaskContext:
    """What the policies may look at for one task: the runtime, the task, its starting rows, its reference."""

    runtime: WorldRuntime
    task: Task
    initial: dict[str, dict[str, Row]]
    reference_results: list[CallResult]
    reference_diff: StateDiff
    reference_raw: list[Canonical]  # every reference's final state, free fields included

    @property
    def world(self):  # type: ignore[no-untyped-def]
        return self.runtime.world

    @property
    def cap(self) -> int:
        return self.runtime.world.max_answer_chars

    @classmethod
    def build(cls, runtime: WorldRuntime, task: Task) -> TaskContext:
        initial = runtime.initial_rows(runtime.template(task))
        raw: list[Canonical] = []
        results: list[CallResult] = []
        diff = StateDiff({})
        for i, solution in enumerate([task.solution, *task.alternatives]):
            episode = runtime.fork(task.id, seed=SEED)
            try:
                out = [runtime.call(episode, s.name, s.arguments) for s in solution]
                d = runtime.diff(episode)
                raw.append(canonical(d, episode.generated, {}))
                if i == 0:
                    results, diff = out, d
            finally:
                episode.close()
        return cls(runtime, task, initial, results, diff, raw)

    def resolve(self, ref: str) -> list[str]:
        try:
            return self.runtime.column_values(self.runtime.template(self.task), ref)
        except KeyError:  # an unknown table has no candidates to try
            return []


def _play(ctx: TaskContext, attempt: Attempt) -> _Outcome | None:
    runtime = ctx.runtime
    episode = runtime.fork(ctx.task.id, seed=SEED)
    label = attempt.label
    answer: str | None = None
    try:
        results = [runtime.call(episode, c.name, c.arguments) for c in attempt.calls]
        if attempt.edit is not None:
            label = f"{label}: {attempt.edit(episode)}" if label else attempt.edit(episode)
        if attempt.must_differ:
            mine = canonical(runtime.diff(episode), episode.generated, {})
            if any(not mismatches(mine, ref) for ref in ctx.reference_raw):
                return None
            if attempt.wording:
                worded = canonical(runtime.diff(episode), episode.generated, runtime.world.free_fields)
                if any(not mismatches(worded, ref) for ref in runtime.reference_states(ctx.task, SEED)):
                    return None
        answer = attempt.answer(results) if callable(attempt.answer) else attempt.answer
        verdict = runtime.verify(episode, answer)
        return _Outcome(label, verdict.passed, verdict.checks, answer)
    except _Skip:
        return None
    except Exception as exc:  # the audit reports what broke instead of stopping at the first world bug
        return _Outcome(label, False, [Check(name="episode ran", passed=False,
                                             detail=f"{type(exc).__name__}: {exc}")], answer)
    finally:
        episode.close()


# -- helpers ----------------------------------------------------------------------------------------------


def _clip(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _dump(value: Any) -> str:
    return json.dumps(value, default=str, separators=(", ", ": "), ensure_ascii=False, sort_keys=True)


def _join_capped(values: Iterable[str], cap: int, sep: str = ", ") -> str:
    out = ""
    for v in values:
        nxt = v if not out else out + sep + v
        if len(nxt) > cap:
            break
        out = nxt
    return out


def _props(schema: dict[str, Any]) -> tuple[dict[str, Any], set[str], dict[str, Any]]:
    return schema.get("properties", {}), set(schema.get("required", [])), schema.get("$defs", {})


def _deref(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in prop:
        return _deref(defs.get(prop["$ref"].split("/")[-1], {}), defs)
    for key in ("anyOf", "oneOf"):
        if key in prop:
            options = [_deref(o, defs) for o in prop[key] if o.get("type") != "null"]
            if len(options) == 1:
                return {**{k: v for k, v in prop.items() if k != key}, **options[0]}
    return prop


def _enum(prop: dict[str, Any], defs: dict[str, Any]) -> list[Any] | None:
    return _deref(prop, defs).get("enum")


def _ptype(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    t = _deref(prop, defs).get("type", "")
    return t if isinstance(t, str) else next((x for x in t if x != "null"), "")


def _reference_calls(task: Task) -> list[ToolCall]:
    return [ToolCall(name=c.name, arguments=dict(c.arguments)) for c in task.solution]


def _all_cues(ctx: TaskContext) -> list[str]:
    cues: list[str] = []
    for rule in ctx.world.rules:
        cues += [c for c in rule.cues if c not in cues]
    return cues


def _is_answer_task(task: Task) -> bool:
    return task.kind != "refusal" and (task.kind == "answer" or bool(task.expect))


# instruction tokens a blind agent would try: ids, codes, e-mails, dates, numbers
_TOKEN = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\d{4}-\d{2}-\d{2}|\b[A-Za-z0-9][A-Za-z0-9_-]*[0-9][A-Za-z0-9_-]*\b"
                    r"|\b[A-Z]{2,}[A-Z0-9_-]*\b")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w])")


def _instruction_values(ctx: TaskContext) -> list[tuple[str, str | None]]:
    """Strings of the instruction a crawler might pass as arguments, each with the column it came from."""
    text = ctx.task.instruction
    low = text.lower()
    found: list[tuple[str, str | None]] = []
    seen: set[str] = set()
    for table, rows in ctx.initial.items():
        for row in rows.values():
            for col, value in row.items():
                if isinstance(value, str) and len(value) >= 2 and value not in seen and value.lower() in low:
                    if re.search(rf"(?<!\w){re.escape(value.lower())}(?!\w)", low):
                        found.append((value, f"{table}.{col}"))
                        seen.add(value)
    for tok in _TOKEN.findall(text):
        if tok not in seen:
            found.append((tok, None))
            seen.add(tok)
    return found


def _column_matches(param: str, column_ref: str | None) -> bool:
    if column_ref is None:
        return False
    table, _, col = column_ref.partition(".")
    return param == col or param == f"{table}_{col}" or (param.endswith("_" + col) and param[: -len(col) - 1] == table)


def _db_values_for(ctx: TaskContext, param: str) -> list[str]:
    """Distinct values of every starting column that an argument named `param` would refer to."""
    values: set[str] = set()
    for table, rows in ctx.initial.items():
        for row in rows.values():
            for col, value in row.items():
                if value is not None and _column_matches(param, f"{table}.{col}"):
                    values.add(str(value))
    return sorted(values)


# -- number words, for paraphrases and wrong answers -------------------------------------------------------

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def number_words(n: int) -> str:
    """English words for 0 <= n < 1,000,000 (digits beyond that)."""
    if n < 0:
        return "minus " + number_words(-n)
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("-" + _ONES[n % 10] if n % 10 else "")
    if n < 1000:
        return _ONES[n // 100] + " hundred" + (" " + number_words(n % 100) if n % 100 else "")
    if n < 1_000_000:
        return number_words(n // 1000) + " thousand" + (" " + number_words(n % 1000) if n % 1000 else "")
    return str(n)


def _num(value: Any) -> str:
    v = float(value)
    return str(int(v)) if v == int(v) else f"{v:.2f}".rstrip("0")


_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]


def _long_date(d: date) -> str:
    return f"{_MONTHS[d.month - 1]} {d.day}, {d.year}"


def _twelve_hour(hhmm: str) -> str:
    h, m = (int(x) for x in hhmm.split(":")[:2])
    suffix = "am" if h < 12 else "pm"
    h12 = h % 12 or 12
    return f"{h12} {suffix}" if m == 0 else f"{h12}:{m:02d} {suffix}"


def _as_date(value: Any) -> date:
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])


def _part_phrases(part: Any, reference: str | None) -> list[str]:
    """Three correct ways to say one typed answer part (empty when the part's type is unknown)."""
    kind = type(part).__name__
    if kind == "Count":
        v = int(part.value)
        return [str(v), number_words(v), f"The answer is {v}."]
    if kind == "Number":
        v = float(part.value)
        return [_num(v), f"{v:.2f}", f"${v:,.2f} in total"]
    if kind == "DateAnswer":
        d = _as_date(part.value)
        return [d.isoformat(), _long_date(d), f"It is on {_long_date(d)}."]
    if kind == "TimeAnswer":
        start, end = str(part.start), getattr(part, "end", None)
        if end:
            return [f"{start}-{end}", f"{_twelve_hour(start)} to {_twelve_hour(str(end))}",
                    f"From {start} to {end}."]
        return [start, _twelve_hour(start), f"At {start}."]
    if kind == "YesNo":
        word = "Yes" if part.value else "No"
        return [f"{word}.", f"{word}. {reference}" if reference else f"{word}, it is.",
                "Yes, it is." if part.value else "No, it is not."]
    if kind == "Entities":
        first = [aliases[0] for aliases in part.expected if aliases]
        last = [aliases[-1] for aliases in part.expected if aliases]
        if not first:
            return []
        return [" and ".join(first), ", ".join(last), f"It is {' and '.join(first)}."]
    return []


def paraphrases(task: Task) -> list[str]:
    """Correct rewordings of the reference answer, derived from the task's typed `expect` parts."""
    parts = sorted(task.expect, key=lambda p: type(p).__name__ != "YesNo")  # yes/no is read from the first clause
    phrases = [_part_phrases(p, task.answer) for p in parts]
    if not phrases or any(not p for p in phrases):
        return []
    if len(phrases) == 1:
        out = phrases[0]
    else:  # several parts in one sentence: "Beta, 1." / "Beta, one." / "Beta; 1"
        bare = [[p[0], p[1]] if type(part).__name__ != "YesNo" else [p[0], p[0]] for part, p in zip(parts, phrases)]
        out = [", ".join(b[0].rstrip(".") for b in bare) + ".", ", ".join(b[1].rstrip(".") for b in bare) + ".",
               "; ".join(b[0].rstrip(".") for b in bare)]
    return list(dict.fromkeys(out))


_WORD_NUMBER = re.compile(r"\b(" + "|".join(_ONES) + r")\b", re.I)
_WORDLIKE = re.compile(r"[\w-]+")


def shift_numbers(text: str) -> str:
    """Every number in `text` plus one: digits (keeping their width) and number words up to nineteen.

    Tokens with letters in them (ids such as MW101-0603) are left alone: changing them is not a wrong value.
    """
    def digits(m: re.Match[str]) -> str:
        s = m.group(0)
        return str(int(s) + 1).zfill(len(s))

    def token(m: re.Match[str]) -> str:
        s = m.group(0)
        return s if re.search(r"[A-Za-z]", s) else re.sub(r"\d+", digits, s)

    def words(m: re.Match[str]) -> str:
        s = m.group(0)
        nxt = "twenty" if s.lower() == "nineteen" else _ONES[_ONES.index(s.lower()) + 1]
        return nxt.capitalize() if s[0].isupper() else nxt

    return _WORD_NUMBER.sub(words, _WORDLIKE.sub(token, text))


def _flip_yes_no(text: str) -> str:
    swap = {"yes": "no", "no": "yes"}
    return re.sub(r"\b(yes|no)\b", lambda m: (swap[m.group(0).lower()].capitalize() if m.group(0)[0].isupper()
                                              else swap[m.group(0).lower()]), text, flags=re.I)


# -- the policies -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    name: str
    expected_pass: bool
    attempts: Callable[[TaskContext], Iterable[Attempt]]
    help: str = ""


def _reference(ctx: TaskContext) -> Iterator[Attempt]:
    yield Attempt("reference solution", _reference_calls(ctx.task), ctx.task.answer)
    for i, alt in enumerate(ctx.task.alternatives):
        yield Attempt(f"alternative {i + 1}", [ToolCall(name=c.name, arguments=dict(c.arguments)) for c in alt],
                      ctx.task.answer)


def _paraphrase(ctx: TaskContext) -> Iterator[Attempt]:
    if not _is_answer_task(ctx.task):
        return
    for text in paraphrases(ctx.task):
        yield Attempt(f"answer {text!r}", _reference_calls(ctx.task), text)


def _noop(ctx: TaskContext) -> Iterator[Attempt]:
    yield Attempt("no calls, no answer")


def _echo(ctx: TaskContext) -> Iterator[Attempt]:
    yield Attempt("answer = the instruction", answer=ctx.task.instruction)


def _generic_refusal(ctx: TaskContext) -> Iterator[Attempt]:
    yield Attempt("generic refusal", answer=GENERIC_REFUSAL)


def _stuffed_refusal(ctx: TaskContext) -> Iterator[Attempt]:
    text = f"{GENERIC_REFUSAL} It is {', '.join(REFUSAL_WORDS)}: " + ", ".join(_all_cues(ctx)) + "."
    yield Attempt("every rule's cues", answer=text)
    if len(text) > ctx.cap:
        yield Attempt("every rule's cues, capped", answer=text[: ctx.cap])


def _wrong_reason(ctx: TaskContext) -> Iterator[Attempt]:
    if ctx.task.kind != "refusal":
        return
    for rule in ctx.world.rules:
        if rule.id == ctx.task.reason:
            continue
        answer = f"I cannot do that: {rule.text} ({', '.join(rule.cues)})"
        yield Attempt(f"cites rule {rule.id}", _reference_calls(ctx.task), answer)


def _db_spam(ctx: TaskContext) -> Iterator[Attempt]:
    everything: list[str] = []
    for table in sorted(ctx.initial):
        rows = ctx.initial[table]
        columns = list(next(iter(rows.values())).keys()) if rows else []
        for col in columns:
            values = _sorted_values(r[col] for r in rows.values())
            if not values:
                continue
            everything += values
            yield Attempt(f"{table}.{col} values", answer=_join_capped(values, ctx.cap))
    if everything:
        yield Attempt("every value of every column", answer=", ".join(dict.fromkeys(everything)))


def _sorted_values(values: Iterable[Any]) -> list[str]:
    """Distinct non-null values as text, numbers in numeric order."""
    distinct = {v for v in values if v is not None}
    if all(isinstance(v, (int, float)) for v in distinct):
        return [str(v) for v in sorted(distinct)]
    return sorted({str(v) for v in distinct})


def _read_calls(ctx: TaskContext) -> list[int]:
    return [i for i, c in enumerate(ctx.task.solution)
            if c.name in ctx.runtime.tools and not ctx.runtime.tools[c.name].meta.writes]


def _outputs(results: list[CallResult]) -> list[str]:
    return [_dump(r.value) for r in results if r.error is None]


def _read_spam(ctx: TaskContext) -> Iterator[Attempt]:
    reads = _read_calls(ctx)
    if not reads:
        return
    calls = [_reference_calls(ctx.task)[i] for i in reads]
    cap = ctx.cap
    yield Attempt("every read's output", calls, lambda rs: "\n".join(_outputs(rs)))
    for j, call in enumerate(calls):
        yield Attempt(f"{call.name} output, capped", calls,
                      lambda rs, j=j: (_dump(rs[j].value) if rs[j].error is None else rs[j].error or "")[:cap])


def _crawl_calls(ctx: TaskContext, tries: int = 3, random_tries: int = 2) -> list[ToolCall]:
    found = _instruction_values(ctx)
    numbers = [float(n) if "." in n else int(n) for n in _NUMBER.findall(ctx.task.instruction)]
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for name in sorted(ctx.runtime.tools):
        spec = ctx.runtime.tools[name]
        if spec.meta.writes:
            continue
        schema = spec.input_schema
        props, required, defs = _props(schema)
        rng = random.Random(f"{ctx.task.id}:{name}")
        candidates: list[dict[str, Any]] = []
        for i in range(tries):
            args: dict[str, Any] = {}
            for p, prop in props.items():
                kind, enum = _ptype(prop, defs), _enum(prop, defs)
                fmt = _deref(prop, defs).get("format")
                if enum:
                    value: Any = enum[i % len(enum)]
                elif kind == "string":
                    pool = [v for v, col in found if _column_matches(p, col)]
                    pool += [v for v, _ in found if v not in pool]
                    if fmt == "date":
                        pool = [v for v in pool if re.fullmatch(r"\d{4}-\d{2}-\d{2}", v)] or pool
                    if not pool:
                        if p not in required:
                            continue
                        value = random_value(prop, rng, defs)
                    else:
                        value = pool[i % len(pool)]
                elif kind in ("integer", "number") and numbers:
                    value = numbers[i % len(numbers)]
                    value = int(value) if kind == "integer" else value
                elif p in required:
                    value = random_value(prop, rng, defs)
                else:
                    continue
                args[p] = value
            candidates.append(args)
        for _ in range(random_tries):
            candidates.append(random_value(schema, rng) or {})
        for args in candidates:
            key = name + _dump(args)
            if key not in seen:
                seen.add(key)
                calls.append(ToolCall(name=name, arguments=args))
    return calls


def _crawler(ctx: TaskContext) -> Iterator[Attempt]:
    calls = _crawl_calls(ctx)
    if not calls:
        return
    cap = ctx.cap
    yield Attempt(f"{len(calls)} blind reads, everything seen", calls, lambda rs: "\n".join(_outputs(rs)))
    yield Attempt(f"{len(calls)} blind reads, capped", calls, lambda rs: "\n".join(_outputs(rs))[:cap])


def _prefix(ctx: TaskContext) -> Iterator[Attempt]:
    solution = _reference_calls(ctx.task)
    for k in range(1, len(solution)):
        yield Attempt(f"first {k} of {len(solution)} calls", solution[:k], ctx.task.answer, must_differ=True)


def _sql_type(runtime: WorldRuntime, table: str, column: str) -> type | None:
    try:
        return runtime.metadata.tables[table].columns[column].type.python_type
    except (KeyError, NotImplementedError):  # SQLAlchemy types without a Python type (JSON, custom) are skipped
        return None


def _edited(kind: type | None, value: Any) -> Any:
    if kind is bool:
        return 0 if value else 1
    if kind in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return value + 1
    if kind is str and isinstance(value, str):
        return value + " (edited)"
    return _Skip


def _editable_columns(ctx: TaskContext, table: str) -> list[tuple[str, type | None]]:
    sa_table = ctx.runtime.metadata.tables[table]
    free = set(ctx.world.free_fields.get(table, ()))
    cols = []
    for col in sa_table.columns:
        if col.primary_key or col.foreign_keys:
            continue
        kind = _sql_type(ctx.runtime, table, col.name)
        if kind in (bool, int, float, str):
            cols.append((col.name, kind))
    return sorted(cols, key=lambda c: c[0] in free)  # stable: non-free columns first, in declaration order


def _collateral_edit(ctx: TaskContext, table: str) -> Callable[[Episode], str]:
    pk = ctx.runtime.primary_keys[table]
    changes = ctx.reference_diff.tables.get(table)
    touched = {c["key"] for c in changes.updated} | set(changes.deleted_keys) if changes else set()
    rows = [(k, r) for k, r in sorted(ctx.initial.get(table, {}).items()) if k not in touched]
    columns = _editable_columns(ctx, table)

    def edit(episode: Episode) -> str:
        for key, row in rows:
            for col, kind in columns:
                new = _edited(kind, row.get(col))
                if new is _Skip:
                    continue
                where = " AND ".join(f'"{c}" = ?' for c in pk)
                try:
                    cur = episode.conn.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE {where}',
                                               (new, *(row[c] for c in pk)))
                except sqlite3.Error:
                    continue
                if cur.rowcount:
                    return f"{table}[{key}].{col} = {new!r}"
        raise _Skip

    return edit


def _copy_row(ctx: TaskContext, table: str) -> Callable[[Episode], str] | None:
    pk = ctx.runtime.primary_keys[table]
    rows = sorted(ctx.initial.get(table, {}).items())
    if len(pk) != 1 or not rows:
        return None
    key_col = pk[0]
    kind = _sql_type(ctx.runtime, table, key_col)
    existing = [r[key_col] for _, r in rows]
    if kind is int and all(isinstance(v, int) for v in existing):
        fresh: Any = max(existing) + 1
    elif kind is str:
        fresh = f"{existing[0]}-COPY"
    else:
        return None
    row = dict(rows[0][1])
    row[key_col] = fresh

    def edit(episode: Episode) -> str:
        cols = ", ".join(f'"{c}"' for c in row)
        try:
            episode.conn.execute(f'INSERT INTO "{table}" ({cols}) VALUES ({", ".join("?" * len(row))})',
                                 tuple(row.values()))
        except sqlite3.Error as exc:
            raise _Skip from exc
        return f"{table}: copy of {rows[0][0]} as {fresh!r}"

    return edit


def _collateral(ctx: TaskContext) -> Iterator[Attempt]:
    calls = _reference_calls(ctx.task)
    for table in sorted(ctx.runtime.metadata.tables):
        yield Attempt("", calls, ctx.task.answer, edit=_collateral_edit(ctx, table), must_differ=True)
    for table in sorted(ctx.runtime.metadata.tables):
        copy = _copy_row(ctx, table)
        if copy is not None:
            yield Attempt("", calls, ctx.task.answer, edit=copy, must_differ=True)


def _perturbations(ctx: TaskContext, tool: str, arg: str, value: Any) -> list[Any]:
    spec = ctx.runtime.tools.get(tool)
    if spec is None:
        return []
    props, _, defs = _props(spec.input_schema)
    enum = _enum(props.get(arg, {}), defs)
    if enum:
        return [m for m in enum if m != value][:3]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, (int, float)):
        return [value + 1]
    if isinstance(value, str):
        out: list[Any] = [value + "x"]
        other = next((v for v in _db_values_for(ctx, arg) if v != value), None)
        if other is not None:
            out.append(other)
        return out
    if isinstance(value, list) and value:
        return [value[:-1]]
    return []


def _perturbed_args(ctx: TaskContext) -> Iterator[Attempt]:
    solution = _reference_calls(ctx.task)
    instruction = ctx.task.instruction.lower()
    for i, step in enumerate(solution):
        spec = ctx.runtime.tools.get(step.name)
        if spec is None or not spec.meta.writes:
            continue
        given = [a for a, v in step.arguments.items() if v is not None and str(v).lower() in instruction]
        order = given + [a for a in step.arguments if a not in given]
        for arg in order:
            for new in _perturbations(ctx, step.name, arg, step.arguments[arg]):
                calls = [ToolCall(name=c.name, arguments=dict(c.arguments)) for c in solution]
                calls[i].arguments[arg] = new
                where = "user-given " if arg in given else ""
                yield Attempt(f"{step.name}#{i} {where}{arg}={new!r} (was {step.arguments[arg]!r})", calls,
                              ctx.task.answer, must_differ=True, wording=arg not in given)


def _wrong_answer(ctx: TaskContext) -> Iterator[Attempt]:
    task = ctx.task
    if not _is_answer_task(task) or not task.answer:
        return
    calls = _reference_calls(task)
    kinds = {type(p).__name__ for p in task.expect}
    # with typed parts, only a changed number, date, time or yes/no makes the answer wrong ("MacBook Pro 16"
    # for "15" in an entity answer is not); untyped answers get every number changed
    numeric = not kinds or bool(kinds & {"Count", "Number", "DateAnswer", "TimeAnswer"})
    shifted = shift_numbers(task.answer) if numeric else task.answer
    if "YesNo" in kinds:
        shifted = _flip_yes_no(shifted)
    if shifted != task.answer:
        yield Attempt(f"changed to {shifted!r}", calls, shifted)
    for part in task.expect:
        if type(part).__name__ != "Entities":
            continue
        among = part.among
        candidates = ctx.resolve(among) if isinstance(among, str) else [str(a) for a in among]
        aliases = {a.lower() for entity in part.expected for a in entity}
        wrong = [c for c in candidates if c.lower() not in aliases]
        for n, entity in enumerate(part.expected):
            if not wrong:
                break
            replacement = wrong[n % len(wrong)]
            text = task.answer
            for alias in sorted(entity, key=len, reverse=True):
                text = re.sub(rf"(?<!\w){re.escape(alias)}(?!\w)", replacement, text, flags=re.I)
            if text != task.answer:
                yield Attempt(f"{entity[0]!r} replaced by {replacement!r}", calls, text)


def _random(ctx: TaskContext) -> Iterator[Attempt]:
    names = sorted(ctx.runtime.tools)
    if not names:
        return
    for seed in range(3):
        rng = random.Random(seed)
        calls = []
        for _ in range(4):
            spec = ctx.runtime.tools[rng.choice(names)]
            calls.append(ToolCall(name=spec.name, arguments=random_value(spec.input_schema, rng) or {}))
        yield Attempt(f"seed {seed}: " + ", ".join(c.name for c in calls), calls, "Done.")


POLICIES: list[Policy] = [
    Policy("reference", True, _reference, "the reference solution and answer (must pass)"),
    Policy("paraphrase", True, _paraphrase, "reference calls, the answer reworded from `expect` (must pass)"),
    Policy("noop", False, _noop, "no calls, no answer"),
    Policy("echo", False, _echo, "no calls; the instruction as the answer"),
    Policy("generic-refusal", False, _generic_refusal, "no calls; a refusal without a reason"),
    Policy("stuffed-refusal", False, _stuffed_refusal, "no calls; a refusal citing every rule's cues"),
    Policy("wrong-reason", False, _wrong_reason, "reference calls; a refusal citing another rule"),
    Policy("db-spam", False, _db_spam, "no calls; every value of a column (capped), or of the whole database"),
    Policy("read-spam", False, _read_spam, "the reference's reads; their outputs as the answer"),
    Policy("crawler", False, _crawler, "blind reads with ids from the instruction; everything seen as the answer"),
    Policy("prefix", False, _prefix, "the reference stopped early, with the reference answer"),
    Policy("collateral", False, _collateral, "the reference plus one unrelated row edited (or copied)"),
    Policy("perturbed-args", False, _perturbed_args, "the reference with one write argument changed"),
    Policy("wrong-answer", False, _wrong_answer, "reference calls; the answer with numbers or entities changed"),
    Policy("random", False, _random, "random schema-valid calls, then 'Done.'"),
]


# -- the audit --------------------------------------------------------------------------------------------


def _check_text(c: Check) -> str:
    return c.name + (f" ({c.detail})" if c.detail else "")


def _summarize(ctx: TaskContext, policy: Policy, outcomes: list[_Outcome]) -> PolicyResult:
    task = ctx.task
    if policy.expected_pass:
        bad = next((o for o in outcomes if not o.passed), None)
        passed = bad is None
        about = bad or outcomes[0]
        failing = next((c for c in about.checks if not c.passed), None)
        detail = f"{_check_text(failing)}" if failing is not None else "passed"
    else:
        good = next((o for o in outcomes if o.passed), None)
        passed = good is not None
        about = good or outcomes[0]
        if good is not None:
            shown = "no answer" if good.answer is None else f"answer {_clip(good.answer)!r}"
            detail = f"passed with {shown}: " + "; ".join(c.name for c in good.checks)
        else:
            failing = next((c for c in about.checks if not c.passed), None)
            detail = f"failed: {_check_text(failing)}" if failing is not None else "failed"
    return PolicyResult(task=task.id, kind=task.kind, policy=policy.name, passed=passed,
                        expected_pass=policy.expected_pass, attempts=len(outcomes),
                        detail=_clip(detail, DETAIL_CHARS), attempt=about.label)


def audit(runtime: WorldRuntime, tasks: list[str] | None = None,
          on_progress: Callable[[int, int, str], None] | None = None,
          policies: list[Policy] | None = None) -> AuditReport:
    """Play the reference, paraphrases and every wrong policy on each task (all tasks when `tasks` is None).

    `on_progress(done, total, task_id)` is called after each task. Raises `UnknownTask` for an unknown id.
    """
    ids = list(runtime.tasks) if tasks is None else list(tasks)
    for tid in ids:
        if tid not in runtime.tasks:
            raise UnknownTask(tid)
    report = AuditReport(world=runtime.world.name, tasks=ids)
    for n, tid in enumerate(ids, 1):
        task = runtime.tasks[tid]
        try:
            ctx = TaskContext.build(runtime, task)
        except Exception as exc:
            report.results.append(PolicyResult(task=tid, kind=task.kind, policy="reference", passed=False,
                                               expected_pass=True, attempts=0,
                                               detail=f"could not play the reference: {type(exc).__name__}: {exc}"))
            if on_progress:
                on_progress(n, len(ids), tid)
            continue
        for policy in policies or POLICIES:
            try:
                attempts = list(policy.attempts(ctx))
            except Exception as exc:
                outcomes = [_Outcome("building attempts", False,
                                     [Check(name="attempts built", passed=False,
                                            detail=f"{type(exc).__name__}: {exc}")], None)]
            else:
                outcomes = [o for a in attempts if (o := _play(ctx, a)) is not None]
            if outcomes:
                report.results.append(_summarize(ctx, policy, outcomes))
        if on_progress:
            on_progress(n, len(ids), tid)
    return report
