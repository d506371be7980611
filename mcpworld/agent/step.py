"""One step of an episode, owned once: a model reply parsed, how it ends the episode before any tool runs, its
tool calls over MCP with their results as the model reads them, and the stop (the episode verified on a final
answer or past the turn limit). The agent loop and the trainer bridges (OpenRLHF, verl) step through here, so
a reply means the same thing, and is rewarded the same, wherever it is played.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from mcpworld.agent.formats import Action, Format
from mcpworld.core.models import ToolCall
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.termination import Termination

Result = tuple[str, bool]  # a tool result as the model reads it, and whether it is an error
OnCall = Callable[[ToolCall, types.CallToolResult, float], None]  # a call, its result, its latency in ms


class UnknownTool(Exception):
    """A call names a tool the world lacks (the calls before it have run)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def tool_text(result: types.CallToolResult) -> str:
    """A tool result's text blocks, as the model reads them."""
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent)) or "(no content)"


def reply_ending(action: Action, tools: set[str], cut: bool) -> Termination | None:
    """How a parsed reply ends the episode before any tool runs, in the token-level bridges: a reply that does not
    parse is `truncated` when the token budget cut it (`cut`), else a format error; a call to a tool the world
    lacks is `unknown_tool`; None when the reply goes on to its calls or its final answer."""
    if action.error is not None:
        return Termination.TRUNCATED if cut else Termination.FORMAT_ERROR
    if any(c.name not in tools for c in action.calls):
        return Termination.UNKNOWN_TOOL
    return None


async def run_calls(ctl: EpisodeControl, episode: str, calls: Sequence[ToolCall], tools: set[str] | None = None,
                    on_call: OnCall | None = None) -> list[Result]:
    """Run `calls` in order on `episode`, each result as the model reads it. With `tools`, a call to a tool not
    among them raises `UnknownTool` when its turn comes; `on_call` sees each call, its result and latency."""
    results = []
    for call in calls:
        if tools is not None and call.role == "assistant" and call.name not in tools:
            raise UnknownTool(call.name)
        began = time.perf_counter()
        result = await ctl.call(episode, call.name, call.arguments, call.role)
        if on_call is not None:
            on_call(call, result, round((time.perf_counter() - began) * 1000, 2))
        results.append((tool_text(result), bool(result.is_error)))
    return results


@dataclass
class Stepped:
    """What one step did: the ending when the episode ended (None: it goes on, with `messages` to read next)."""

    termination: Termination | None = None
    passed: bool = False
    closed: bool = False  # the verification closed the episode on the server
    results: list[Result] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)  # the observation, in the format's messages

    @property
    def tool_errors(self) -> int:
        return sum(is_error for _, is_error in self.results)


async def take_step(ctl: EpisodeControl, episode: str, format: Format, text: str, tools: set[str], *, cut: bool,
               last: bool) -> Stepped:
    """One token-level step on an open `episode`: parse the reply `text`; end the episode if the reply does
    (`reply_ending`; `cut`: the token budget stopped it); verify it (closing it) on a final answer, or when it is
    past its turn limit (`last`: the reply's calls are not run); else run the calls and return the observation."""
    action = format.parse({"role": "assistant", "content": text}, [])
    ending = reply_ending(action, tools, cut)
    if ending is not None:
        return Stepped(ending)
    if not action.calls or last:
        verified = await ctl.verify(episode, action.final, close=True)
        ended = Termination.FINAL_ANSWER if not action.calls else Termination.MAX_TURNS
        return Stepped(ended, verified.verdict.passed, verified.closed)
    results = await run_calls(ctl, episode, action.calls)
    return Stepped(results=results, messages=format.result_messages(action, results))
