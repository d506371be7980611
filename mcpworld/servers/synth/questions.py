"""Questions for chains: pick the answer, write the question (template or model), and never leak.

The question may name the first call's inputs and how rows are singled out; it must not contain any value
the chain has to find (linking values and the answer).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from mcpworld.llm import ChatClient
from mcpworld.servers.envs.world import World
from mcpworld.servers.synth import prompts
from mcpworld.servers.synth.names import NOISE_FIELDS, looks_like_id, tool_noun
from mcpworld.servers.synth.results import answer_text, occurrences, row_target
from mcpworld.servers.synth.walks import Chain, Step

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

    @property
    def final(self) -> Step:
        return self.chain.steps[-1]


def answer_choice(chain: Chain, rng: random.Random) -> Draft | None:
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
        rank = (looks_like_id(occ.field, occ.value), _timestamp(occ.value), occ.field not in ANSWER_FIELDS,
                rng.random())
        candidates.append((rank, occ))
    for _, occ in sorted(candidates, key=lambda c: c[0]):
        value = answer_text(occ.value)
        target = row_target(occ, final.tool, {value.lower()})
        if target is None or value.lower() in target.lower():
            continue
        return Draft(chain, occ.field, [value], target, secrets | {value.lower()})
    return None


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


async def model_question(client: ChatClient, world: World, draft: Draft,
                         guidance: str | None = None) -> tuple[str, list[str]] | None:
    """Ask the model for a natural question + rubric; None when it fails or leaks a hidden value."""
    messages = prompts.question_messages(world, draft, guidance)
    try:
        completion = await client.complete(messages)
        data = prompts.parse_json(completion.message.get("content") or "")
        question, rubric = str(data["question"]).strip(), [str(r) for r in data.get("rubric", [])]
    except Exception:
        return None
    if not question or leaks(question, draft.secrets):
        return None
    return question, rubric or template_question(draft)[1]
