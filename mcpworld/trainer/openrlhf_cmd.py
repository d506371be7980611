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


def prompt_record(server: str, task: TaskInfo, tools: list[types.Tool],
                  registry: str | None = None, policy: str = "") -> dict[str, Any]:
    """One dataset line: chat messages (rendered by OpenRLHF's chat template) and the JSON label. The label's
    seed is the one `task` was listed for, so the prompt's ids and names are those of the episode it starts."""
    system = system_prompt(TextFormat(), tools, policy)
    label: dict[str, Any] = {"server": server, "task": task.id, "seed": task.seed}
    if registry:
        label["registry"] = registry
    return {"prompt": [{"role": "system", "content": system}, {"role": "user", "content": task.instruction}],
            "label": json.dumps(label)}


SCORE_RANGE = (-1.0, 1.0)  # every score the bridge gives: -1 format error .. 1 passed (Termination.reward)


def check_gpus(gpus: int, vllm_engines: int, vllm_tp: int) -> None:
    """OpenRLHF's own start-up check for colocated training, said before the job starts: every actor GPU
    hosts one vLLM shard, so engines x tensor-parallel size must equal the GPUs."""
    if gpus < 1 or vllm_engines < 1 or vllm_tp < 1:
        raise ValueError("--gpus, --vllm-engines and --vllm-tp must be at least 1")
    if vllm_engines * vllm_tp != gpus:
        raise ValueError(f"{gpus} GPUs colocated (actor, reference and vLLM share them) need --vllm-engines x "
                         f"--vllm-tp = {gpus}; got {vllm_engines} x {vllm_tp} = {vllm_engines * vllm_tp}. "
                         f"Use --vllm-engines {gpus // vllm_tp} or change --gpus.")


def openrlhf_command(data: Path, pretrain: str, output: Path, *, samples: int = 8, estimator: str = "group_norm",
                     eps_low: float = 0.2, eps_high: float = 0.28, max_len: int = 8192, max_new_tokens: int = 1024,
                     gpus: int = 8, vllm_engines: int | None = None, vllm_tp: int = 1,
                     extra: tuple[str, ...] = ()) -> list[str]:
    """argv for OpenRLHF 0.11's PPO/GRPO trainer on Ray with vLLM, wired to the mcpworld agent bridge.

    Colocated (actor, reference and vLLM engines share the GPUs), so `vllm_engines` defaults to gpus / tp.
    Dynamic filtering keeps groups whose mean score lies strictly inside the real score range (-1, 1): only
    groups that all failed the format or all passed are dropped, and infra-lost rollouts (NaN) drop theirs.
    """
    engines = vllm_engines if vllm_engines is not None else max(gpus // vllm_tp, 1)
    check_gpus(gpus, engines, vllm_tp)
    return [
        sys.executable, "-m", "openrlhf.cli.train_ppo_ray",
        "--actor.model_name_or_path", pretrain,
        "--actor.num_gpus_per_node", str(gpus),
        "--ref.num_gpus_per_node", str(gpus),
        "--vllm.num_engines", str(engines),
        "--vllm.tensor_parallel_size", str(vllm_tp),
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
        "--algo.dynamic_filtering_range", str(SCORE_RANGE[0]), str(SCORE_RANGE[1]),
        "--ckpt.output_dir", str(output),
        "--ckpt.save_hf",
        *extra,
    ]


def openrlhf_startup_check(argv: list[str]) -> Any:
    """Run OpenRLHF's own `train_ppo_ray` argument parsing and start-up assertions on `argv` (without the
    interpreter and module), stopping where it would start Ray: the checks that would otherwise reject the
    command only after Ray is up. Returns OpenRLHF's parsed args; raises AssertionError/SystemExit as it does."""
    import argparse
    import ast
    import datetime
    import importlib.util
    import os

    spec = importlib.util.find_spec("openrlhf.cli.train_ppo_ray")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("OpenRLHF is not installed (pip install --no-deps openrlhf==0.11.2)")
    source = Path(spec.origin).read_text()
    main = next((node for node in ast.parse(source).body if isinstance(node, ast.If)
                 and "__main__" in ast.unparse(node.test)), None)
    if main is None:
        raise RuntimeError(f"{spec.origin} has no `if __name__ == '__main__'` block to check with")
    captured: dict[str, Any] = {}
    old = sys.argv
    sys.argv = ["train_ppo_ray", *argv]
    try:
        exec(compile(ast.Module(body=main.body, type_ignores=[]), spec.origin, "exec"),  # noqa: S102 - OpenRLHF's code
             {"argparse": argparse, "os": os, "datetime": datetime.datetime,
              "train": lambda args: captured.setdefault("args", args)})
    finally:
        sys.argv = old
    return captured["args"]


def shell_line(argv: list[str], env: dict[str, str]) -> str:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (prefix + " " if prefix else "") + " ".join(shlex.quote(a) for a in argv)
