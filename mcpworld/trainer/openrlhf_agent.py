"""OpenRLHF agent bridge: pass this file as `--train.agent_func_path` (OpenRLHF 0.11).

One MCP episode per rollout, reached through the registry; the label names the server and the task. The
model's text is parsed for `<tool_call>` blocks, calls go to the world over MCP, results come back as the
next user turn written exactly as the model's chat template writes it (`chat_turns`), and the reward is the
one reward table's (`Termination.reward`, docs/training.md "Rewards").

Guarantees OpenRLHF needs: `step` never raises (a server dying mid-episode, a lost connection, a stray
cancellation all end the rollout as an infrastructure error); rollouts on one event loop share one pooled
connection per server (`SharedClient`, from `shared_client.py`, which the other adapters share: an
`EpisodeClient` held open by a task of its own while any rollout uses it, so no handshake per rollout and
the SDK never cancels OpenRLHF's task; a request on a connection that dies fails with `ConnectionError`, and
the next rollout reconnects); `sampling_params` is copied per episode (a group shares one object and the
executor mutates it); `extra_logs` always has the same keys (`LOG_KEYS`); the episode is always closed, and
the last rollout out closes the connection.

Infrastructure errors are not the model's doing and never become a reward. OpenRLHF 0.11 has no way to skip
one sample (`generate_responses` gathers a prompt's samples without `return_exceptions`; advantages reshape
rewards into (prompts, n_samples_per_prompt)), so the bridge (1) replays the whole rollout, a fresh
generation on a fresh episode, with backoff; (2) if every try fails, returns reward 0 with
`extra_logs["infra_error"] = 1` and, by default (`filter`), a NaN score, which dynamic filtering treats as
out of range: the prompt's whole group is dropped and a fresh prompt drawn, so the outage shifts no
advantage. `mcpworld train openrlhf` turns dynamic filtering on.

Settings (environment variables, read per rollout):
- MCPWORLD_REGISTRY: registry URL (default http://127.0.0.1:8765)
- MCPWORLD_MAX_TURNS: tool-call turns before the episode is verified as it stands (default 16)
- MCPWORLD_HISTORY_TURNS: AWM's history-aware training: each turn is generated on system + task + the last
  K turns (what the agent sees at inference with `--history-turns K`), and the rollout's training sample is
  one of its turns, drawn at random, over exactly that context (unset: the whole conversation, one stream)
- MCPWORLD_MAX_REPLY_TOKENS: cap on each reply; one cut off there ends the episode as `truncated` (reward 0)
  (unset: OpenRLHF's per-turn budget, what is left of --data.max_len)
- MCPWORLD_ROLLOUT_LOG: a JSONL file that gets one line per finished rollout (reward, termination, logs)
- MCPWORLD_INFRA_RETRIES: rollouts retried after an infrastructure error (default 3)
- MCPWORLD_INFRA_BACKOFF_S: seconds before the first retry, doubled each time, at most 30 (default 2)
- MCPWORLD_ON_INFRA_ERROR: after the last retry, `filter` (reward 0, NaN score: the group is dropped by
  dynamic filtering; default), `zero` (reward 0, score 0: stays in its group) or `raise` (fail the batch)
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import os
import random
from copy import deepcopy
from typing import Any

import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from mcpworld.agent.formats import TextFormat
from mcpworld.agent.loop import infra_error_text, infra_reason
from mcpworld.agent.step import take_step
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.retry import retrying
from mcpworld.core.termination import Termination
from mcpworld.trainer.chat_turns import CHATML, TurnTemplate, turn_template
from mcpworld.trainer.rollout_settings import (  # noqa: F401 - parse_label, reply_cap: re-exported
    history_turns,
    infra_backoff,
    infra_retries,
    log_rollout,
    max_turns,
    parse_label,
    reply_cap,
)
from mcpworld.trainer.shared_client import ClientKey, SharedClient  # noqa: F401 - ClientKey: re-exported

LOG_KEYS = ("env_error", "infra_error", "format_error", "truncated", "passed", "turns", "tool_errors", "attempts")
INFRA_MODES = ("filter", "zero", "raise")


class InfraError(RuntimeError):
    """Every try of a rollout was lost to an infrastructure error (raised only with MCPWORLD_ON_INFRA_ERROR=raise)."""


class Rollout:
    """What one `execute` shares with its agent: the chat template's turn text and the engine's last output.

    A plain class, not a dataclass: OpenRLHF loads this file with `spec_from_file_location` without registering
    it in `sys.modules`, where `@dataclass` looks its module up (and fails at start-up).
    """

    def __init__(self, template: TurnTemplate, attempt: int) -> None:
        self.template, self.attempt = template, attempt
        self.last: Any = None  # the engine's last CompletionOutput (token_ids, text, finish_reason, logprobs)
        self.agent: MCPWorldAgent | None = None


_rollout: contextvars.ContextVar[Rollout | None] = contextvars.ContextVar("mcpworld_rollout", default=None)


class RecordingEngine:
    """The rollout's engine as OpenRLHF's loop sees it: the same `generate`, with the output kept for `step`
    (its last token tells whether the reply closed its turn; its finish_reason whether it was cut off)."""

    def __init__(self, engine: Any, rollout: Rollout):
        self.engine, self.rollout = engine, rollout

    async def generate(self, prompt_token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None) -> Any:
        cap = reply_cap()
        if cap is not None and (sampling_params.max_tokens is None or sampling_params.max_tokens > cap):
            sampling_params = deepcopy(sampling_params)
            sampling_params.max_tokens = cap
        output = await self.engine.generate(prompt_token_ids, sampling_params, multi_modal_data=multi_modal_data)
        self.rollout.last = output.outputs[0]
        return output


class MCPWorldAgent(AgentInstanceBase):
    """One rollout = one MCP episode."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.rollout = _rollout.get() or Rollout(CHATML, 1)
        self.rollout.agent = self
        self.shared: SharedClient | None = None
        self.ctl: EpisodeControl | None = None
        self.episode: str | None = None  # the server's episode id while it is open
        self.environment: dict[str, str] = {}  # the build that judges it (the start result's)
        self.tools: set[str] = set()
        self.turns = 0
        self.tool_errors = 0
        self.termination: Termination | None = None
        self.error: str | None = None
        self.infra: str | None = None  # why our side lost the episode ("connection lost", ...): retried, unscored
        self.format = TextFormat()
        self.max_turns = max_turns()

    async def reset(self, states: dict, **kwargs: Any) -> dict:
        try:
            label = parse_label(states["label"])
        except Exception as exc:  # a bad dataset row: retrying cannot help, and it is nobody's reward
            self.error = f"bad label: {type(exc).__name__}: {exc}"
            return {"observation": states["observation"]}
        self.shared = SharedClient.acquire((label["server"], label.get("registry"), float(label.get("timeout", 60))))
        try:
            self.ctl = await self.shared.control()
            self.tools = {t.name for t in await self.ctl.tools()}
            started = await self.ctl.start(label["task"], int(label.get("seed", 0)))
            self.episode, self.environment = started.episode, dict(started.environment)
        except Exception as exc:  # reported at the first step, never raised into OpenRLHF
            self._lose(exc)
        return {"observation": states["observation"]}

    async def step(self, states: dict, **kwargs: Any) -> dict[str, Any]:
        try:
            return await self._step(states["action_text"])
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the trainer itself is stopping this rollout: let it
            self._lose(ConnectionError("the episode's request was cancelled"))
        except Exception as exc:  # the world died or the connection broke: not the model's doing
            self._lose(exc)
        return self.result(0.0, "", True)

    async def _step(self, text: str) -> dict[str, Any]:
        ctl, episode = self.ctl, self.episode
        if self.error is not None or ctl is None or episode is None:
            return self.result(0.0, "", True)
        self.turns += 1
        last = self.rollout.last
        cut, over = getattr(last, "finish_reason", None) == "length", self.turns > self.max_turns
        stepped = await take_step(ctl, episode, self.format, text, self.tools, cut=cut, last=over)
        if stepped.closed:
            self.episode = None
        if stepped.termination is not None:
            return self._end(stepped.termination, stepped.passed)
        self.tool_errors += stepped.tool_errors
        ids = getattr(last, "token_ids", None)
        feedback = self.rollout.template.feedback(stepped.messages[0]["content"], ids[-1] if ids else None)
        return self.result(0.0, feedback, False)

    def _end(self, termination: Termination, passed: bool = False) -> dict[str, Any]:
        self.termination = termination
        return self.result(termination.reward(passed), "", True, passed=passed)

    def _lose(self, exc: BaseException) -> None:
        self.termination = Termination.INFRA_ERROR
        self.error, self.infra = infra_error_text(exc), infra_reason(exc)

    def result(self, reward: float, feedback: str, done: bool, *, passed: bool = False) -> dict[str, Any]:
        logs = {"env_error": float(self.error is not None), "infra_error": float(self.infra is not None),
                "format_error": float(self.termination is not None and self.termination.penalized),
                "truncated": float(self.termination is Termination.TRUNCATED), "passed": float(passed),
                "turns": float(self.turns), "tool_errors": float(self.tool_errors),
                "attempts": float(self.rollout.attempt)}
        return {"rewards": torch.tensor(reward), "scores": torch.tensor(reward), "environment_feedback": feedback,
                "done": done, "extra_logs": {k: torch.tensor(logs[k]) for k in LOG_KEYS}}

    async def close(self) -> None:
        """End the episode if still open (bounded: a dying server must not hold the rollout) and let go of the
        shared client; never raises."""
        episode, self.episode, shared, self.shared = self.episode, None, self.shared, None
        try:
            if episode is not None and self.ctl is not None:
                try:
                    async with asyncio.timeout(5):
                        await self.ctl.close(episode)
                except Exception:  # the server may be gone: the episode dies with it
                    pass
        finally:
            if shared is not None:
                await shared.release()


class AgentExecutor(MultiTurnAgentExecutor):
    """What OpenRLHF instantiates (with no arguments) once per rollout actor."""

    def __init__(self) -> None:
        super().__init__(MCPWorldAgent)
        self._templates: dict[int, TurnTemplate] = {}
        self.rng = random.Random()

    def template(self, hf_tokenizer: Any) -> TurnTemplate:
        key = id(hf_tokenizer)
        if key not in self._templates:
            self._templates[key] = turn_template(hf_tokenizer)
        return self._templates[key]

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine,  # type: ignore[no-untyped-def]
                      images=None):
        """One rollout; one lost to an infrastructure error is played again from scratch (see the module doc)."""
        retries = infra_retries()
        mode = os.environ.get("MCPWORLD_ON_INFRA_ERROR", "filter")
        if mode not in INFRA_MODES:
            raise ValueError(f"MCPWORLD_ON_INFRA_ERROR={mode!r}: use one of {', '.join(INFRA_MODES)}")
        window = history_turns()

        async def play(attempt: int) -> tuple[dict[str, Any], MCPWorldAgent | None]:
            rollout = Rollout(self.template(hf_tokenizer), attempt)
            token = _rollout.set(rollout)
            try:
                if window is None:
                    result = await super(AgentExecutor, self).execute(
                        prompt, label, deepcopy(sampling_params), max_length, hf_tokenizer,
                        RecordingEngine(llm_engine, rollout), images)
                else:
                    result = await self._windowed(rollout, window, prompt, label, deepcopy(sampling_params),
                                                  max_length, hf_tokenizer, llm_engine)
            finally:
                _rollout.reset(token)
                if rollout.agent is not None:
                    await rollout.agent.close()
            agent = rollout.agent
            if agent is not None and set(result.get("extra_logs") or {}) != set(LOG_KEYS):  # never stepped
                result["extra_logs"] = agent.result(0.0, "", True)["extra_logs"]
            result["termination"] = str(agent.termination) if agent and agent.termination else None
            return result, agent

        (result, agent), _ = await retrying(play, retries=retries, backoff=infra_backoff(),
                                            lost=lambda played: played[1] is not None and played[1].infra is not None)
        if agent is None or agent.infra is None:
            return log_rollout(result, agent.environment if agent else None)
        if mode == "raise":
            raise InfraError(f"rollout for {label!r} lost to infrastructure errors {retries + 1} times: "
                             f"{agent.error}")
        result["reward"] = Termination.INFRA_ERROR.reward()  # 0, never a penalty: the model did nothing wrong
        result["scores"] = torch.tensor(math.nan if mode == "filter" else 0.0)
        return log_rollout(result)

    async def _windowed(self, rollout: Rollout, turns: int, prompt: str, label: str, sampling_params: Any,
                        max_length: int, hf_tokenizer: Any, llm_engine: Any) -> dict[str, Any]:
        """AWM's history-aware rollout: every turn generated on system + task + the last `turns` turns, and
        one of those (context, reply) pairs returned as the training sample (`turn_samples` has them all)."""
        agent = MCPWorldAgent()
        await agent.reset({"observation": prompt, "label": label})
        prompt_ids = hf_tokenizer(text=prompt, add_special_tokens=False)["input_ids"]
        segments: list[list[int]] = []  # per past turn: its reply tokens + the feedback tokens after it
        samples: list[tuple[list[int], list[int], list[float] | None]] = []
        total, step = 0.0, None
        while True:
            context = prompt_ids + [t for seg in (segments[-turns:] if turns else []) for t in seg]
            sampling_params.max_tokens = max_length - len(context)
            if sampling_params.max_tokens <= 0:
                break
            engine = RecordingEngine(llm_engine, rollout)
            out = (await engine.generate(context, deepcopy(sampling_params))).outputs[0]
            reply = list(out.token_ids)
            logps = None
            if sampling_params.logprobs is not None and out.logprobs is not None:
                logps = [lp[reply[i]].logprob for i, lp in enumerate(out.logprobs)]
            samples.append((context, reply, logps))
            step = await agent.step({"observation_text": "", "action_text": out.text, "label": label,
                                     "sampling_params": sampling_params})
            total += step["rewards"].item()
            if step["done"]:
                break
            segments.append(reply + hf_tokenizer(text=step["environment_feedback"],
                                                 add_special_tokens=False)["input_ids"])
        if not samples:  # the prompt alone fills the budget: one empty sample, as OpenRLHF's own loop gives
            samples.append((prompt_ids, [], None))
        context, reply, logps = samples[self.rng.randrange(len(samples))]
        log_probs = None if sampling_params.logprobs is None else [0.0] * len(context) + (logps or [])
        last = rollout.last
        return {"prompt": prompt, "label": label, "images": None, "mm_train_inputs": None, "reward": total,
                "scores": step["scores"] if step else total, "observation_tokens": context + reply,
                "action_ranges": [(len(context), len(context) + len(reply))], "rollout_log_probs": log_probs,
                "truncated": getattr(last, "finish_reason", None) == "length",
                "extra_logs": step["extra_logs"] if step else {}, "turn_samples": samples}
