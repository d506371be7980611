"""The simulated user of a conversational task: the agent talks to it with the `message_user` tool.

A task with a `User` is a conversation, as τ²-bench's are: the agent is not handed the user's goal, it greets the
user and learns what they want by asking. The user's side comes from one of two places:

- a **scripted** user (`User.turns`): its messages in order, the first opening the conversation; after the last
  it ends the conversation. Deterministic, for tests and for a world's own conversational tasks;
- a **model** user: an OpenAI-compatible endpoint (`UserModel`, from `MCPWORLD_USER_MODEL` and
  `MCPWORLD_USER_BASE_URL` on the server), prompted with the world's user guidelines (τ² worlds: τ²'s own
  simulation guidelines, read at import), the user's persona and instructions. Roles are flipped for it: the
  agent's messages are its "user" turns. Without a model a task whose user has no script is played as written
  (`direct`: the instruction is the user's scenario); the start result's `user` says which.

The user ends the conversation by writing one of `STOP_SIGNALS`; from then on the episode takes no more calls
and is to be verified (an agent stop or a user stop, both of which τ² scores). The conversation is recorded on
the episode: τ²'s COMMUNICATE and the project's checks read every message the agent sent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class User:
    """Who the agent talks to in a conversational task. `instructions` (and `persona`) are for the simulator
    only, never shown to the agent; `turns`, when given, script the user's messages in order."""

    instructions: str = ""
    persona: str = ""
    turns: tuple[str, ...] = ()


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
    messages: list[dict[str, str]] = field(default_factory=list)  # {"role": "assistant"|"user", "content"}
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


async def user_says(conversation: Conversation, model: UserModel | None) -> str:
    """The user's next message (recorded on the conversation); a stop signal in it ends the conversation.
    LLMError when the model endpoint fails: the server's failure, never the agent's."""
    user = conversation.user
    if conversation.mode == "scripted":
        spoken = sum(m["role"] == "user" for m in conversation.messages)
        text = user.turns[spoken] if spoken < len(user.turns) else STOP_SIGNALS[0]
    else:
        if model is None:
            raise LLMError("this conversation's user is played by a model, and the server has none "
                           "(set MCPWORLD_USER_MODEL and MCPWORLD_USER_BASE_URL)")
        flipped = [{"role": "user" if m["role"] == "assistant" else "assistant", "content": m["content"]}
                   for m in conversation.messages]
        system = {"role": "system", "content": system_prompt(user, conversation.guidelines)}
        reply = await model.client.complete([system, *flipped])
        text = str(reply.message.get("content") or "").strip()
        if not text:
            raise LLMError("the user model returned an empty message")
    conversation.messages.append({"role": "user", "content": text})
    conversation.ended = ended_by(text)
    return text


def tool_definition() -> dict[str, Any]:
    """`message_user` as an MCP tool definition: listed by worlds that have conversational tasks."""
    return {"name": MESSAGE_USER,
            "description": "Send a message to the user you are helping and get their reply. In a conversation "
                           "the user's first message is the instruction; ask them for what you need. When the "
                           "user ends the conversation the reply says so, and the episode takes no more calls.",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string", "minLength": 1,
                                                                         "maxLength": 4000}},
                            "required": ["message"], "additionalProperties": False}}
