"""The simulated user of a conversational task: the agent talks to it with the `message_user` tool.

A task with a `User` is a conversation, as τ²-bench's are: the agent is not handed the user's goal, it greets the
user and learns what they want by asking. The user's side comes from one of two places:

- a **scripted** user (`User.turns`, or a script file given to the server: `load_scripts`): its messages in
  order, the first opening the conversation; after the last it ends the conversation. A turn may first call the
  user's own tools (`{"tool_calls": [{"name", "arguments"}], "content": text}`). Deterministic, for tests, for a
  world's own conversational tasks, and for replaying the user's side of recorded τ² runs;
- a **model** user: an OpenAI-compatible endpoint (`UserModel`, from `MCPWORLD_USER_MODEL` and
  `MCPWORLD_USER_BASE_URL` on the server), prompted with the world's user guidelines (τ² worlds: τ²'s own
  simulation guidelines, read at import), the user's persona and instructions. Roles are flipped for it: the
  agent's messages are its "user" turns. Without a model a task whose user has no script is played as written
  (`direct`: the instruction is the user's scenario); the start result's `user` says which.

The user ends the conversation by writing one of `STOP_SIGNALS`; from then on the episode takes no more calls
and is to be verified (an agent stop or a user stop, both of which τ² scores). The conversation is recorded on
the episode: τ²'s COMMUNICATE and the project's checks read every message the agent sent.

In a dual-control world (τ² telecom) the user has tools of their own (`World.user_tools`: their phone). A model
user is offered them and may call them before it answers, as τ²'s user simulator does; each call runs on the
episode as the user's (`act`), its result goes back to the model only, and the calls and results stay in the
conversation (role "user" with `tool_calls`, role "user_tool") for the model's later turns.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcpworld.core.llm import ChatClient, LLMError

MESSAGE_USER = "message_user"
GREETING = "Hi! How can I help you today?"  # τ²'s orchestrator opens every conversation with it
STOP_SIGNALS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
GUIDELINES = """You are playing a customer talking to a customer service agent. Stay in character and follow
the instructions below: say what you want the way a real person would, one step at a time, and give a piece of
information only when the agent asks for it or needs it. Never invent information the instructions do not give.
When what you wanted is done, or cannot be done, write ###STOP### as your whole message. If you are transferred
to a human agent, write ###TRANSFER###; if the scenario gives you nothing to say, write ###OUT-OF-SCOPE###."""

Mode = Literal["scripted", "model", "direct"]
Act = Callable[[str, dict[str, Any]], str]  # runs one of the user's own tools on the episode: its result text
MAX_USER_CALLS = 16  # tool calls a model user may make before one reply: a loop past it is the simulator's failure


Turn = str | dict[str, Any]  # a message, or {"content": message, "tool_calls": [{"name", "arguments"}]} first


@dataclass(frozen=True)
class User:
    """Who the agent talks to in a conversational task. `instructions` (and `persona`) are for the simulator
    only, never shown to the agent; `turns`, when given, script the user's messages (and own calls) in order."""

    instructions: str = ""
    persona: str = ""
    turns: tuple[Turn, ...] = ()


@dataclass
class UserModel:
    """The model that plays users whose messages are not scripted (prompted with the world's guidelines)."""

    client: ChatClient

    @classmethod
    def from_env(cls) -> UserModel | None:
        """`MCPWORLD_USER_MODEL` (and `MCPWORLD_USER_BASE_URL`, else `OPENAI_BASE_URL`), or None when unset."""
        model = os.environ.get("MCPWORLD_USER_MODEL")
        if not model:
            return None
        base = os.environ.get("MCPWORLD_USER_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        return cls(ChatClient(model=model, **({"base_url": base} if base else {})))


@dataclass
class Conversation:
    """An episode's conversation, as the agent's side sees it: its messages and the user's."""

    user: User
    mode: Mode
    guidelines: str = GUIDELINES
    messages: list[dict[str, Any]] = field(default_factory=list)
    """{"role": "assistant"|"user", "content"}; the user's own tool calls as {"role": "user", "content",
    "tool_calls": [{"id", "name", "arguments"}]} and their results as {"role": "user_tool", "tool_call_id",
    "content"}."""
    ended: str | None = None  # the signal the user ended it with

    def said_by_agent(self) -> list[str]:
        return [m["content"] for m in self.messages if m["role"] == "assistant"]


def mode_for(user: User | None, model: UserModel | None) -> Mode | None:
    """How a task's user is played on a server with `model` (None: the task is not a conversation)."""
    if user is None:
        return None
    return "scripted" if user.turns else "model" if model is not None else "direct"


def system_prompt(user: User, guidelines: str) -> str:
    persona = f"\n\nPersona:\n{user.persona}" if user.persona else ""
    return f"{guidelines.strip()}{persona}\n\nInstructions:\n{user.instructions.strip()}"


def ended_by(text: str) -> str | None:
    """The stop signal in a user's message, if any."""
    return next((s for s in STOP_SIGNALS if s in text), None)


def flipped(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the user model reads it: the agent's messages are its "user" turns, its own are its
    "assistant" turns (with the tool calls it made), its tools' results are "tool" messages."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "assistant":
            out.append({"role": "user", "content": m["content"]})
        elif m["role"] == "user_tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        else:
            mine: dict[str, Any] = {"role": "assistant", "content": m["content"]}
            if m.get("tool_calls"):
                mine["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                    "name": c["name"], "arguments": json.dumps(c["arguments"])}} for c in m["tool_calls"]]
            out.append(mine)
    return out


def _arguments(call: dict[str, Any]) -> dict[str, Any] | str:
    """A model tool call's arguments, or why they cannot be read (told to the model as the call's result)."""
    raw = (call.get("function") or {}).get("arguments") or "{}"
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        return f"Error: the arguments are not JSON ({exc})"
    return value if isinstance(value, dict) else "Error: the arguments must be a JSON object"


async def user_says(conversation: Conversation, model: UserModel | None, act: Act | None = None,
                    tools: list[dict[str, Any]] | None = None) -> str:
    """The user's next message (recorded on the conversation); a stop signal in it ends the conversation. With
    `tools` (OpenAI function definitions of the user's own tools) a model user may first call them, each run by
    `act`. LLMError when the model endpoint fails, or calls tools without end: the server's failure, never the
    agent's."""
    user = conversation.user
    if conversation.mode == "scripted":
        spoken = sum(m["role"] == "user" and not m.get("tool_calls") for m in conversation.messages)
        turn = user.turns[spoken] if spoken < len(user.turns) else STOP_SIGNALS[0]
        if isinstance(turn, dict):
            calls = [{"id": f"user_call_{spoken}_{i}", "name": str(c["name"]), "arguments": dict(c.get("arguments")
                                                                                             or {})}
                     for i, c in enumerate(turn.get("tool_calls") or [])]
            if calls and act is None:
                raise LLMError("this user's script calls the user's own tools, and this world gives the user none")
            if calls:
                conversation.messages.append({"role": "user", "content": "", "tool_calls": calls})
            for c in calls:
                conversation.messages.append({"role": "user_tool", "tool_call_id": c["id"],
                                              "content": act(c["name"], c["arguments"])})  # type: ignore[misc]
            turn = str(turn.get("content") or "")
        text = turn
    else:
        if model is None:
            raise LLMError("this conversation's user is played by a model, and the server has none "
                           "(set MCPWORLD_USER_MODEL and MCPWORLD_USER_BASE_URL)")
        system = {"role": "system", "content": system_prompt(user, conversation.guidelines)}
        offered = tools if act is not None else None
        for _ in range(MAX_USER_CALLS + 1):
            reply = await model.client.complete([system, *flipped(conversation.messages)], tools=offered or None)
            calls = reply.message.get("tool_calls") or [] if offered else []
            if not calls:
                break
            made = [{"id": str(c.get("id") or f"user_call_{i}"), "name": str((c.get("function") or {}).get("name")),
                     "arguments": _arguments(c)} for i, c in enumerate(calls)]
            conversation.messages.append({"role": "user", "content": str(reply.message.get("content") or ""),
                                          "tool_calls": [{**c, "arguments": c["arguments"] if isinstance(
                                              c["arguments"], dict) else {}} for c in made]})
            for c in made:
                result = c["arguments"] if isinstance(c["arguments"], str) else act(c["name"], c["arguments"])
                conversation.messages.append({"role": "user_tool", "tool_call_id": c["id"], "content": result})
        else:
            raise LLMError(f"the user model called its tools {MAX_USER_CALLS} times without saying anything")
        text = str(reply.message.get("content") or "").strip()
        if not text:
            raise LLMError("the user model returned an empty message")
    conversation.messages.append({"role": "user", "content": text})
    conversation.ended = ended_by(text)
    return text


def viewed_turn(turn: Turn, text: Callable[[str], str], value: Callable[[Any], Any]) -> Turn:
    """A script turn as a seed shows it (`View.text` for what is said, `View.value` for the calls' arguments)."""
    if isinstance(turn, str):
        return text(turn)
    return {"content": text(str(turn.get("content") or "")),
            "tool_calls": [{"name": c["name"], "arguments": value(c.get("arguments") or {})}
                           for c in turn.get("tool_calls") or []]}


def load_scripts(path: str | os.PathLike[str]) -> dict[str, tuple[Turn, ...]]:
    """Scripted users from a file: `{task id: [turn, ...]}`, or a τ² results file (`{"simulations": [...]}`), whose
    recorded user messages become each task's turns (its first simulation of a task), the user's own tool calls
    joined to the message that follows them. ValueError says what is wrong with the file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable JSON file of user scripts ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("simulations"), list):
        out: dict[str, tuple[Turn, ...]] = {}
        for sim in data["simulations"]:
            task = str(sim.get("task_id"))
            if task not in out:
                out[task] = tuple(recorded_turns(sim.get("messages") or []))
        return out
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError(f"{path}: expected {{task id: [turn, ...]}} or a τ² results file with \"simulations\"")
    return {str(k): tuple(v) for k, v in data.items()}


def recorded_turns(messages: list[dict[str, Any]]) -> list[Turn]:
    """The user's side of one recorded τ² conversation as script turns."""
    turns: list[Turn] = []
    calls: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") != "user":
            continue
        calls += [{"name": c["name"], "arguments": c.get("arguments") or {}} for c in m.get("tool_calls") or []]
        if m.get("content"):
            turns.append({"content": m["content"], "tool_calls": calls} if calls else m["content"])
            calls = []
    return turns


def tool_definition() -> dict[str, Any]:
    """`message_user` as an MCP tool definition: listed by worlds that have conversational tasks."""
    return {"name": MESSAGE_USER,
            "description": "Send a message to the user you are helping and get their reply. In a conversation "
                           "the user's first message is the instruction; ask them for what you need. When the "
                           "user ends the conversation the reply says so, and the episode takes no more calls.",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string", "minLength": 1,
                                                                         "maxLength": 4000}},
                            "required": ["message"], "additionalProperties": False}}
