"""OpenRLHF agent bridge: pass this file as `--train.agent_func_path` (OpenRLHF 0.11).

One MCP episode per rollout, reached through the registry; the label names the server and the task. The
model's text is parsed for `<tool_call>` blocks, calls go to the world over MCP, results come back as the
next user turn, and the reward is the verifier's verdict when the model answers without a call.

Guarantees OpenRLHF needs: no environment error ever raises into the trainer (it ends the episode with
reward 0 and `env_error=1`); `sampling_params` is copied per episode (a group shares one object and the
executor mutates it); `extra_logs` always has the same keys; the MCP connection is always closed.

Settings (environment variables, read per episode):
- MCPWORLD_REGISTRY: registry URL (default http://127.0.0.1:8765)
- MCPWORLD_MAX_TURNS: tool-call turns before the episode is verified as it stands (default 16)
- MCPWORLD_FEEDBACK_TEMPLATE: how tool results are wrapped for the next turn; `{results}` is replaced
  (default: ChatML, as Qwen models use)
"""

from __future__ import annotations

import contextvars
import json
import os
from contextlib import AsyncExitStack
from copy import deepcopy
from typing import Any

import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from mcpworld.agent.formats import TextFormat
from mcpworld.protocol import EpisodeControl
from mcpworld.registry.connect import connect

CHATML_FEEDBACK = "<|im_end|>\n<|im_start|>user\n{results}<|im_end|>\n<|im_start|>assistant\n"
LOG_KEYS = ("env_error", "format_error", "passed", "turns", "tool_errors")
_current: contextvars.ContextVar[MCPWorldAgent | None] = contextvars.ContextVar("mcpworld_agent", default=None)


def parse_label(label: Any) -> dict[str, Any]:
    """The label is JSON: {"server": "io.mcpworld/airline", "task": "cancel-within-24h", "seed": 0}."""
    data = json.loads(label) if isinstance(label, str) else dict(label)
    if not isinstance(data.get("server"), str) or not isinstance(data.get("task"), str):
        raise ValueError(f"label needs 'server' and 'task': {label!r}")
    return data


class MCPWorldAgent(AgentInstanceBase):
    """One rollout = one MCP episode."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.stack: AsyncExitStack | None = None
        self.ctl: EpisodeControl | None = None
        self.episode: str | None = None
        self.tools: set[str] = set()
        self.turns = 0
        self.tool_errors = 0
        self.error: str | None = None
        self.format = TextFormat()
        self.max_turns = int(os.environ.get("MCPWORLD_MAX_TURNS", "16"))
        self.feedback = os.environ.get("MCPWORLD_FEEDBACK_TEMPLATE", CHATML_FEEDBACK)

    async def reset(self, states: dict, **kwargs: Any) -> dict:
        _current.set(self)
        try:
            label = parse_label(states["label"])
            self.stack = AsyncExitStack()
            client = await self.stack.enter_async_context(
                connect(label["server"], registry=label.get("registry"), timeout=float(label.get("timeout", 60))))
            self.ctl = EpisodeControl(client, float(label.get("timeout", 60)))
            self.tools = {t.name for t in await self.ctl.tools()}
            self.episode = (await self.ctl.start(label["task"], int(label.get("seed", 0)))).episode
        except Exception as exc:  # reported at the first step, never raised into OpenRLHF
            self.error = f"reset failed: {type(exc).__name__}: {exc}"
        return {"observation": states["observation"]}

    def _result(self, reward: float, feedback: str, done: bool, *, passed: bool = False,
                format_error: bool = False) -> dict[str, Any]:
        logs = {"env_error": float(self.error is not None), "format_error": float(format_error),
                "passed": float(passed), "turns": float(self.turns), "tool_errors": float(self.tool_errors)}
        return {"rewards": torch.tensor(reward), "scores": torch.tensor(reward), "environment_feedback": feedback,
                "done": done, "extra_logs": {k: torch.tensor(logs[k]) for k in LOG_KEYS}}

    async def step(self, states: dict, **kwargs: Any) -> dict[str, Any]:
        if self.error is not None or self.ctl is None or self.episode is None:
            return self._result(0.0, "", True)
        try:
            self.turns += 1
            action = self.format.parse({"role": "assistant", "content": states["action_text"]}, [])
            if action.error is not None or any(c.name not in self.tools for c in action.calls):
                return self._result(-1.0, "", True, format_error=True)
            if not action.calls or self.turns > self.max_turns:
                result = await self.ctl.verify(self.episode, action.final, close=True)
                verdict = result.verdict
                if result.closed:
                    self.episode = None  # nothing left to close
                return self._result(1.0 if verdict.passed else 0.0, "", True, passed=verdict.passed)
            results = []
            for call in action.calls:
                result = await self.ctl.call(self.episode, call.name, call.arguments)
                self.tool_errors += bool(result.is_error)
                text = "\n".join(getattr(c, "text", "") for c in result.content)
                results.append((text, bool(result.is_error)))
            blocks = self.format.result_messages(action, results)[0]["content"]
            return self._result(0.0, self.feedback.format(results=blocks), False)
        except Exception as exc:
            self.error = f"step failed: {type(exc).__name__}: {exc}"
            return self._result(0.0, "", True)

    async def close(self) -> None:
        stack, self.stack = self.stack, None
        if stack is None:
            return
        if self.ctl is not None and self.episode is not None:
            try:
                await self.ctl.close(self.episode)
            except Exception:
                pass
        try:
            await stack.aclose()
        except Exception:
            pass


class AgentExecutor(MultiTurnAgentExecutor):
    """What OpenRLHF instantiates (with no arguments) once per rollout actor."""

    def __init__(self) -> None:
        super().__init__(MCPWorldAgent)

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine,  # type: ignore[no-untyped-def]
                      images=None):
        token = _current.set(None)
        try:
            return await super().execute(prompt, label, deepcopy(sampling_params), max_length, hf_tokenizer,
                                         llm_engine, images)
        finally:
            agent = _current.get()
            if agent is not None:
                await agent.close()
            _current.reset(token)
