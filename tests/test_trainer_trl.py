"""TRL adapter: the environment class TRL's GRPOTrainer gets as `environment_factory`, played directly against
a real world server, and a real (CPU, tiny model) TRL GRPO run on it. Skipped where TRL is not installed."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http

trl = pytest.importorskip("trl", reason="TRL is not installed (pip install 'mcpworld[trl]'; CI installs it)")

from mcpworld.trainer.trl_env import mcpworld_environment  # noqa: E402


def test_environment_plays_the_task_and_scores_by_the_table(worlds_url: str) -> None:
    from transformers.utils import get_json_schema

    env_cls = mcpworld_environment(f"{worlds_url}/worlds/airline/mcp")
    schema = get_json_schema(env_cls.cancel_reservation)["function"]  # what TRL shows the model
    assert schema["name"] == "cancel_reservation" and schema["parameters"]["required"] == ["reservation_id", "reason"]
    env = env_cls()
    assert env.reset(task="cancel-within-24h") is None
    assert '"ZFA04Y"' in env.get_reservation(reservation_id="ZFA04Y")
    assert "error" not in env.cancel_reservation(reservation_id="ZFA04Y", reason="change_of_plan")[:10]
    assert env.get_reward() == 1.0
    env.reset(task="cancel-within-24h")  # a fresh episode: nothing done yet
    assert env.get_reward() == 0.0
    with pytest.raises(ValueError, match="`task` column"):
        env.reset(prompt="no task here")
    dead = mcpworld_environment("http://127.0.0.1:1/mcp", tools=[])()
    dead.reset(task="cancel-within-24h")  # unreachable: not the model's doing, so no reward at all
    assert dead.get_reward() is None and "unavailable" in dead._call("x", {})


@pytest.fixture
def toy_url(tmp_path: Path) -> Iterator[str]:
    import mcpworld.trainer.toy_world as toy

    port = free_port()
    proc = subprocess.Popen(mcpworld_cmd("serve", "world", str(Path(toy.__file__).parent), "--port", str(port)),
                            env={**os.environ, "MCPWORLD_HOME": str(tmp_path / "home")},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc)
        yield f"http://127.0.0.1:{port}/worlds/buttons/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_trl_grpo_runs_on_mcpworld_episodes(toy_url: str, tmp_path: Path) -> None:
    """TRL's own GRPOTrainer, a tiny model built here, two GRPO steps on CPU: every rollout is reset onto its
    row's task and scored by the environment (a random model calls no tool, so the reward is 0)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from mcpworld.trainer.tiny import chat_tokenizer, tiny_model

    base = mcpworld_environment(toy_url)
    resets: list[str] = []

    class Buttons(base):  # type: ignore[misc,valid-type]
        def reset(self, **row):  # type: ignore[no-untyped-def]
            resets.append(row["task"])
            return super().reset(**row)

    tokenizer = chat_tokenizer("qwen2.5", ["press red green blue the button", "Press the button of that colour."] * 9)
    tokenizer.padding_side = "left"
    rows = [{"prompt": [{"role": "user", "content": "press green"}], "task": "press-green"}] * 4
    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=4, max_steps=2, logging_steps=1, report_to="none", use_cpu=True,
                      bf16=False, save_strategy="no")
    trainer = GRPOTrainer(model=tiny_model(len(tokenizer), hidden=32), processing_class=tokenizer, args=args,
                          train_dataset=Dataset.from_list(rows), environment_factory=Buttons)
    trainer.train()
    logged = [h for h in trainer.state.log_history if "rewards/Buttons/mean" in h]
    assert len(logged) == 2 and all(h["rewards/Buttons/mean"] == 0.0 for h in logged)
    assert len(resets) >= 4 and set(resets) == {"press-green"}
