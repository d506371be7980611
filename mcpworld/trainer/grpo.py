"""The embedded trainer: GRPO (or RLOO) on one machine, with torch and transformers, over MCP rollouts.

Each step: pick tasks, play a group of episodes per task with the local model as the policy (generation
in-process, actions through the world's MCP server), reward with the one reward table, compute group
advantages, and take several clipped policy-gradient updates on that batch (`ppo_epochs` x `minibatches`:
after the first, the policy has moved from the one that sampled, so the ratio leaves 1 and clip-higher
bites) with a KL penalty to the frozen reference model.

With `history_turns` (AWM's history-aware training), every turn is generated on system + task + the last K
turns, and each turn is its own sample over exactly that context: training sees what inference sees.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
import torch
import torch.nn.functional as F

from mcpworld.agent.formats import Action, TextFormat
from mcpworld.agent.loop import EpisodeConfig, run_episode
from mcpworld.agent.trajectory import Trajectory
from mcpworld.core.models import TaskInfo
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.retry import Backoff, retrying
from mcpworld.trainer.advantages import Estimator, advantages, degenerate
from mcpworld.trainer.rewards import verifier_reward

INFRA_RETRIES = 3  # tries per sample when the world server fails (infrastructure, not the policy)
INFRA_BACKOFF = Backoff(1.0, 10.0)


@dataclass
class GRPOConfig:
    steps: int = 20
    tasks_per_step: int = 4
    group_size: int = 8
    max_turns: int = 4
    max_new_tokens: int = 64
    temperature: float = 1.0
    lr: float = 1e-4
    eps_low: float = 0.2
    eps_high: float = 0.28  # clip-higher (DAPO): a wider upper bound keeps exploration alive
    kl_coef: float = 0.01
    estimator: Estimator = "group_norm"
    drop_degenerate: bool = True
    ppo_epochs: int = 2  # passes over each batch...
    minibatches: int = 2  # ...each split in this many optimizer steps
    history_turns: int | None = None  # AWM's history window (None: the whole conversation)
    seed: int = 0
    checkpoint_every: int = 0
    output: Path = field(default_factory=lambda: Path("grpo-run"))


@dataclass
class Turn:
    prompt_ids: list[int]
    action_ids: list[int]
    old_logprobs: list[float]


# transformers 5 renamed the KV cache from `past_key_values` to `cache`; accept both.
@functools.cache
def _cache_arg(model_type: type) -> str:
    return "cache" if "cache" in inspect.signature(model_type.forward).parameters else "past_key_values"


def _cache(out: Any) -> Any:
    return out.get("cache", None) if "cache" in out else out.get("past_key_values", None)


def render(messages: list[dict[str, Any]], tokenizer: Any) -> str:
    """The prompt text: the tokenizer's chat template when it has one, else a plain role-prefixed transcript."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    lines = [f"{m['role']}: {m.get('content') or ''}" for m in messages]
    return "\n".join(lines) + "\nassistant:"


class LocalPolicy:
    """The model being trained, as an agent policy; it records what it generated for the update."""

    name = "local"

    def __init__(self, lm: Any, tokenizer: Any, config: GRPOConfig, generator: torch.Generator):
        self.lm, self.tokenizer, self.config, self.generator = lm, tokenizer, config, generator
        self.format = TextFormat()
        self.model = getattr(lm.config, "_name_or_path", None) or "local"
        self.turns: list[Turn] = []

    @torch.no_grad()
    def generate(self, prompt_ids: list[int]) -> tuple[list[int], list[float]]:
        eos = self.tokenizer.eos_token_id
        out = self.lm(torch.tensor([prompt_ids]), use_cache=True)
        cache, logits = _cache(out), out.logits[0, -1]
        action, logps = [], []
        for _ in range(self.config.max_new_tokens):
            logp = F.log_softmax(logits / self.config.temperature, dim=-1)
            token = int(torch.multinomial(logp.exp(), 1, generator=self.generator))
            action.append(token)
            logps.append(float(logp[token]))
            if token == eos:
                break
            out = self.lm(torch.tensor([[token]]), use_cache=True, **{_cache_arg(type(self.lm)): cache})
            cache, logits = _cache(out), out.logits[0, -1]
        return action, logps

    async def act(self, messages: list[dict[str, Any]], tools: list[types.Tool], task: TaskInfo) -> Action:
        prompt_ids = self.tokenizer(render(messages, self.tokenizer), add_special_tokens=False)["input_ids"]
        action_ids, logps = self.generate(prompt_ids)
        self.turns.append(Turn(prompt_ids, action_ids, logps))
        text = self.tokenizer.decode(action_ids, skip_special_tokens=True)
        action = self.format.parse({"role": "assistant", "content": text}, messages)
        capped = len(action_ids) >= self.config.max_new_tokens and action_ids[-1] != self.tokenizer.eos_token_id
        action.truncated = capped and action.error is not None  # a call cut off by the cap, not a malformed one
        return action


def action_logprobs(lm: Any, turn: Turn, temperature: float) -> torch.Tensor:
    ids = torch.tensor([turn.prompt_ids + turn.action_ids])
    logits = lm(ids).logits[0, len(turn.prompt_ids) - 1: -1] / temperature
    return F.log_softmax(logits, dim=-1).gather(-1, torch.tensor(turn.action_ids).unsqueeze(-1)).squeeze(-1)


def policy_loss(lm: Any, ref: Any, samples: list[tuple[list[Turn], float]], config: GRPOConfig
                ) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-mean clipped surrogate with clip-higher, plus k3 KL to the reference model."""
    surrogate, kls, clipped, n, drift = [], [], 0, 0, 0.0
    for turns, adv in samples:
        for turn in turns:
            if not turn.action_ids:
                continue
            new = action_logprobs(lm, turn, config.temperature)
            with torch.no_grad():
                old_ref = action_logprobs(ref, turn, config.temperature)
            ratio = torch.exp(new - torch.tensor(turn.old_logprobs))
            bounded = torch.clamp(ratio, 1 - config.eps_low, 1 + config.eps_high)
            surrogate.append(torch.minimum(ratio * adv, bounded * adv))
            delta = old_ref - new
            kls.append(torch.exp(delta) - delta - 1)
            clipped += int((ratio != bounded).sum())
            drift = max(drift, float((ratio.detach() - 1).abs().max()))
            n += len(turn.action_ids)
    if not surrogate:
        zero = torch.zeros((), requires_grad=True)
        return zero, {"loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "ratio_drift": 0.0, "tokens": 0}
    pg = -torch.cat(surrogate).mean()
    kl = torch.cat(kls).mean()
    loss = pg + config.kl_coef * kl
    return loss, {"loss": loss.item(), "kl": kl.item(), "clip_frac": clipped / max(n, 1), "ratio_drift": drift,
                  "tokens": n}


class GRPOTrainer:
    def __init__(self, lm: Any, tokenizer: Any, ctl: EpisodeControl, server: str, tasks: list[TaskInfo],
                 config: GRPOConfig):
        self.lm, self.tokenizer, self.config = lm, tokenizer, config
        self.ctl, self.server, self.tasks = ctl, server, tasks
        torch.manual_seed(config.seed)
        self.rng = random.Random(config.seed)
        self.generator = torch.Generator().manual_seed(config.seed)
        self.ref = copy.deepcopy(lm).eval()
        for p in self.ref.parameters():
            p.requires_grad_(False)
        self.optimizer = torch.optim.AdamW(lm.parameters(), lr=config.lr)
        config.output.mkdir(parents=True, exist_ok=True)
        self.metrics_path = config.output / "metrics.jsonl"

    async def rollout(self, task: TaskInfo, step: int) -> tuple[list[list[Turn]], list[float], list[bool]] | None:
        """One group of samples for `task`; None when the world server kept failing (no reward, no update)."""
        turns, rewards, passed = [], [], []
        episode_config = EpisodeConfig(max_turns=self.config.max_turns, turn_timeout_s=600,
                                       history_turns=self.config.history_turns)
        for g in range(self.config.group_size):
            async def play(_: int) -> tuple[LocalPolicy, Trajectory]:
                policy = LocalPolicy(self.lm, self.tokenizer, self.config, self.generator)
                return policy, await run_episode(self.ctl, self.server, task, policy, episode_config, sample=g,
                                                 seed=step * 1000 + g)

            (policy, traj), _ = await retrying(play, retries=INFRA_RETRIES, backoff=INFRA_BACKOFF,
                                               lost=lambda played: played[1].is_infra)
            if traj.is_infra:
                return None  # an outage is not a sample of the policy: train on nothing rather than on it
            turns.append(policy.turns)
            rewards.append((await verifier_reward(traj)).value)
            passed.append(bool(traj.verdict and traj.verdict.passed))
        return turns, rewards, passed

    async def train(self, on_step: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        history = []
        for step in range(self.config.steps):
            began = time.perf_counter()
            chosen = self.rng.sample(self.tasks, min(self.config.tasks_per_step, len(self.tasks)))
            self.lm.eval()
            samples, all_rewards, all_passed, dropped, lost = [], [], [], 0, 0
            for task in chosen:
                group = await self.rollout(task, step)
                if group is None:
                    lost += 1
                    continue
                turns, rewards, passed = group
                all_rewards += rewards
                all_passed += passed
                if self.config.drop_degenerate and degenerate(rewards):
                    dropped += 1
                    continue
                samples += list(zip(turns, advantages(rewards, self.config.estimator)))
            self.lm.train()
            stats = self.update(samples)
            record = {"step": step, "mean_reward": sum(all_rewards) / max(1, len(all_rewards)),
                      "pass_rate": sum(all_passed) / max(1, len(all_passed)), "degenerate_groups": dropped,
                      "lost_groups": lost,
                      "groups": len(chosen), **stats, "seconds": round(time.perf_counter() - began, 3)}
            with open(self.metrics_path, "a") as f:
                f.write(json.dumps(record) + "\n")
            history.append(record)
            if on_step is not None:
                on_step(record)
            if self.config.checkpoint_every and (step + 1) % self.config.checkpoint_every == 0:
                self.save(self.config.output / f"checkpoint-{step + 1}")
        self.save(self.config.output / "final")
        return history

    def update(self, samples: list[tuple[list[Turn], float]]) -> dict[str, float]:
        """`ppo_epochs` passes over the batch in `minibatches` shuffled optimizer steps each. Reports the last
        step's loss and KL, the clipped fraction over every step, the largest |ratio - 1| seen, and tokens."""
        stats: dict[str, float] = {"loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "ratio_drift": 0.0, "tokens": 0,
                                   "updates": 0}
        if not samples:
            return stats
        chunks = max(1, min(self.config.minibatches, len(samples)))
        clip_fracs = []
        for _ in range(max(1, self.config.ppo_epochs)):
            order = self.rng.sample(range(len(samples)), len(samples))
            for c in range(chunks):
                loss, step = policy_loss(self.lm, self.ref, [samples[i] for i in order[c::chunks]], self.config)
                self.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.lm.parameters(), 1.0)
                self.optimizer.step()
                clip_fracs.append(step["clip_frac"])
                stats.update(loss=step["loss"], kl=step["kl"], ratio_drift=max(stats["ratio_drift"],
                                                                                step["ratio_drift"]))
                stats["updates"] += 1
        stats["clip_frac"] = sum(clip_fracs) / len(clip_fracs)
        stats["tokens"] = sum(len(t.action_ids) for turns, _ in samples for t in turns)
        return stats

    def save(self, path: Path) -> None:
        self.lm.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        (path / "grpo_config.json").write_text(json.dumps(asdict(self.config), default=str, indent=2))
