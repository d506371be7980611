"""Helpers for tests and demos of world models without a GPU: scripted replies over the real replay server."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from mcpworld.core.llm_replay import ReplayLLM, Reply


class SequencedReplay(ReplayLLM):
    """Each request that matches a script gets that script's next reply, so k samples of one prompt can differ.

    (`ReplayLLM` answers by turn number, and every SWR sample is a first turn.)
    """

    def __init__(self, scripts: dict[str, list[Reply]]):
        super().__init__(scripts)
        self.used: Counter[str] = Counter()

    def reply_for(self, messages: list[dict[str, Any]]) -> Reply | None:
        found = self._script(messages)
        if found is None:
            return None
        key, replies = found
        index = self.used[key]
        self.used[key] += 1
        return replies[index % len(replies)]


def swt_reply(stdout: str = "", stderr: str = "", exit_code: int = 0, think: str | None = None) -> Reply:
    body = json.dumps({"stdout": stdout, "stderr": stderr, "exit_code": exit_code})
    return {"role": "assistant", "content": f"<think>{think}</think>\n{body}" if think else body}


def swr_reply(reward: int, report: str = "", reasoning: str = "Checked each listed test.") -> Reply:
    body = json.dumps({"test_report": report or ("PASSED" if reward else "FAILED"), "reward": reward})
    return {"role": "assistant", "content": f"{reasoning}\n```json\n{body}\n```"}
