"""The embedded GRPO trainer: a tiny model built here makes real updates and learns the toy world."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the embedded trainer needs torch (installed by .ci/run)")

import mcpworld.trainer.toy_world as toy  # noqa: E402

TOY = str(Path(toy.__file__).parent)


def test_reward_rises_on_the_toy_world(tmp_path: Path) -> None:
    out = tmp_path / "run"
    # The three colours' calls are all action tokens; only pressing green is rewarded.
    cmd = [sys.executable, "-m", "mcpworld", "train", "grpo", "--world", TOY, "--tiny", "--task", "press-green",
           "--tasks-per-step", "1", "-G", "8", "--max-turns", "1", "--max-new-tokens", "1", "--lr", "0.05",
           "--kl-coef", "0.001", "--steps", "10", "--seed", "0", "--checkpoint-every", "5", "-o", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 10
    curve = [m["mean_reward"] for m in metrics]
    first, last = sum(curve[:2]) / 2, sum(curve[-3:]) / 3
    assert first <= 0.5 and last >= 0.9, curve
    assert any(m["tokens"] > 0 for m in metrics)
    assert (out / "checkpoint-5" / "config.json").exists() and (out / "final" / "grpo_config.json").exists()


@pytest.mark.anyio
async def test_a_step_changes_the_weights(tmp_path: Path) -> None:
    from mcpworld.core.protocol import EpisodeControl
    from mcpworld.trainer.grpo import GRPOConfig, GRPOTrainer
    from mcpworld.trainer.grpo_run import open_world
    from mcpworld.trainer.tiny import tiny_model, tiny_tokenizer

    async with open_world(Path(TOY), None) as (client, name):
        ctl = EpisodeControl(client)
        tasks = (await ctl.tasks(token=os.environ["MCPWORLD_REGISTRY_TOKEN"])).tasks
        tokenizer = tiny_tokenizer([t.instruction for t in tasks], ["<tool_call>x</tool_call>"])
        lm = tiny_model(len(tokenizer), seed=1)
        before = [p.detach().clone() for p in lm.parameters()]
        config = GRPOConfig(steps=1, tasks_per_step=3, group_size=4, max_turns=2, max_new_tokens=4, lr=1e-2,
                            drop_degenerate=False, estimator="rloo", output=tmp_path)
        [record] = await GRPOTrainer(lm, tokenizer, ctl, name, tasks, config).train()
    assert record["tokens"] > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, lm.parameters()))
