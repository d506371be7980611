"""OpenRLHF agent bridge: pass this file as `--train.agent_func_path` (OpenRLHF 0.11).

One MCP episode per rollout, reached through the registry; the label names the server and the task. The
model's text is parsed for `<tool_call>` blocks, calls go to the world over MCP, results come back as the
next user turn, and the reward is the verifier's verdict when the model answers without a call.

Guarantees OpenRLHF needs: no environment error ever raises into the trainer (unless asked, see below);
`sampling_params` is copied per episode (a group shares one object and the executor mutates it);
`extra_logs` always has the same keys; the MCP connection is always closed.

Infrastructure errors (the world unreachable, the connection lost, a request timed out) are not the model's
doing and never become a reward. OpenRLHF 0.11 has no way to skip one sample: `generate_responses` gathers a
prompt's samples without `return_exceptions`, so an exception fails the whole batch and the training step;
a `None` reward sends the batch to a reward model; and advantages reshape rewards to (prompts,
n_samples_per_prompt), so a sample cannot be left out. So the bridge (1) retries the whole rollout, a fresh
generation on a fresh episode, with backoff (MCPWORLD_INFRA_RETRIES, default 3); (2) if every try fails,
returns reward 0 with `extra_logs["infra_error"] = 1`, and with MCPWORLD_ON_INFRA_ERROR=filter a NaN score,
which OpenRLHF's dynamic filtering (`--algo.dynamic_filtering_enable`) treats as out of range: the prompt's
whole group is dropped and a fresh prompt drawn, the one exclusion OpenRLHF supports. `raise` stops training.

Settings (environment variables, read per episode):
- MCPWORLD_REGISTRY: registry URL (default http://127.0.0.1:8765)
- MCPWORLD_MAX_TURNS: tool-call turns before the episode is verified as it stands (default 16)
- MCPWORLD_FEEDBACK_TEMPLATE: how tool results are wrapped for the next turn; `{results}` is replaced
  (default: ChatML, as Qwen models use)
- MCPWORLD_INFRA_RETRIES: rollouts retried after an infrastructure error (default 3)
- MCPWORLD_INFRA_BACKOFF_S: seconds before the first retry, doubled each time, at most 30 (default 2)
- MCPWORLD_ON_INFRA_ERROR: after the last retry, `zero` (reward 0, flagged; default), `filter` (also a NaN
  score, for dynamic filtering) or `raise` (fail the batch, stopping training)
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
import os
from collections.abc import Awaitable, Callable
from copy import deepcopy
from typing import Any, TypeVar

import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from mcpworld.agent.formats import TextFormat
from mcpworld.agent.loop import infra_error_text, infra_reason
from mcpworld.agent.trajectory import Termination
from mcpworld.core.protocol import EpisodeControl
from mcpworld.registry.connect import connect

CHATML_FEEDBACK = "<|im_end|>\n<|im_start|>user\n{results}<|im_end|>\n<|im_start|>assistant\n"
LOG_KEYS = ("env_error", "infra_error", "format_error", "passed", "turns", "tool_errors", "attempts")
INFRA_MODES = ("zero", "filter", "raise")
_current: contextvars.ContextVar[MCPWorldAgent | None] = contextvars.ContextVar("mcpworld_agent", default=None)
_attempt: contextvars.ContextVar[int] = contextvars.ContextVar("mcpworld_attempt", default=1)
T = TypeVar("T")


class InfraError(RuntimeError):
    """Every try of a rollout was lost to an infrastructure error (raised only with MCPWORLD_ON_INFRA_ERROR=raise)."""


def parse_label(label: Any) -> dict[str, Any]:
    """The label is JSON: {"server": "io.mcpworld/airline", "task": "cancel-within-24h", "seed": 0}."""
    data = json.loads(label) if isinstance(label, str) else dict(label)
    if not isinstance(data.get("server"), str) or not isinstance(data.get("task"), str):
        raise ValueError(f"label needs 'server' and 'task': {label!r}")
    return data


class Link:
    """One rollout's MCP connection, held open by an asyncio task of its own (OpenRLHF runs on asyncio).

    The SDK ties a connection to the task that opened it: when the transport dies it cancels that task. Opened
    in `reset`, that would be OpenRLHF's rollout task, and the cancellation would escape into the trainer
    (`generate_responses` gathers rollouts without `return_exceptions`). Here only the holder is cancelled; a
    request in flight then ends with ConnectionError, which the agent reports as an infrastructure error.
    """

    def __init__(self) -> None:
        self.ctl: EpisodeControl | None = None
        self.failure: BaseException | None = None
        self._release = asyncio.Event()
        self._gone = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def open(self, server: str, registry: str | None, timeout: float) -> EpisodeControl:
        opened: asyncio.Future[EpisodeControl] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(opened, server, registry, timeout))
        return await opened

    async def _hold(self, opened: asyncio.Future[EpisodeControl], server: str, registry: str | None,
                    timeout: float) -> None:
        try:
            async with connect(server, registry=registry, timeout=timeout) as client:
                self.ctl = EpisodeControl(client, timeout)
                opened.set_result(self.ctl)
                await self._release.wait()
        except Exception as exc:  # could not connect, or the transport died (the SDK's task group raises here)
            self.failure = exc
        finally:
            self._gone.set()
            if not opened.done():
                opened.set_exception(self.failure or ConnectionError("the MCP connection was cancelled"))

    async def request(self, make: Callable[[], Awaitable[T]]) -> T:
        """`await make()`, or ConnectionError as soon as the connection is gone."""
        if self._gone.is_set():
            raise ConnectionError(f"connection lost: {self.failure}")
        call, gone = asyncio.ensure_future(make()), asyncio.ensure_future(self._gone.wait())
        try:
            await asyncio.wait({call, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for f in (call, gone):
                if not f.done():
                    f.cancel()
        if call.done() and not call.cancelled():
            return call.result()
        raise ConnectionError(f"connection lost: {self.failure}")

    async def close(self) -> None:
        self._release.set()
        if self._task is not None:
            done, _ = await asyncio.wait({self._task}, timeout=10)
            if not done:
                self._task.cancel()


class MCPWorldAgent(AgentInstanceBase):
    """One rollout = one MCP episode."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.link: Link | None = None
        self.ctl: EpisodeControl | None = None
        self.episode: str | None = None
        self.tools: set[str] = set()
        self.turns = 0
        self.tool_errors = 0
        self.error: str | None = None
        self.infra: str | None = None  # why our side lost the episode ("connection lost", ...): retried, unscored
        self.attempt = _attempt.get()
        self.format = TextFormat()
        self.max_turns = int(os.environ.get("MCPWORLD_MAX_TURNS", "16"))
        self.feedback = os.environ.get("MCPWORLD_FEEDBACK_TEMPLATE", CHATML_FEEDBACK)

    async def reset(self, states: dict, **kwargs: Any) -> dict:
        _current.set(self)
        try:
            label = parse_label(states["label"])
        except Exception as exc:  # a bad dataset row: retrying cannot help, and it is nobody's reward
            self.error = f"bad label: {type(exc).__name__}: {exc}"
            return {"observation": states["observation"]}
        try:
            self.link = link = Link()
            self.ctl = ctl = await link.open(label["server"], label.get("registry"), float(label.get("timeout", 60)))
            self.tools = {t.name for t in await link.request(ctl.tools)}
            self.episode = (await link.request(lambda: ctl.start(label["task"], int(label.get("seed", 0))))).episode
        except Exception as exc:  # reported at the first step, never raised into OpenRLHF
            self.error, self.infra = f"reset failed: {infra_error_text(exc)}", infra_reason(exc)
        return {"observation": states["observation"]}

    def _result(self, reward: float, feedback: str, done: bool, *, passed: bool = False,
                format_error: bool = False) -> dict[str, Any]:
        logs = {"env_error": float(self.error is not None), "infra_error": float(self.infra is not None),
                "format_error": float(format_error), "passed": float(passed), "turns": float(self.turns),
                "tool_errors": float(self.tool_errors), "attempts": float(self.attempt)}
        return {"rewards": torch.tensor(reward), "scores": torch.tensor(reward), "environment_feedback": feedback,
                "done": done, "extra_logs": {k: torch.tensor(logs[k]) for k in LOG_KEYS}}

    async def step(self, states: dict, **kwargs: Any) -> dict[str, Any]:
        if self.error is not None or self.link is None or self.ctl is None or self.episode is None:
            return self._result(0.0, "", True)
        link, ctl, episode = self.link, self.ctl, self.episode
        try:
            self.turns += 1
            action = self.format.parse({"role": "assistant", "content": states["action_text"]}, [])
            if action.error is not None or any(c.name not in self.tools for c in action.calls):
                ended = Termination.FORMAT_ERROR if action.error is not None else Termination.UNKNOWN_TOOL
                return self._result(ended.reward(), "", True, format_error=True)
            if not action.calls or self.turns > self.max_turns:
                result = await link.request(lambda: ctl.verify(episode, action.final, close=True))
                verdict = result.verdict
                if result.closed:
                    self.episode = None  # nothing left to close
                ended = Termination.FINAL_ANSWER if not action.calls else Termination.MAX_TURNS
                return self._result(ended.reward(verdict.passed), "", True, passed=verdict.passed)
            results = []
            for call in action.calls:
                result = await link.request(lambda call=call: ctl.call(episode, call.name, call.arguments))
                self.tool_errors += bool(result.is_error)
                text = "\n".join(getattr(c, "text", "") for c in result.content)
                results.append((text, bool(result.is_error)))
            blocks = self.format.result_messages(action, results)[0]["content"]
            return self._result(0.0, self.feedback.format(results=blocks), False)
        except Exception as exc:  # the world died or the connection broke: not the model's doing
            self.error, self.infra = f"step failed: {infra_error_text(exc)}", infra_reason(exc)
            return self._result(0.0, "", True)

    async def close(self) -> None:
        link, self.link = self.link, None
        if link is None:
            return
        if self.ctl is not None and self.episode is not None:
            ctl, episode = self.ctl, self.episode
            try:
                await asyncio.wait_for(link.request(lambda: ctl.close(episode)), 10)
            except Exception:
                pass
        await link.close()


class AgentExecutor(MultiTurnAgentExecutor):
    """What OpenRLHF instantiates (with no arguments) once per rollout actor."""

    def __init__(self) -> None:
        super().__init__(MCPWorldAgent)

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine,  # type: ignore[no-untyped-def]
                      images=None):
        """One rollout; one lost to an infrastructure error is played again from scratch (see the module doc)."""
        retries = max(int(os.environ.get("MCPWORLD_INFRA_RETRIES", "3")), 0)
        backoff = float(os.environ.get("MCPWORLD_INFRA_BACKOFF_S", "2"))
        mode = os.environ.get("MCPWORLD_ON_INFRA_ERROR", "zero")
        if mode not in INFRA_MODES:
            raise ValueError(f"MCPWORLD_ON_INFRA_ERROR={mode!r}: use one of {', '.join(INFRA_MODES)}")
        for attempt in range(1, retries + 2):
            result, infra = await self._attempt(attempt, prompt, label, sampling_params, max_length, hf_tokenizer,
                                                llm_engine, images)
            if infra is None:
                return result
            if attempt <= retries:
                await asyncio.sleep(min(backoff * 2 ** (attempt - 1), 30.0))
        if mode == "raise":
            raise InfraError(f"rollout for {label!r} lost to infrastructure errors {retries + 1} times: {infra}")
        result["reward"] = Termination.INFRA_ERROR.reward()  # 0, never a penalty: the model did nothing wrong
        result["scores"] = torch.tensor(math.nan if mode == "filter" else 0.0)
        return result

    async def _attempt(self, attempt: int, prompt, label, sampling_params, max_length: int, hf_tokenizer,  # type: ignore[no-untyped-def]
                       llm_engine, images) -> tuple[dict[str, Any], str | None]:
        token, attempt_token = _current.set(None), _attempt.set(attempt)
        try:
            result = await super().execute(prompt, label, deepcopy(sampling_params), max_length, hf_tokenizer,
                                           llm_engine, images)
            agent = _current.get()
            return result, (agent.error if agent is not None and agent.infra is not None else None)
        finally:
            agent = _current.get()
            if agent is not None:
                await agent.close()
            _current.reset(token)
            _attempt.reset(attempt_token)
