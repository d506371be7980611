"""Policies: an OpenAI-compatible model, or scripted ones (oracle, random, replay) for baselines and tests.

A policy sees the conversation so far and the domain tools, and returns one `Action`.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Protocol

import anyio
import mcp_types as types

from mcpworld.agent.formats import Action, Format, NativeFormat, get_format
from mcpworld.core.llm import ChatClient
from mcpworld.core.models import TaskInfo, ToolCall
from mcpworld.core.paths import registry_token
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.schemas import random_value


class SetupError(Exception):
    """The run was set up wrong (no references for the oracle, no recording for replay): not the agent's doing, so
    the episode is no sample and has no reward, and the run says what to fix."""


class Policy(Protocol):
    name: str
    format: Format
    model: str | None

    async def act(self, messages: list[dict[str, Any]], tools: list[types.Tool], task: TaskInfo) -> Action: ...


def _turn(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant")


class OpenAIPolicy:
    """A model behind any OpenAI-compatible endpoint."""

    name = "openai"

    def __init__(self, client: ChatClient, format: Format | None = None):
        self.client = client
        self.format = format or NativeFormat()
        self.model: str | None = client.model
        self.usage: dict[str, int] = {}

    async def act(self, messages: list[dict[str, Any]], tools: list[types.Tool], task: TaskInfo) -> Action:
        completion = await self.client.complete(messages, tools=self.format.tools_param(tools))
        self.usage = completion.usage
        message = {"role": "assistant", "content": completion.message.get("content")}
        if completion.message.get("tool_calls"):
            message["tool_calls"] = completion.message["tool_calls"]
        action = self.format.parse(message, messages)
        action.truncated = completion.finish_reason == "length" and action.error is not None  # cut mid-call
        return action


class OraclePolicy:
    """Plays the task's reference solution, then gives its reference answer.

    Servers never hand references to policies: the oracle fetches them itself, over its own privileged
    request (the task list with the registry token), in `begin`.
    """

    name = "oracle"
    model: str | None = None

    def __init__(self, format: Format | None = None, token: str | None = None):
        self.format = format or NativeFormat()
        self.token = token
        self.references: dict[tuple[str, int], TaskInfo] = {}  # (task, seed): a seed renames what calls name
        self._fetching = anyio.Lock()  # one oracle may serve many workers: they share one fetch

    async def begin(self, ctl: EpisodeControl, server: str, task: TaskInfo) -> None:
        """Fetch the references of `server`'s tasks on the episode's seed (once per task and seed, however many
        episodes ask at once)."""
        if (task.id, task.seed) in self.references:
            return
        async with self._fetching:
            if (task.id, task.seed) in self.references:
                return
            token = self.token or registry_token(None)[0]
            for info in (await ctl.tasks(token=token, seed=task.seed)).tasks:
                if info.solution or info.answer:
                    self.references[(info.id, task.seed)] = info

    async def act(self, messages: list[dict[str, Any]], tools: list[types.Tool], task: TaskInfo) -> Action:
        reference = self.references.get((task.id, task.seed)) or task
        if not (reference.solution or reference.answer):
            raise SetupError(f"no reference for task {task.id}: the server did not reveal it (is the registry "
                             "token the server's? set MCPWORLD_REGISTRY_TOKEN)")
        turn = _turn(messages)
        if turn < len(reference.solution):
            call = reference.solution[turn]
            return Action(message=self.format.assistant_message([call], None), calls=[call])
        final = reference.answer or "Done."
        return Action(message={"role": "assistant", "content": final}, final=final)


class RandomPolicy:
    """Schema-valid random calls for a few turns, then gives up: a floor every real policy must beat."""

    name = "random"
    model: str | None = None

    def __init__(self, seed: int = 0, max_calls: int = 4, format: Format | None = None):
        self.rng = random.Random(seed)
        self.max_calls = max_calls
        self.format = format or NativeFormat()

    async def act(self, messages: list[dict[str, Any]], tools: list[types.Tool], task: TaskInfo) -> Action:
        if _turn(messages) >= self.max_calls or not tools:
            return Action(message={"role": "assistant", "content": "I could not finish."}, final="I could not finish.")
        tool = self.rng.choice(tools)
        call = ToolCall(name=tool.name, arguments=random_value(tool.input_schema, self.rng) or {})
        return Action(message=self.format.assistant_message([call], None), calls=[call])


class ReplayPolicy:
    """Replays the assistant turns of recorded trajectories (JSONL), matched by task and seed (a seed renames the
    ids a call names, so a turn recorded on one seed means nothing on another)."""

    name = "replay"
    model: str | None = None

    def __init__(self, path: str | Path, format: Format | None = None):
        from mcpworld.agent.trajectory import read_jsonl
        from mcpworld.core.termination import INFRA_TERMINATIONS

        self.format = format or NativeFormat()
        self.turns: dict[tuple[str, int], list[dict[str, Any]]] = {}
        # Torn or undecodable lines are skipped with a warning naming file:line; episodes lost to an
        # infrastructure error were cut short by the outage, not by the agent, so they are not replayed.
        for _, record in read_jsonl(path, stacklevel=3):
            if not isinstance(record.get("task"), str) or record.get("termination") in INFRA_TERMINATIONS:
                continue
            messages = record["messages"] if isinstance(record.get("messages"), list) else []
            seed = record.get("seed") if isinstance(record.get("seed"), int) else 0
            self.turns.setdefault((record["task"], seed),
                                  [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"])

    async def act(self, messages: list[dict[str, Any]], tools: list[types.Tool], task: TaskInfo) -> Action:
        recorded = self.turns.get((task.id, task.seed))
        if recorded is None:
            seeds = sorted(s for t, s in self.turns if t == task.id)
            raise SetupError(f"no recorded trajectory for task {task.id} on seed {task.seed} in the replay file"
                             + (f" (it has seeds {', '.join(map(str, seeds))}: run with the same --seed)" if seeds
                                else ": record it, or run only the recorded tasks (--task)"))
        turn = _turn(messages)
        if turn >= len(recorded):
            return Action(message={"role": "assistant", "content": ""}, final="")
        return self.format.parse(dict(recorded[turn]), messages)


POLICIES = ("oracle", "random", "replay", "openai")


def make_policy(name: str, *, seed: int = 0, index: int = 0, format: str | Format = "native",
                client: ChatClient | None = None, model: str | None = None, base_url: str | None = None,
                temperature: float | None = None, max_tokens: int | None = None, timeout_s: float | None = None,
                replay_file: str | Path | None = None, token: str | None = None) -> Policy:
    """The policy called `name` for runner worker `index`: the one factory behind every command and screen.

    Random policies are seeded `seed * 1000 + index`, so workers and runs draw apart. `openai` talks to
    `client`, or to a new `ChatClient` for `model` at `base_url` (unset options keep the client's defaults;
    `max_tokens` caps each reply).
    """
    fmt = get_format(format) if isinstance(format, str) else format
    if name == "oracle":
        return OraclePolicy(fmt, token=token)
    if name == "random":
        return RandomPolicy(seed=seed * 1000 + index, format=fmt)
    if name == "replay":
        if replay_file is None:
            raise ValueError("the replay policy needs a replay file")
        return ReplayPolicy(replay_file, fmt)
    if name == "openai":
        if client is None:
            options: dict[str, Any] = {"base_url": base_url, "model": model, "timeout_s": timeout_s}
            sampling = {"temperature": temperature, "max_tokens": max_tokens}
            client = ChatClient(**{k: v for k, v in options.items() if v is not None},
                                sampling={k: v for k, v in sampling.items() if v is not None})
        return OpenAIPolicy(client, fmt)
    raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}")
