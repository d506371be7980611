"""verl agent loop: one mcpworld MCP episode per `run()` (verl 0.9's `AgentLoopBase`, registered as "mcpworld").

verl removed its MCP tool support; its agent-loop interface is what a multi-turn environment plugs into. A
dataset row whose `agent_name` is "mcpworld" names its episode in `extra_info.mcpworld` (the OpenRLHF label's
fields: `server`, `task`, optionally `seed`, `registry`, `timeout`; a mapping or its JSON text). The prompt is
the row's chat messages rendered by verl's own tokenization (`ct_build_initial_tokens`); each reply comes from
verl's server manager (`generate(request_id, prompt_ids=, sampling_params=)`, one request id per episode so
vLLM's prefix cache sticks), is parsed for `<tool_call>` blocks, the calls go to the world over MCP, and the
results come back as the next user turn written exactly as the model's chat template writes it
(`chat_turns`), with `response_mask` 0 on those tokens. The reward is the one reward table's
(`Termination.reward`, docs/training.md "Rewards"), returned as `reward_score`, so verl calls no reward
function for these rows.

Episodes on one event loop (a verl agent-loop worker) share one pooled connection per server
(`SharedClient`), as the OpenRLHF bridge's do. `run()` never raises for an episode's failure: a world server
dying mid-episode, a lost connection, a stray cancellation end the try as an infrastructure error, which is
replayed from scratch on a fresh episode (MCPWORLD_INFRA_RETRIES, MCPWORLD_INFRA_BACKOFF_S). verl cannot leave
one sample out of a batch (an exception from `run()` fails the whole step), so a rollout lost on every try,
a model error (the server manager raised, or aborted the request) and a bad dataset row come back with every
response token masked (`response_mask` all 0: verl's loss skips a fully masked sequence) and
`reward_score` 0, flagged in `reward_extra_info` (`infra_error`, `model_error`, `env_error`, `scored` 0).

Settings: `mcpworld.trainer.rollout_settings` (MCPWORLD_MAX_TURNS, MCPWORLD_MAX_REPLY_TOKENS,
MCPWORLD_ROLLOUT_LOG, the infra retries); the token budget of a whole rollout is verl's
`actor_rollout_ref.rollout.response_length`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from mcpworld.agent.formats import TextFormat
from mcpworld.agent.loop import infra_error_text, infra_reason
from mcpworld.agent.step import take_step
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.retry import retrying
from mcpworld.core.termination import Termination
from mcpworld.trainer.chat_turns import TurnTemplate, turn_template
from mcpworld.trainer.rollout_settings import (
    infra_backoff,
    infra_retries,
    log_rollout,
    max_turns,
    parse_label,
    reply_cap,
)
from mcpworld.trainer.shared_client import SharedClient

AGENT_NAME = "mcpworld"
ROW_KEY = "mcpworld"  # the dataset row's extra_info key that names the episode
INFO_KEYS = ("passed", "scored", "env_error", "infra_error", "model_error", "format_error", "truncated", "turns",
             "tool_errors", "attempts")
logger = logging.getLogger(__name__)
_templates: dict[int, tuple[Any, TurnTemplate]] = {}


def template_for(tokenizer: Any) -> TurnTemplate:
    """The tokenizer's turn template, read once per tokenizer (verl builds a loop per sample)."""
    held = _templates.get(id(tokenizer))
    if held is None or held[0] is not tokenizer:
        held = _templates[id(tokenizer)] = (tokenizer, turn_template(tokenizer))
    return held[1]


@dataclass
class Played:
    """One try at a rollout: the token stream so far and how it ended."""

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    episode: str | None = None  # the server's episode id while it is open
    environment: dict[str, str] = field(default_factory=dict)  # the build that judges it (the start result's)
    termination: Termination | None = None
    passed: bool = False
    replies: int = 0
    feedbacks: int = 0
    tool_errors: int = 0
    error: str | None = None
    infra: str | None = None  # why our side lost the episode: replayed, never scored
    metrics: dict[str, Any] = field(default_factory=lambda: {"generate_sequences": 0.0, "tool_calls": 0.0})
    steps: dict[str, Any] = field(default_factory=dict)  # the weights' global steps the replies were sampled at

    def add(self, ids: list[int], mask: int, logprobs: list[float] | None = None) -> None:
        self.response_ids += ids
        self.response_mask += [mask] * len(ids)
        if self.logprobs is not None:
            if mask and (logprobs is None or len(logprobs) != len(ids)):
                self.logprobs = None  # the engine gave none: verl recomputes them
            else:
                self.logprobs += list(logprobs) if mask and logprobs is not None else [0.0] * len(ids)

    def note(self, out: Any) -> None:
        """What verl's own loops keep of each `TokenOutput` besides its tokens: preemptions and weight steps."""
        if out.num_preempted is not None:
            self.metrics["num_preempted"] = max(self.metrics.get("num_preempted", 0), 0) + out.num_preempted
        for key in ("min_global_steps", "max_global_steps"):
            value = out.extra_fields.get(key)
            if value is not None and (key == "max_global_steps" or key not in self.steps):
                self.steps[key] = value

    def end(self, termination: Termination, passed: bool = False, error: str | None = None) -> None:
        self.termination, self.passed, self.error = termination, passed, error

    def lose(self, exc: BaseException) -> None:
        self.end(Termination.INFRA_ERROR, error=infra_error_text(exc))
        self.infra = infra_reason(exc)

    @property
    def scored(self) -> bool:
        return self.termination is not None and self.termination.scored and self.error is None


@register(AGENT_NAME)
class MCPWorldAgentLoop(AgentLoopBase):
    """One verl trajectory = one MCP episode (see the module doc)."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.pop("tools", None)  # verl's own tool list: the world brings its tools over MCP
        super().__init__(*args, **kwargs)
        self.response_length = int(self.rollout_config.response_length)
        self.template = template_for(self.tokenizer)
        self.format = TextFormat()

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play the row's episode; replay it after an infrastructure error; never raise for the episode."""
        prompt_ids = await self.ct_build_initial_tokens(list(kwargs["raw_prompt"]))
        extra = kwargs.get("extra_info") or {}
        try:
            label = parse_label(extra[ROW_KEY])
        except Exception as exc:  # a bad dataset row: nobody's reward, and replaying cannot help
            played = Played(prompt_ids, error=f"bad dataset row: extra_info.{ROW_KEY}: {type(exc).__name__}: {exc}")
            logger.warning("mcpworld: %s", played.error)
            return self.output(played, 1, sampling_params)
        played, attempt = await retrying(lambda _: self.play(Played(prompt_ids), label, sampling_params),
                                         retries=infra_retries(), backoff=infra_backoff(),
                                         lost=lambda played: played.infra is not None)
        if played.infra is not None:
            logger.warning("mcpworld: %s/%s lost to infrastructure errors %d times: %s", label["server"],
                           label["task"], attempt, played.error)
        return self.output(played, attempt, sampling_params)

    async def play(self, played: Played, label: dict[str, Any], sampling_params: dict[str, Any]) -> Played:
        """One try: open the episode on the shared connection, play it, close it; ends as `played` says."""
        timeout = float(label.get("timeout") or 60)  # a parquet struct column gives every row every key (None)
        shared = SharedClient.acquire((label["server"], label.get("registry"), timeout))
        ctl: EpisodeControl | None = None
        try:
            ctl = await shared.control()
            tools = {t.name for t in await ctl.tools()}
            started = await ctl.start(label["task"], int(label.get("seed") or 0))
            played.episode, played.environment = started.episode, dict(started.environment)
            await self.turns(played, ctl, tools, sampling_params)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # verl itself is stopping this trajectory: let it
            played.lose(ConnectionError("the episode's request was cancelled"))
        except Exception as exc:  # the world died or the connection broke: not the model's doing
            played.lose(exc)
        finally:
            episode, played.episode = played.episode, None
            try:
                if episode is not None and ctl is not None:
                    try:
                        async with asyncio.timeout(5):  # bounded: a dying server must not hold the rollout
                            await ctl.close(episode)
                    except Exception:  # the server may be gone: the episode dies with it
                        pass
            finally:
                await shared.release()
        return played

    async def turns(self, played: Played, ctl: EpisodeControl, tools: set[str], sampling_params: dict[str, Any]
                    ) -> None:
        """Generate, parse, call, feed back, until the episode ends (it is verified on its final answer)."""
        request_id, cap, limit = uuid4().hex, reply_cap(), max_turns()
        tokenizer: Any = self.tokenizer  # a Hugging Face tokenizer (verl annotates it as AutoTokenizer)
        while True:
            budget = self.response_length - len(played.response_ids)
            if budget <= 0:  # the rollout's token budget is spent before the next reply
                return played.end(Termination.TRUNCATED)
            asked = min(budget, cap or budget, int(sampling_params.get("max_tokens") or budget))
            started = time.perf_counter()
            try:
                out = await self.server_manager.generate(
                    request_id=request_id, prompt_ids=played.prompt_ids + played.response_ids,
                    sampling_params={**sampling_params, "max_tokens": asked})
            except Exception as exc:  # the model's side failed: no sample of the policy, and not the world's
                return played.end(Termination.MODEL_ERROR, error=f"generate failed: {type(exc).__name__}: {exc}")
            finally:
                played.metrics["generate_sequences"] += time.perf_counter() - started
            if out.stop_reason == "aborted":
                return played.end(Termination.MODEL_ERROR, error="the server manager aborted the generation")
            played.note(out)
            reply = list(out.token_ids)
            played.add(reply, 1, out.log_probs)
            played.replies += 1
            text = tokenizer.decode(reply, skip_special_tokens=True)
            closed = bool(reply) and reply[-1] in self.template.stop_ids
            assert played.episode is not None
            started = time.perf_counter()
            try:
                stepped = await take_step(ctl, played.episode, self.format, text, tools,
                                          cut=not closed and len(reply) >= asked, last=played.replies > limit)
            finally:
                played.metrics["tool_calls"] += time.perf_counter() - started
            if stepped.closed:
                played.episode = None
            if stepped.termination is not None:
                return played.end(stepped.termination, stepped.passed)
            played.tool_errors += stepped.tool_errors
            feedback = self.template.feedback(stepped.messages[0]["content"], reply[-1] if reply else None)
            played.add(tokenizer.encode(feedback, add_special_tokens=False), 0)
            played.feedbacks += 1

    def output(self, played: Played, attempts: int, sampling_params: dict[str, Any]) -> AgentLoopOutput:
        """verl's output for the try that counts: masked out entirely (and 0) when it is no sample of the policy.
        Every output of a batch has log-probs or none has (verl concatenates them): they are there when asked."""
        termination = played.termination  # None only for a bad dataset row
        scored = played.scored
        reward = termination.reward(played.passed) if termination is not None and scored else 0.0
        n = self.response_length
        mask = played.response_mask if scored else [0] * len(played.response_mask)
        logprobs = None
        if sampling_params.get("logprobs"):
            logprobs = played.logprobs if played.logprobs is not None else [0.0] * len(played.response_ids)
            if played.logprobs is None and scored:
                logger.warning("mcpworld: the server manager returned no log-probs although they were asked for")
        info = {"passed": float(played.passed), "scored": float(scored), "env_error": float(played.error is not None),
                "infra_error": float(played.infra is not None),
                "model_error": float(termination is Termination.MODEL_ERROR),
                "format_error": float(termination is not None and termination.penalized),
                "truncated": float(termination is Termination.TRUNCATED),
                "turns": float(played.replies), "tool_errors": float(played.tool_errors), "attempts": float(attempts)}
        ending = str(termination) if termination is not None else "bad_row"
        if termination is Termination.MODEL_ERROR:
            logger.warning("mcpworld: model error: %s", played.error)
        log_rollout({"reward": reward, "termination": ending, "extra_logs": info}, played.environment)
        return AgentLoopOutput(
            prompt_ids=played.prompt_ids, response_ids=played.response_ids[:n], response_mask=mask[:n],
            response_logprobs=logprobs[:n] if logprobs is not None else None,
            reward_score=reward, num_turns=played.replies + played.feedbacks + 1,
            metrics=AgentLoopMetrics(**played.metrics),
            extra_fields={"reward_extra_info": {k: info[k] for k in INFO_KEYS}, "termination": ending,
                          "mcpworld_error": played.error or "", "turn_scores": [], "tool_rewards": [],
                          **played.steps})
