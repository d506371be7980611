"""The OpenRLHF side: the prompt/label dataset, and the `train_ppo_ray` command line that uses our bridge."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import mcp_types as types

from mcpworld.agent.formats import TextFormat
from mcpworld.agent.loop import system_prompt
from mcpworld.core.models import TaskInfo

BRIDGE = Path(__file__).with_name("openrlhf_agent.py")


def prompt_record(server: str, task: TaskInfo, tools: list[types.Tool], seed: int = 0,
                  registry: str | None = None, policy: str = "") -> dict[str, Any]:
    """One dataset line: chat messages (rendered by OpenRLHF's chat template) and the JSON label."""
    system = system_prompt(TextFormat(), tools, policy)
    label: dict[str, Any] = {"server": server, "task": task.id, "seed": seed}
    if registry:
        label["registry"] = registry
    return {"prompt": [{"role": "system", "content": system}, {"role": "user", "content": task.instruction}],
            "label": json.dumps(label)}


def openrlhf_command(data: Path, pretrain: str, output: Path, *, samples: int = 8, estimator: str = "group_norm",
                     eps_low: float = 0.2, eps_high: float = 0.28, max_len: int = 8192, max_new_tokens: int = 1024,
                     gpus: int = 8, vllm_engines: int = 4, extra: tuple[str, ...] = ()) -> list[str]:
    """argv for OpenRLHF 0.11's PPO/GRPO trainer on Ray with vLLM, wired to the mcpworld agent bridge."""
    return [
        sys.executable, "-m", "openrlhf.cli.train_ppo_ray",
        "--actor.model_name_or_path", pretrain,
        "--actor.num_gpus_per_node", str(gpus),
        "--ref.num_gpus_per_node", str(gpus),
        "--vllm.num_engines", str(vllm_engines),
        "--train.colocate_all",
        "--vllm.enable_sleep", "--ds.enable_sleep",
        "--train.agent_func_path", str(BRIDGE),
        "--data.prompt_dataset", str(data),
        "--data.input_key", "prompt",
        "--data.label_key", "label",
        "--data.apply_chat_template",
        "--data.max_len", str(max_len),
        "--rollout.max_new_tokens", str(max_new_tokens),
        "--rollout.n_samples_per_prompt", str(samples),
        "--algo.advantage.estimator", estimator,
        "--actor.eps_clip_low_high", str(eps_low), str(eps_high),
        "--algo.dynamic_filtering_enable",
        "--ckpt.output_dir", str(output),
        "--ckpt.save_hf",
        *extra,
    ]


def shell_line(argv: list[str], env: dict[str, str]) -> str:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (prefix + " " if prefix else "") + " ".join(shlex.quote(a) for a in argv)
