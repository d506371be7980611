"""Questions for chains: pick the answer, type it, write the question (template or model), and never leak.

The question may name the first call's inputs and how rows are singled out; it must not contain any value
the chain has to find (linking values and the answer). The answer is typed (`answers.py`): a number is a
`Count` or `Number`, a date a `DateAnswer`, anything else `Entities` whose wrong candidates are the same
field's values in the other rows of the result and, when the field is a database column, that column: an
answer that lists every candidate names a wrong one.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from typing import Any

from mcpworld.core.llm import ChatClient
from mcpworld.synth.chat import clip, parse_json
from mcpworld.synth.tasks.names import (
    GENERIC_CONTAINERS,
    NOISE_FIELDS,
    aliases,
    looks_like_id,
    singular,
    snake,
    tool_noun,
)
from mcpworld.synth.tasks.results import Occurrence, answer_text, occurrences, row_target
from mcpworld.synth.tasks.walks import Chain, Step
from mcpworld.worlds.answers import AnswerPart, Count, DateAnswer, Entities, Number, TimeAnswer
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.world import World

ANSWER_FIELDS = ("status", "total", "amount", "price", "balance", "count", "name", "title", "state", "likes",
                 "downloads", "author", "stock", "quantity", "score", "result", "category", "location")


@dataclass
class Draft:
    """A chain turned into a question: what to ask, what answers it, and what must not leak."""

    chain: Chain
    answer_field: str
    answer_values: list[str]
    answer_target: str
    secrets: set[str]
    occurrence: Occurrence | None = None

    @property
    def final(self) -> Step:
        return self.chain.steps[-1]


def answer_choice(chain: Chain, rng: random.Random) -> Draft | None:
    """The best answer for a chain (see `answer_choices`)."""
    return next(answer_choices(chain, rng), None)


def answer_choices(chain: Chain, rng: random.Random) -> Iterator[Draft]:
    """Answers a chain can ask for, best first: descriptive fields whose siblings differ before ids and times."""
    final = chain.steps[-1]
    given = {str(v).lower() for s in chain.steps for v in s.args.values()} | \
        {str(v).lower() for s in chain.steps for v in s.args.values() if isinstance(v, list) for v in v}
    secrets = {str(s.via.occurrence.value).lower() for s in chain.steps[1:] if s.via}
    candidates = []
    for occ in occurrences(final.result, tool_noun(final.tool)):
        text = answer_text(occ.value)
        shortest = 3 if isinstance(occ.value, str) else 2  # "ok" or "5" would be found in almost any reply
        if occ.field in NOISE_FIELDS or not shortest <= len(text) <= 80 or text.lower() in given:
            continue
        if isinstance(occ.value, str) and (occ.value.count(" ") > 3 or len(occ.value) > 40 or "\n" in occ.value):
            continue
        # A name or status is only a fair question when the other rows' values differ from it (a dump of the
        # result then names a wrong one); otherwise a number of the row is the better question.
        rank = (looks_like_id(occ.field, occ.value), _timestamp(occ.value),
                isinstance(occ.value, str) and not _differs(occ), occ.field not in ANSWER_FIELDS, rng.random())
        candidates.append((rank, occ))
    for _, occ in sorted(candidates, key=lambda c: c[0]):
        value = answer_text(occ.value)
        target = row_target(occ, final.tool, {value.lower()})
        if target is None or value.lower() in target.lower():
            continue
        yield Draft(chain, occ.field, [value], target, secrets | {value.lower()}, occ)


def _differs(occ: Occurrence) -> bool:
    """Another row of the same result has a different value in this field (a dump of the result then conflicts)."""
    return any(isinstance(s, dict) and s is not occ.row and scalar_text(s.get(occ.field)) not in (None, answer_text(
        occ.value)) for s in occ.siblings or [])


def scalar_text(value: Any) -> str | None:
    return answer_text(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None


# -- typed answers ---------------------------------------------------------------------------------------

_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}):(\d{2})(?::\d{2}(?:\.\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?$")
_PLAIN_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")


def typed_answer(runtime: WorldRuntime, draft: Draft) -> list[AnswerPart] | None:
    """The typed parts for a draft's answer; None when no typed check could tell it from a wrong answer.

    Numbers become a `Count` (whole) or a `Number`; dates a `DateAnswer` (and a `TimeAnswer` for a time of day);
    other strings `Entities`, whose `among` are the other rows' values of the field and, when the field is a
    column of the database, every value of that column ("table.column") -- so listing every value fails.
    """
    occ = draft.occurrence
    if occ is None:
        return None
    value = occ.value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return [Count(value=value)]
    if isinstance(value, float):
        return [Number(value=value)]
    text = str(value).strip()
    if _PLAIN_NUMBER.match(text):
        return [Count(value=int(text))] if re.fullmatch(r"-?\d+", text) else [Number(value=float(text))]
    when = _DATE.match(text)
    if when:
        try:
            day = date.fromisoformat(when[1])
        except ValueError:
            return None
        parts: list[AnswerPart] = [DateAnswer(value=day)]
        if when[2] is not None and (when[2], when[3]) != ("00", "00"):
            parts.append(TimeAnswer(start=f"{when[2]}:{when[3]}"))
        return parts
    among = wrong_candidates(runtime, occ, text)
    if among is None:
        return None
    return [Entities(expected=[[text]], among=among)]


def wrong_candidates(runtime: WorldRuntime, occ: Occurrence, value: str) -> list[str] | str | None:
    """`among` for an entity answer: siblings' values, the column as "table.column", or both resolved."""
    key = value.lower()
    siblings = {t for s in occ.siblings or [] if isinstance(s, dict) and s is not occ.row
                and (t := scalar_text(s.get(occ.field))) is not None and t.strip() and t.lower() != key}
    column = field_column(runtime, occ, value)
    if column is not None:
        ref, values = column
        wrong = {v for v in values if v.lower() != key}
        if not wrong and not siblings:
            return None
        if siblings <= set(values):
            return ref
        return sorted(wrong | siblings)
    return sorted(siblings) or None


def field_column(runtime: WorldRuntime, occ: Occurrence, value: str) -> tuple[str, list[str]] | None:
    """The starting database column a result field comes from ("table.column", its values), if one fits.

    The column must be named like the field (`status`, `id` for `flight_id`, the `key` of an imported
    table for an `id`) and hold the value; a table named like the result's container wins a tie.
    """
    rows = runtime.initial_rows(runtime.template(None))
    container = singular(snake(occ.container)) if occ.container not in GENERIC_CONTAINERS else ""
    best: tuple[tuple[bool, int], str, list[str]] | None = None
    for table, by_key in rows.items():
        if table.startswith("_") or not by_key:
            continue
        for column in next(iter(by_key.values())):
            if not _names_match(occ.field, column, table):
                continue
            values = sorted({str(r[column]) for r in by_key.values() if r.get(column) is not None})
            if value not in values:
                continue
            rank = (singular(snake(table)) != container, len(values))
            if best is None or rank < best[0]:
                best = (rank, f"{table}.{column}", values)
    return None if best is None else (best[1], best[2])


def _names_match(field: str, column: str, table: str) -> bool:
    if field == column or field in aliases(column, table):
        return True
    return looks_like_id(field, None) and column in ("id", "key") and field in ("id", "uid", "key",
                                                                                 f"{singular(snake(table))}_id")


def _timestamp(value: Any) -> bool:
    return isinstance(value, str) and bool(re.match(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", value))


def template_question(draft: Draft) -> tuple[str, list[str]]:
    """The offline question and rubric: names the tools and the given inputs, never what they return."""
    steps = draft.chain.steps
    first = steps[0]
    args = ", ".join(f"{k} {_show(v)}" for k, v in first.args.items())
    parts = [f"Call `{first.tool}`" + (f" with {args}" if args else "")]
    rubric = [f"calls {first.tool}" + (f" with {args}" if args else "")]
    for before, step in zip(steps, steps[1:]):
        assert step.via is not None
        extra = "".join(f" and {k} {_show(v)}" for k, v in step.args.items() if k != step.via.link.param)
        parts.append(f"then call `{step.tool}` with the {step.via.link.field.replace('_', ' ')} of "
                     f"{step.via.target} as {step.via.link.param}{extra}")
        rubric.append(f"calls {step.tool} with {step.via.link.param} taken from the {before.tool} result")
    question = "; ".join(parts) + f". What is the {draft.answer_field.replace('_', ' ')} of {draft.answer_target}?"
    rubric.append(f"the answer states the {draft.answer_field}: {', '.join(draft.answer_values)}")
    return question[0].upper() + question[1:], rubric


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else json.dumps(value, default=str)


def leaks(text: str, secrets: set[str]) -> list[str]:
    lowered = text.lower()
    return [s for s in secrets if len(s) >= 2 and s in lowered]


def question_messages(world: World, draft: Draft, guidance: str | None = None) -> list[dict[str, Any]]:
    """The prompt for a question that needs exactly the draft's chain and names none of its secrets."""
    steps = []
    for i, step in enumerate(draft.chain.steps, 1):
        how = "" if step.via is None else f" (its {step.via.link.param} is the {step.via.link.field} of " \
                                          f"{step.via.target} from step {i - 1})"
        steps.append(f"{i}. {step.tool}({clip(step.args, 200)}){how} -> {clip(step.result)}")
    hidden = sorted(draft.secrets)
    user = "\n".join([
        f"[synth:question] {world.name}: {world.scenario}", "",
        "A chain of tool calls an agent must make:", *steps, "",
        f"The answer is the {draft.answer_field} of {draft.answer_target} in the last result: "
        f"{', '.join(draft.answer_values)}.",
        *([f"Focus: {guidance}"] if guidance else []), "",
        "Write the user's question that needs exactly this chain, in natural language. The question may name "
        "the inputs of step 1 and how rows are singled out, but must NOT contain any of these values: "
        + json.dumps(hidden, ensure_ascii=False) + ". Also write a rubric: 3-6 short checks a grader applies. "
        'Reply with one ```json block: {"question": ..., "rubric": [...]}',
    ])
    return [{"role": "system", "content": "You write evaluation questions for tool-using agents."},
            {"role": "user", "content": user}]


async def model_question(client: ChatClient, world: World, draft: Draft,
                         guidance: str | None = None) -> tuple[str, list[str]] | None:
    """Ask the model for a natural question + rubric; None when it fails or leaks a hidden value."""
    messages = question_messages(world, draft, guidance)
    try:
        completion = await client.complete(messages)
        data = parse_json(completion.message.get("content") or "")
        question, rubric = str(data["question"]).strip(), [str(r) for r in data.get("rubric", [])]
    except Exception:
        return None
    if not question or leaks(question, draft.secrets):
        return None
    return question, rubric or template_question(draft)[1]
