"""Read a world model's reply: JSON alone, after a `<think>` block, inside a ```json fence, or amid prose.

Anything else is a `ParseError`: callers report it as a failure, never guess an output.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.S)
_THINK = re.compile(r"<think>(.*?)</think>", re.S)


class ParseError(ValueError):
    """The reply holds no usable answer; the message says what was wrong."""


def split_thinking(text: str) -> tuple[str, str]:
    """(thinking, answer): the `<think>` blocks' text and what follows the last `</think>`."""
    if "</think>" in text:
        thinking = "\n".join(m.strip() for m in _THINK.findall(text)) or text.split("</think>")[0].replace(
            "<think>", "").strip()
        return thinking, text.rsplit("</think>", 1)[1]
    if "<think>" in text:
        raise ParseError("the reply is an unterminated <think> block (cut off before the answer)")
    return "", text


def _objects(text: str) -> list[tuple[int, dict[str, Any]]]:
    """Every top-level JSON object in `text`, with where it starts."""
    decoder = json.JSONDecoder()
    found, i = [], text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found.append((i, obj))
        i = text.find("{", end)
    return found


def extract_json(text: str, required: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """The last JSON object holding every `required` key, and the prose before it (reasoning).

    Fenced ```json blocks win over bare objects; `<think>` content is reasoning, never the answer.
    """
    if not isinstance(text, str) or not text.strip():
        raise ParseError("the reply is empty")
    thinking, answer = split_thinking(text)
    candidates: list[tuple[dict[str, Any], str]] = []
    for m in _FENCE.finditer(answer):
        try:
            obj = json.loads(m.group(1))
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            candidates.append((obj, answer[: m.start()]))
    if not candidates:
        candidates = [(obj, answer[:start]) for start, obj in _objects(answer)]
    for obj, before in reversed(candidates):
        if all(k in obj for k in required):
            reasoning = "\n".join(p for p in (thinking, before.strip()) if p)
            return obj, reasoning
    if candidates:
        raise ParseError(f"no JSON object with keys {', '.join(required)} in the reply")
    raise ParseError(f"no JSON object in the reply: {answer.strip()[:200]!r}")


# -- SWT -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Prediction:
    """What SWT says the command printed."""

    stdout: str
    stderr: str
    exit_code: int
    reasoning: str = ""


def _exit_code(value: Any) -> int:
    if isinstance(value, bool):
        raise ParseError("exit_code must be an integer, got a boolean")
    if isinstance(value, int):
        code = value
    elif isinstance(value, float) and value.is_integer():
        code = int(value)
    elif isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        code = int(value.strip())
    else:
        raise ParseError(f"exit_code must be an integer, got {value!r}")
    if not -255 <= code <= 255:
        raise ParseError(f"exit_code {code} is out of range")
    return code


def parse_swt(text: str) -> Prediction:
    """{stdout, stderr, exit_code} from an SWT reply; stdout/stderr may be absent (empty) but not non-strings."""
    obj, reasoning = extract_json(text, ("exit_code",))
    streams = []
    for key in ("stdout", "stderr"):
        value = obj.get(key, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise ParseError(f"{key} must be a string, got {type(value).__name__}")
        streams.append(value)
    return Prediction(streams[0], streams[1], _exit_code(obj["exit_code"]), reasoning)


# -- SWR -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Judgement:
    """One SWR sample: why, the pytest-style report it imagines, and 0 or 1."""

    reasoning: str
    test_report: str
    reward: int


def _reward(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip() in ("0", "1", "0.0", "1.0"):
        return int(float(value.strip()))
    raise ParseError(f"reward must be 0 or 1, got {value!r}")


def parse_swr(text: str) -> Judgement:
    """{reasoning, test_report, reward} from an SWR reply (reasoning may be prose or a think block)."""
    obj, reasoning = extract_json(text, ("reward",))
    report = obj.get("test_report", "")
    if not isinstance(report, str):
        raise ParseError(f"test_report must be a string, got {type(report).__name__}")
    if isinstance(obj.get("reasoning"), str) and obj["reasoning"].strip():
        reasoning = "\n".join(p for p in (reasoning, obj["reasoning"].strip()) if p)
    return Judgement(reasoning, report, _reward(obj["reward"]))
