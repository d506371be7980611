"""SFT export: filter trajectories by rules and reward, write OpenAI-messages JSONL or OpenRLHF's SFT format."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcpworld.agent.trajectory import Trajectory

SFTFormat = Literal["openai", "openrlhf"]


@dataclass
class SFTFilter:
    min_reward: float = 1.0
    max_turns: int = 30
    max_chars: int = 60_000
    drop_timeouts: bool = True
    drop_invalid_calls: bool = True

    def reason(self, t: Trajectory) -> str | None:
        """Why `t` is rejected, or None when it is kept."""
        if t.is_infra:  # cut short by an outage, whatever --min-reward says
            return "infra_error"
        if t.reward < self.min_reward:
            return "reward"
        if len(t.steps) > self.max_turns:
            return "turns"
        if sum(len(json.dumps(m)) for m in t.messages) > self.max_chars:
            return "length"
        if self.drop_timeouts and t.termination in ("timeout", "episode_timeout", "max_turns"):
            return "timeout"
        if self.drop_invalid_calls and (t.is_penalized
                                        or any(c.is_error for s in t.steps for c in s.calls)):
            return "invalid_calls"
        return None


def openrlhf_messages(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Flatten tool calls into `<tool_call>` text and tool results into `<tool_response>` user turns, which
    every chat template can render (OpenRLHF: --apply_chat_template --input_key messages --multiturn)."""
    out: list[dict[str, str]] = []
    for m in messages:
        if m["role"] == "assistant":
            parts = [m.get("content") or ""]
            for c in m.get("tool_calls") or []:
                call = {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"] or "{}")}
                parts.append(f"<tool_call>{json.dumps(call)}</tool_call>")
            out.append({"role": "assistant", "content": "\n".join(p for p in parts if p)})
        elif m["role"] == "tool":
            block = f"<tool_response>\n{m.get('content')}\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1]["content"].startswith("<tool_response>"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block})
        else:
            out.append({"role": m["role"], "content": str(m.get("content") or "")})
    return out


def export_sft(trajectories: list[Trajectory], path: Path, fmt: SFTFormat = "openai",
               rules: SFTFilter | None = None) -> Counter[str]:
    """Write the kept trajectories; return counts of kept and of each rejection reason."""
    rules = rules or SFTFilter()
    counts: Counter[str] = Counter()
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        for t in trajectories:
            reason = rules.reason(t)
            if reason is not None:
                counts[f"dropped: {reason}"] += 1
                continue
            counts["kept"] += 1
            messages = t.messages if fmt == "openai" else openrlhf_messages(t.messages)
            f.write(json.dumps({"messages": messages, "server": t.server, "task": t.task}) + "\n")
    tmp.replace(path)
    return counts
