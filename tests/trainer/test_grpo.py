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


async def _trainer(tmp_path: Path, **options):  # type: ignore[no-untyped-def]
    """A GRPO trainer on the toy world served in-process, with a tiny model whose vocabulary is almost all
    press calls (a few spellings of each), so its random replies are mostly calls and episodes run long."""
    from mcpworld.agent.formats import TextFormat
    from mcpworld.trainer.grpo import GRPOConfig, GRPOTrainer
    from mcpworld.trainer.tiny import tiny_model, tiny_tokenizer

    calls = [f"<tool_call>{' ' * k}" + json.dumps({"name": "press", "arguments": {"color": c}}) + "</tool_call>"
             for c in ("red", "green", "blue") for k in range(12)]
    assert all(TextFormat().parse({"content": c}, []).calls for c in calls)
    tokenizer = tiny_tokenizer(["press red green blue"], calls)
    config = GRPOConfig(output=tmp_path, **options)
    return tokenizer, lambda ctl, name, tasks: GRPOTrainer(tiny_model(len(tokenizer), seed=3), tokenizer, ctl, name,
                                                            tasks, config)


@pytest.mark.anyio
async def test_several_updates_per_batch_move_the_ratio_and_clip(tmp_path: Path) -> None:
    """One update per batch leaves the ratio at 1 (clip-higher inert); several make it leave 1 and clip."""
    from mcpworld.core.protocol import EpisodeControl
    from mcpworld.trainer.grpo_run import open_world

    results = {}
    async with open_world(Path(TOY), None) as (client, name):
        ctl = EpisodeControl(client)
        tasks = (await ctl.tasks()).tasks
        for epochs, minibatches in ((1, 1), (4, 2)):
            _, make = await _trainer(tmp_path / f"e{epochs}", steps=1, tasks_per_step=3, group_size=4, max_turns=1,
                                     max_new_tokens=1, lr=0.5, kl_coef=0.0, drop_degenerate=False,
                                     estimator="rloo", ppo_epochs=epochs, minibatches=minibatches)
            [results[epochs]] = await make(ctl, name, tasks).train()
    single, several = results[1], results[4]
    assert single["updates"] == 1 and single["ratio_drift"] < 1e-4 and single["clip_frac"] == 0.0
    assert several["updates"] == 8 and several["ratio_drift"] > 0.28 and several["clip_frac"] > 0.0


@pytest.mark.anyio
async def test_history_window_trains_on_the_inference_context(tmp_path: Path) -> None:
    """With history_turns=1 every turn's recorded training prompt is the render of exactly the windowed
    conversation the policy was shown (system + task + the last turn), and later turns are cut."""
    from mcpworld.agent.loop import EpisodeConfig, run_episode, window
    from mcpworld.core.protocol import EpisodeControl
    from mcpworld.trainer.grpo import GRPOConfig, LocalPolicy, render
    from mcpworld.trainer.grpo_run import open_world
    from mcpworld.trainer.tiny import tiny_model

    tokenizer, _ = await _trainer(tmp_path)
    config = GRPOConfig(max_new_tokens=1, history_turns=1, output=tmp_path)
    async with open_world(Path(TOY), None) as (client, name):
        ctl = EpisodeControl(client)
        task = (await ctl.tasks()).tasks[0]
        policy = LocalPolicy(tiny_model(len(tokenizer), seed=3), tokenizer, config, torch.Generator().manual_seed(0))
        traj = await run_episode(ctl, name, task, policy, EpisodeConfig(max_turns=5, history_turns=1))
    assert len(policy.turns) >= 4, traj.messages  # enough turns for the window to cut
    for k, turn in enumerate(policy.turns):
        shown = window(traj.messages[:2 + 2 * k], 1)
        assert turn.prompt_ids == tokenizer(render(shown, tokenizer), add_special_tokens=False)["input_ids"]
    full = tokenizer(render(traj.messages[:2 + 2 * 3], tokenizer), add_special_tokens=False)["input_ids"]
    assert len(policy.turns[3].prompt_ids) < len(full)


def test_gguf_trains_saves_and_reloads(tmp_path: Path) -> None:
    """`--gguf` loads a GGUF file, trains, and writes checkpoints that `--model` loads (transformers refuses to
    save a model still marked GGUF-quantized: the run used to lose its weights at the first save)."""
    pytest.importorskip("gguf", reason="install the gguf extra: pip install 'mcpworld[gguf]'")
    from mcpworld.trainer.tiny import save_tiny_gguf

    gguf_file = save_tiny_gguf(str(tmp_path / "tiny.gguf"), ["press red green blue", "press the green button"] * 10)
    common = ["--world", TOY, "--task", "press-green", "--tasks-per-step", "1", "-G", "2", "--max-turns", "1",
              "--max-new-tokens", "2", "--steps", "1"]
    first = subprocess.run([sys.executable, "-m", "mcpworld", "train", "grpo", "--gguf", gguf_file, *common,
                            "--checkpoint-every", "1", "-o", str(tmp_path / "a")], capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    saved = tmp_path / "a" / "final"
    assert (saved / "model.safetensors").exists() and (tmp_path / "a" / "checkpoint-1" / "config.json").exists()
    assert "quantization_config" not in json.loads((saved / "config.json").read_text())
    again = subprocess.run([sys.executable, "-m", "mcpworld", "train", "grpo", "--model", str(saved), *common,
                            "-o", str(tmp_path / "b")], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (tmp_path / "b" / "final" / "model.safetensors").exists()
