"""`mcpworld synth ...`: synthesize worlds and tasks, import Agent-World environments, run the arena."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import click


def _client(model: str | None, base_url: str | None, required: bool = False) -> Any:
    from mcpworld.core.llm import ChatClient

    if not (model and base_url):
        if required:
            raise click.UsageError("this needs a model: pass --model and --base-url "
                                   "(or set MCPWORLD_MODEL and OPENAI_BASE_URL)")
        return None
    return ChatClient(base_url=base_url, model=model, timeout_s=300)


@click.group("synth")
def synth_group() -> None:
    """Synthesize worlds and tasks; import Agent-World environments; run the self-evolving arena."""


@synth_group.command("world")
@click.option("--scenario", default=None, help="What the world is about, in a sentence or two.")
@click.option("--scenarios", "scenarios_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Batch: one scenario per line, or JSONL {\"scenario\": ..., \"name\": ...}.")
@click.option("--name", default=None, help="World name (default: from the scenario's first words).")
@click.option("--model", envvar="MCPWORLD_MODEL", default=None, help="Model name.")
@click.option("--base-url", envvar="OPENAI_BASE_URL", default=None,
              help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1. Key: $OPENAI_API_KEY.")
@click.option("--max-retries", default=3, show_default=True, help="Regenerations per stage after an error.")
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also keep a copy of each package here (it is installed either way unless --no-install).")
@click.option("--no-install", is_flag=True, help="Do not install into $MCPWORLD_HOME/worlds (needs --out).")
@click.option("--registry", default=None, help="Registry base URL (default: $MCPWORLD_REGISTRY or :8765).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON result per scenario.")
def synth_world(scenario: str | None, scenarios_file: Path | None, name: str | None, model: str | None,
                base_url: str | None, max_retries: int, out: Path | None, no_install: bool, registry: str | None,
                as_json: bool) -> None:
    """Synthesize a world from a scenario (AWM pipeline), validate it in a sandbox, install and register it.

    \b
    Examples:
      mcpworld synth world --scenario "A dental clinic's appointment desk" --name dental \\
          --model Qwen/Qwen3-32B --base-url http://127.0.0.1:8000/v1
      mcpworld synth world --scenarios scenarios.txt --max-retries 2     # resumable batch
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from mcpworld.synth.pipeline import Pipeline, Synthesis, existing_world_ok, read_scenarios, slug

    if (scenario is None) == (scenarios_file is None):
        raise click.UsageError("give exactly one of --scenario or --scenarios")
    if no_install and out is None:
        raise click.UsageError("--no-install needs --out, or the world would be written nowhere")
    jobs = [(scenario, name)] if scenario else read_scenarios(scenarios_file)  # type: ignore[arg-type]
    pipeline = Pipeline(_client(model, base_url, required=True), max_retries=max_retries)
    console = Console(stderr=True)
    results: list[Synthesis] = []

    async def one(text: str, world: str) -> Synthesis:
        if not no_install and existing_world_ok(world):
            return Synthesis(scenario=text, name=world, ok=True, skipped=True)
        return await pipeline.synthesize(text, world, out, install=not no_install, registry=registry)

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=len(jobs) == 1) as progress:
        bar = progress.add_task("synthesizing", total=len(jobs))
        for text, given in jobs:
            world = given or slug(text)
            progress.update(bar, description=f"synthesizing {world}")
            result = anyio.run(one, text, world)
            results.append(result)
            progress.advance(bar)
            if as_json:
                click.echo(json.dumps(result.to_json()))
            else:
                _print_synthesis(console, result)
    if not all(r.ok for r in results):
        sys.exit(1)


def _print_synthesis(console: Any, r: Any) -> None:
    if r.skipped:
        console.print(f"[dim]skip[/dim] {r.name}: already installed and valid")
        return
    attempts = ", ".join(f"{s.stage} {s.attempts}" for s in r.stages)
    if r.ok:
        console.print(f"[green]ok[/green]   {r.name}: {r.tools} tools, {r.tasks} tasks -> {r.path}  "
                      f"(attempts: {attempts})")
        if r.dropped:
            console.print(f"     dropped {len(r.dropped)} task{'s' if len(r.dropped) != 1 else ''}: "
                          + "; ".join(f"{t} ({r.drop_reasons.get(t, 'failed validation')})" for t in r.dropped),
                          markup=False, highlight=False)
        console.print(f"     {r.registry}")
    else:
        console.print(f"[red]fail[/red] {r.name}: {'; '.join(r.problems)}  (attempts: {attempts})")


@synth_group.command("graph-tasks")
@click.argument("world")
@click.option("-n", "count", default=20, show_default=True, help="How many tool-graph tasks.")
@click.option("--programmatic", default=0, show_default=True,
              help="Also this many programmatic tasks (a condition and a loop over a list; a typed number).")
@click.option("--seed", default=0, show_default=True)
@click.option("--split", type=click.Choice(["train", "test"]), default="train", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the tasks here as JSON (default: print them).")
@click.option("--model", default=None, help="Write questions with this model (default: templated, offline).")
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint for --model.")
@click.option("--model-edges", is_flag=True, help="Let the model add tool dependencies the names miss.")
@click.option("--show-graph", is_flag=True, help="Print the tool graph's edges to stderr.")
def synth_graph_tasks(world: str, count: int, programmatic: int, seed: int, split: str, output: Path | None,
                      model: str | None, base_url: str | None, model_edges: bool, show_graph: bool) -> None:
    """Tool-graph tasks for a world: chains of connected tools, run for real, replayed, checked honest.

    Every task has a typed answer, and is kept only if it validates and no wrong policy of the reward-hacking
    audit (`mcpworld world audit`) passes it; the dropped ones are listed on stderr with the reason.

    \b
    Examples:
      mcpworld synth graph-tasks airline -n 20 --seed 1 -o airline-graph.json
      mcpworld synth graph-tasks shop -n 10 --programmatic 5 -o shop.json
    """
    import random

    from mcpworld.synth.graph import build_graph, graph_tasks
    from mcpworld.synth.programmatic import programmatic_tasks
    from mcpworld.synth.taskspec import save_tasks
    from mcpworld.worlds.host import load_runtime
    from mcpworld.worlds.loader import WorldLoadError

    try:
        runtime = load_runtime(world)
    except WorldLoadError as exc:
        raise click.ClickException(str(exc)) from None
    client = _client(model, base_url)
    if show_graph:
        click.echo(json.dumps(build_graph(runtime, random.Random(seed)).summary(), indent=1), err=True)

    dropped: list[Any] = []

    async def main() -> list[Any]:
        tasks = await graph_tasks(runtime, count, seed, client=client, split=split, model_edges=model_edges,
                                  dropped=dropped)
        if programmatic:
            tasks += await programmatic_tasks(runtime, programmatic, seed, client=client, split=split,
                                              dropped=dropped)
        return tasks

    tasks = anyio.run(main)
    _print_dropped(dropped)
    if output is None:
        click.echo(json.dumps([t.model_dump(mode="json") for t in tasks], indent=2, ensure_ascii=False))
    else:
        save_tasks(output, tasks)
        click.echo(f"{len(tasks)} task(s) for {runtime.world.name} -> {output}", err=True)


def _print_dropped(dropped: list[Any], prefix: str = "") -> None:
    """One line per dropped task (the audit's wrong policy that passed it, or the validation problem)."""
    if not dropped:
        return
    def short(d: Any) -> str:
        why = f"wrong policy {d.policy} passed" if d.policy else _clip(d.reason, 90)
        return f"{d.task} ({why})"

    click.echo(f"{prefix}dropped {len(dropped)} task{'s' if len(dropped) != 1 else ''}: "
               + "; ".join(short(d) for d in dropped), err=True)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


@synth_group.command("import-agent-world")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--install", is_flag=True, help="Install into $MCPWORLD_HOME/worlds and register each world.")
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("agent-world-worlds"),
              show_default=True, help="Where to write the packages (ignored with --install).")
@click.option("--tasks", "n_tasks", default=8, show_default=True, help="Graph tasks to generate per environment.")
@click.option("--seed", default=0, show_default=True)
@click.option("--only", multiple=True, help="Only these environment ids (repeatable).")
@click.option("--model", default=None, help="Write questions with this model (default: templated, offline).")
@click.option("--base-url", default=None)
@click.option("--registry", default=None, help="Registry base URL for --install.")
def synth_import(path: Path, install: bool, out: Path, n_tasks: int, seed: int, only: tuple[str, ...],
                 model: str | None, base_url: str | None, registry: str | None) -> None:
    """Serve Agent-World environments as worlds: JSON tables as state, their tools run in sandboxed workers.

    PATH is a checkpoint file, an `environment_mix` folder, or the folder above it. Each environment gets
    graph tasks with typed answers, kept only if no wrong policy of the reward-hacking audit passes them.

    \b
    Examples:
      mcpworld synth import-agent-world ../shared/thirdparty/agent-world --install
      mcpworld serve world aw-dice-roller --stdio
    """
    from mcpworld.synth.agent_world import find_environments, import_environment
    from mcpworld.synth.install import move_into_place, register, staging
    from mcpworld.worlds.loader import load_world

    checkpoints = [c for c in find_environments(path) if not only or c.name.split("_")[0] in only]
    if not checkpoints:
        raise click.ClickException(f"no Agent-World checkpoints (*_step4_checkpoint.json) under {path}")
    client = _client(model, base_url)
    bad = 0
    for checkpoint in checkpoints:
        with contextlib.ExitStack() as stack:
            # --install builds each package in a private folder and moves it into place only once it validates;
            # a failed one is removed with that folder, and an older installed copy is left as it was
            target = stack.enter_context(staging(checkpoint.name.split("_")[0])) if install else out
            result = anyio.run(lambda c=checkpoint: import_environment(c, target, n_tasks=n_tasks, seed=seed,
                                                                       client=client))
            if result.problems:
                _print_dropped(result.dropped, f"{result.name}: ")
                bad += 1
                click.echo(f"fail {result.name}: " + "; ".join(result.problems)
                           + ("  (not installed)" if install else ""), err=True)
                continue
            if install:
                result.path = move_into_place(result.path, result.name)
        _print_dropped(result.dropped, f"{result.name}: ")
        note = ""
        if install:
            note = "  " + register(load_world(result.path), "agent-world", registry).message
        click.echo(f"ok   {result.name}: {result.tools} tools, {result.tasks} tasks -> {result.path}{note}")
    if bad:
        sys.exit(1)


@synth_group.command("arena")
@click.option("--worlds", required=True, help="Comma-separated world names, e.g. airline,shop.")
@click.option("--policy", type=click.Choice(["random", "oracle", "openai"]), default="random", show_default=True)
@click.option("--model", default=None, envvar="MCPWORLD_MODEL", help="Policy model for --policy openai.")
@click.option("--base-url", default=None, envvar="OPENAI_BASE_URL", help="Endpoint for --policy openai.")
@click.option("--synth-model", default=None, help="Model that writes targeted questions (default: offline).")
@click.option("--synth-base-url", default=None)
@click.option("--rounds", default=1, show_default=True)
@click.option("--tasks-per-world", default=6, show_default=True, help="Held-out tasks per world per round.")
@click.option("--targeted", default=6, show_default=True, help="New tasks for each weak world per round.")
@click.option("--weakest", default=1, show_default=True, help="How many weak worlds get targeted tasks.")
@click.option("--max-turns", default=8, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("arena"),
              show_default=True)
def synth_arena(worlds: str, policy: str, model: str | None, base_url: str | None, synth_model: str | None,
                synth_base_url: str | None, rounds: int, tasks_per_world: int, targeted: int, weakest: int,
                max_turns: int, seed: int, out: Path) -> None:
    """Evaluate a policy on fresh tasks, diagnose failures per world, and synthesize targeted tasks.

    Writes OUT/round-N/{report.json,report.md,trajectories-WORLD.jsonl,tasks/,targeted/} and OUT/report.md.

    \b
    Example:
      mcpworld synth arena --worlds airline,shop --policy random --rounds 1 -o arena/
    """
    from mcpworld.agent.loop import EpisodeConfig
    from mcpworld.synth.arena import Arena, policy_factory, run_arena

    if policy == "openai" and not (model and base_url):
        raise click.UsageError("--policy openai needs --model and --base-url")
    arena = Arena(worlds=[w.strip() for w in worlds.split(",") if w.strip()],
                  make_policy=policy_factory(policy, seed, model, base_url), out=out, rounds=rounds,
                  tasks_per_world=tasks_per_world, targeted=targeted, weakest=weakest, seed=seed,
                  client=_client(synth_model, synth_base_url),
                  episode=EpisodeConfig(max_turns=max_turns, turn_timeout_s=120),
                  log=lambda line: click.echo(line, err=True))
    result = run_arena(arena)
    last = result["rounds"][-1]
    for name, r in last["worlds"].items():
        click.echo(f"{name:14} success {r['success_rate']:.0%}  failures {r['failures']}  new tasks {r['new_tasks']}")
    click.echo(f"report: {out / 'report.md'}")
