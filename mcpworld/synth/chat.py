"""Talking to a model during synthesis: what every stage's conversation shares, whatever it asks.

Each conversation's first user message starts with a `[synth:STAGE]` marker so logs (and the replay server in
tests) can tell stages apart; values go into prompts as clipped JSON; a reply is read as its fenced block or its
JSON; a retry appends the failed output and the error to the same conversation, so the model sees what it wrote
and why it broke. The prompts themselves live with the stage that sends them.
"""

from __future__ import annotations

import json
import re
from typing import Any


def clip(value: Any, limit: int = 600) -> str:
    """A value as JSON for a prompt, cut after `limit` characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + " ..."


def retry_message(error: str) -> dict[str, Any]:
    """The user turn that hands a failed output's error back to the model, in the same conversation."""
    return {"role": "user", "content": "That output failed when it was executed:\n\n" + error.strip()[:4000]
            + "\n\nFix it and reply with the complete corrected output, in the same format."}


def extract_block(text: str, lang: str = "python") -> str:
    """The fenced block of a reply (the language-tagged one first); the whole text when there is none."""
    blocks = re.findall(r"```([a-zA-Z0-9_+-]*)\s*\n(.*?)```", text or "", re.S)
    for tag, body in blocks:
        if tag.lower() == lang:
            return body.strip() + "\n"
    if blocks:
        return blocks[0][1].strip() + "\n"
    return (text or "").strip() + "\n"


def parse_json(text: str) -> Any:
    """JSON from a reply: a ```json block, or the first {...} / [...] span."""
    body = extract_block(text, "json").strip()
    try:
        return json.loads(body)
    except ValueError:
        match = re.search(r"(\{.*\}|\[.*\])", text or "", re.S)
        if match is None:
            raise
        return json.loads(match.group(1))
