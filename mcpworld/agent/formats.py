"""Tool-call formats: how tools are shown to a model and how its replies become tool calls.

- native: the API's `tools` / `tool_calls` (vLLM with a tool parser, hosted providers);
- text: `<tool_call>{"name": ..., "arguments": ...}</tool_call>` in the content, for models served without one;
- awm: Agent World Model's convention, two functions `list_tools` and `call_tool(tool_name, arguments)`,
  `list_tools` first, one call per turn.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from mcpworld.core.llm import ChatClient
from mcpworld.core.models import ToolCall

TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


@dataclass
class Action:
    """One policy turn: tool calls, or a final answer, or a malformed reply (with why)."""

    message: dict[str, Any]
    calls: list[ToolCall] = field(default_factory=list)
    final: str | None = None
    error: str | None = None
    local: str | None = None  # an action the format answers itself, no server call (AWM's list_tools)
    truncated: bool = False  # cut off by the reply's token cap (finish_reason "length"): not a format error


def openai_tools(tools: list[types.Tool]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                              "parameters": t.input_schema}} for t in tools]


def _tool_list_text(tools: list[types.Tool]) -> str:
    return "\n".join(json.dumps({"name": t.name, "description": t.description, "parameters": t.input_schema})
                     for t in tools)


def _parse_call(text: str) -> tuple[str, dict[str, Any]]:
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ValueError('expected {"name": ..., "arguments": {...}}')
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):
        arguments = json.loads(arguments or "{}")
    if not isinstance(arguments, dict):
        raise ValueError("arguments must be a JSON object")
    return data["name"], arguments


class Format(ABC):
    """How tools are shown to a model and how its replies are read; subclasses define `parse`."""

    name = "base"

    def system_prompt(self, tools: list[types.Tool]) -> str:
        return ""

    def tools_param(self, tools: list[types.Tool]) -> list[dict[str, Any]] | None:
        return None

    @abstractmethod
    def parse(self, message: dict[str, Any], history: list[dict[str, Any]]) -> Action:
        """The policy's reply as tool calls, a final answer, or a malformed reply."""

    def local_messages(self, action: Action, tools: list[types.Tool]) -> list[dict[str, Any]] | None:
        """The messages that answer `action` when this format handles it itself (no server call), else None."""
        return None

    def result_messages(self, action: Action, results: list[tuple[str, bool]]) -> list[dict[str, Any]]:
        """Messages that give the model its tool results ((text, is_error) per call)."""
        blocks = "\n".join(f"<tool_response>\n{text}\n</tool_response>" for text, _ in results)
        return [{"role": "user", "content": blocks}]

    def assistant_message(self, calls: list[ToolCall], content: str | None) -> dict[str, Any]:
        """How a scripted policy writes `calls` in this format (so trajectories read the same)."""
        text = "\n".join(f"<tool_call>{json.dumps({'name': c.name, 'arguments': c.arguments})}</tool_call>"
                         for c in calls)
        return {"role": "assistant", "content": "\n".join(p for p in (content, text) if p)}


class NativeFormat(Format):
    name = "native"

    def tools_param(self, tools: list[types.Tool]) -> list[dict[str, Any]] | None:
        return openai_tools(tools)

    def parse(self, message: dict[str, Any], history: list[dict[str, Any]]) -> Action:
        raw_calls = message.get("tool_calls") or []
        if not raw_calls:
            return Action(message=message, final=(message.get("content") or "").strip())
        calls = []
        for raw in raw_calls:
            fn = raw.get("function") or {}
            try:
                arguments = json.loads(fn.get("arguments") or "{}")
                if not isinstance(arguments, dict):
                    raise ValueError("arguments must be a JSON object")
            except ValueError as exc:
                return Action(message=message, error=f"tool call {fn.get('name')!r} has invalid JSON arguments: {exc}")
            calls.append(ToolCall(name=str(fn.get("name")), arguments=arguments))
        return Action(message=message, calls=calls)

    def result_messages(self, action: Action, results: list[tuple[str, bool]]) -> list[dict[str, Any]]:
        ids = [c.get("id", f"call_{i}") for i, c in enumerate(action.message.get("tool_calls") or [])]
        return [{"role": "tool", "tool_call_id": ids[i] if i < len(ids) else f"call_{i}", "content": text}
                for i, (text, _) in enumerate(results)]

    def assistant_message(self, calls: list[ToolCall], content: str | None) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": {
                "name": c.name, "arguments": json.dumps(c.arguments)}} for i, c in enumerate(calls)]
        return message


class TextFormat(Format):
    name = "text"

    def system_prompt(self, tools: list[types.Tool]) -> str:
        return ("You can call tools. Available tools, one JSON object per line:\n"
                f"{_tool_list_text(tools)}\n\n"
                'To call a tool, write <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>. '
                "Results come back in <tool_response> blocks. When you are done, reply without a tool call: "
                "that reply is your final answer to the user.")

    def parse(self, message: dict[str, Any], history: list[dict[str, Any]]) -> Action:
        content = message.get("content") or ""
        blocks = TOOL_CALL_RE.findall(content)
        if not blocks:
            if "<tool_call>" in content:
                return Action(message=message, error="unterminated <tool_call> block")
            return Action(message=message, final=content.strip())
        calls = []
        for block in blocks:
            try:
                name, arguments = _parse_call(block)
            except ValueError as exc:
                return Action(message=message, error=f"malformed <tool_call>: {exc}")
            calls.append(ToolCall(name=name, arguments=arguments))
        return Action(message=message, calls=calls)


class AWMFormat(TextFormat):
    name = "awm"

    def system_prompt(self, tools: list[types.Tool]) -> str:
        return ("You operate an application through two functions:\n"
                '{"name": "list_tools", "description": "List the application\'s tools and their parameters."}\n'
                '{"name": "call_tool", "description": "Call one tool.", "parameters": {"type": "object", '
                '"properties": {"tool_name": {"type": "string"}, "arguments": {"type": "object"}}, '
                '"required": ["tool_name", "arguments"]}}\n\n'
                "Call list_tools once first. Then make exactly one call per turn as "
                '<tool_call>{"name": "call_tool", "arguments": {"tool_name": "...", "arguments": {...}}}</tool_call>. '
                "A reply without a call ends the episode and is your final answer.")

    def parse(self, message: dict[str, Any], history: list[dict[str, Any]]) -> Action:
        action = super().parse(message, history)
        if action.error or not action.calls:
            return action
        if len(action.calls) > 1:
            return Action(message=message, error="one call per turn in this format")
        call = action.calls[0]
        listed = any("<tool_call>" in (m.get("content") or "") and '"list_tools"' in (m.get("content") or "")
                     for m in history if m.get("role") == "assistant")
        if call.name == "list_tools":
            return Action(message=message, local="list_tools")
        if call.name != "call_tool":
            return Action(message=message, error=f"unknown function {call.name!r}: use list_tools or call_tool")
        if not listed:
            return Action(message=message, error="call list_tools before call_tool")
        name, arguments = call.arguments.get("tool_name"), call.arguments.get("arguments", {})
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return Action(message=message, error="call_tool needs tool_name (string) and arguments (object)")
        return Action(message=message, calls=[ToolCall(name=name, arguments=arguments)])

    def local_messages(self, action: Action, tools: list[types.Tool]) -> list[dict[str, Any]] | None:
        """`list_tools` is answered here, from the domain tools the agent already has."""
        if action.local != "list_tools":
            return None
        listing = "\n".join(f"{t.name}: {t.description}\n  parameters: {t.input_schema}" for t in tools)
        return self.result_messages(action, [(listing, False)])

    def assistant_message(self, calls: list[ToolCall], content: str | None) -> dict[str, Any]:
        wrapped = [ToolCall(name="call_tool", arguments={"tool_name": c.name, "arguments": c.arguments})
                   for c in calls]
        return super().assistant_message(wrapped, content)


FORMATS: dict[str, type[Format]] = {f.name: f for f in (NativeFormat, TextFormat, AWMFormat)}


class NativeToolsUnsupported(RuntimeError):
    """The model endpoint drops the API's `tools`: the native format would silently play with no tools."""


PROBE_TOOL = types.Tool(name="get_weather", description="The weather in a city.",
                        input_schema={"type": "object", "properties": {"city": {"type": "string"}},
                                      "required": ["city"]})


async def check_native_tools(client: ChatClient) -> None:
    """Raise `NativeToolsUnsupported` when `client`'s endpoint ignores `tools` (llama-cpp-python's server with
    its default chat handler does): the same one-token request, with and without a tool, must cost more
    prompt tokens with it. An endpoint that reports no usage cannot be told apart and passes."""
    probe = [{"role": "user", "content": "Say ok."}]
    bare = await client.complete(probe, max_tokens=1)
    tooled = await client.complete(probe, tools=openai_tools([PROBE_TOOL]), max_tokens=1)
    without, with_tools = bare.usage.get("prompt_tokens"), tooled.usage.get("prompt_tokens")
    if isinstance(without, int) and isinstance(with_tools, int) and with_tools <= without:
        raise NativeToolsUnsupported(
            f"{client.base_url} ignores the `tools` parameter (prompt tokens {without} without a tool, {with_tools} "
            "with one), so --format native would play every episode with no tools. Use --format text or "
            "--format awm (tools described in the prompt), or serve the model with a tool-calling chat handler "
            "(llama-cpp-python: --chat_format chatml-function-calling; vLLM: --enable-auto-tool-choice "
            "--tool-call-parser ...).")


def native_tools_problem(client: ChatClient) -> str | None:
    """Why `client`'s endpoint cannot play the native format (it drops `tools`, or does not answer), or None.

    Runs `check_native_tools` on an event loop of its own and closes the client: what a command does once,
    before its run starts, so a person learns at once instead of from a run of tool-less episodes."""
    import anyio

    from mcpworld.core.llm import LLMError

    async def probe() -> None:
        try:
            await check_native_tools(client)
        finally:
            await client.aclose()  # its connections belong to this event loop, not the run's

    try:
        anyio.run(probe)
    except (NativeToolsUnsupported, LLMError) as exc:
        return str(exc)
    return None


def get_format(name: str) -> Format:
    try:
        return FORMATS[name]()
    except KeyError:
        raise ValueError(f"unknown tool-call format {name!r}; choose from {', '.join(FORMATS)}") from None
