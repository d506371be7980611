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
@click.option("--registry", default=None,
              help="Registry base URL (default: $MCPWORLD_REGISTRY, else the running `mcpworld up`, else :8765).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON result per scenario.")
@click.option("--parallel", default=1, show_default=True, help="Scenarios synthesized at once (model calls overlap).")
def synth_world(scenario: str | None, scenarios_file: Path | None, name: str | None, model: str | None,
                base_url: str | None, max_retries: int, out: Path | None, no_install: bool, registry: str | None,
                as_json: bool, parallel: int) -> None:
    """Synthesize a world from a scenario (AWM pipeline), validate it in a sandbox, install and register it.

    \b
    Examples:
      mcpworld synth world --scenario "A dental clinic's appointment desk" --name dental \\
          --model Qwen/Qwen3-32B --base-url http://127.0.0.1:8000/v1
      mcpworld synth world --scenarios scenarios.txt --max-retries 2     # resumable batch
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from mcpworld.synth.synthesis.pipeline import Pipeline, Synthesis, existing_world_ok, read_scenarios, slug

    if (scenario is None) == (scenarios_file is None):
        raise click.UsageError("give exactly one of --scenario or --scenarios")
    if no_install and out is None:
        raise click.UsageError("--no-install needs --out, or the world would be written nowhere")
    jobs = [(scenario, name)] if scenario else read_scenarios(scenarios_file)  # type: ignore[arg-type]
    _client(model, base_url, required=True)
    console = Console(stderr=True)

    async def one(text: str, world: str) -> Synthesis:
        if not no_install and existing_world_ok(world):
            return Synthesis(scenario=text, name=world, ok=True, skipped=True)
        pipeline = Pipeline(_client(model, base_url, required=True), max_retries=max_retries)  # one per event loop
        return await pipeline.synthesize(text, world, out, install=not no_install, registry=registry)

    from concurrent.futures import ThreadPoolExecutor

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=len(jobs) == 1) as progress:
        bar = progress.add_task("synthesizing", total=len(jobs))

        def run_one(job: tuple[str, str | None]) -> Synthesis:
            text, given = job
            result = anyio.run(one, text, given or slug(text))
            progress.advance(bar)
            if as_json:
                click.echo(json.dumps(result.to_json()))
            else:
                _print_synthesis(console, result)
            return result

        # each scenario in its own thread and event loop: model calls overlap; sandboxed checks share the worker
        with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            results = list(pool.map(run_one, jobs))
    if len(jobs) > 1 and not as_json:
        _print_batch_summary(console, results)
    if not all(r.ok for r in results):
        sys.exit(1)


def _print_batch_summary(console: Any, results: list[Any]) -> None:
    """Worlds made, mean tries per stage (AWM reports 1.13 on average), tasks dropped and why."""
    made = [r for r in results if r.ok and not r.skipped]
    tries: dict[str, list[int]] = {}
    for r in results:
        for stage in r.stages:
            tries.setdefault(stage.stage, []).append(stage.attempts)
    every = [n for ns in tries.values() for n in ns]
    per_stage = ", ".join(f"{k} {sum(v) / len(v):.2f}" for k, v in tries.items())
    console.print(f"{len(made)} synthesized, {sum(r.skipped for r in results)} already installed, "
                  f"{sum(not r.ok for r in results)} failed of {len(results)}; tries per stage: {per_stage or '-'}"
                  + (f" (mean {sum(every) / len(every):.2f})" if every else ""), markup=False, highlight=False)
    dropped = sum(len(r.dropped) for r in results)
    if dropped:
        console.print(f"  {dropped} task(s) dropped by validation or the audit (listed above)", markup=False,
                      highlight=False)


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

    from mcpworld.synth.tasks.graph import build_graph, graph_tasks
    from mcpworld.synth.tasks.programmatic import programmatic_tasks
    from mcpworld.synth.tasks.taskspec import save_tasks
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
    from mcpworld.synth.importers.agent_world import find_environments, import_environment
    from mcpworld.synth.importers.install import move_into_place, register, staging
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


# τ²-bench's domains as worlds (issue 32; mcpworld/synth/importers/tau2/, docs/tau2.md)
@synth_group.command("import-tau2")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--domain", "domains", multiple=True, help="Only this domain (repeatable; default: every served one).")
@click.option("--no-install", is_flag=True, help="Only write the packages (into --out), do not install them.")
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="Where --no-install writes the packages.")
@click.option("--registry", default=None, help="Registry base URL to register the installed worlds with.")
def synth_import_tau2(path: Path, domains: tuple[str, ...], no_install: bool, out: Path, registry: str | None) -> None:
    """Serve τ²-bench domains as worlds `tau2-<domain>`: τ²'s data, task ids, tool names, arguments and result texts.

    PATH is a τ² data folder (the one holding domains/, e.g. tau2-bench/data/tau2). Every verdict carries τ²'s own
    reward and breakdown as evidence (`tau2`) beside the project's.

    \b
    Example:
      mcpworld synth import-tau2 tau2-bench/data/tau2
    """
    from mcpworld.synth.importers.install import register
    from mcpworld.synth.importers.tau2.install import import_domains
    from mcpworld.worlds.loader import load_world

    try:
        done = import_domains(path, list(domains) or None, install=not no_install, out=out,
                              say=lambda line: click.echo(line, err=True))
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    for item in done:
        note = "" if no_install else "  " + register(load_world(item.path), "tau2-bench", registry).message
        user = f" (+{item.user_tools} the user's own)" if item.user_tools else ""
        click.echo(f"ok   {item.name}: {item.tools} tools{user}, {item.tasks} tasks -> {item.path}{note}")


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
    from mcpworld.synth.arena.rounds import Arena, policy_factory, run_arena

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


@synth_group.command("import-awm")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--install", is_flag=True, help="Install into $MCPWORLD_HOME/worlds and register each world.")
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("awm-worlds"),
              show_default=True, help="Where to write the packages (ignored with --install).")
@click.option("--only", multiple=True, help="Only these scenarios (as named in gen_scenario.jsonl; repeatable).")
@click.option("--limit", type=int, default=None, help="At most this many scenarios (after --only).")
@click.option("--references", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="JSONL of reference solutions: {scenario, task_idx, calls: [{name, arguments}], answer?}.")
@click.option("--model", default=None, help="Propose missing reference solutions with this model (each is checked).")
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint for --model.")
@click.option("--no-audit", is_flag=True, help="Skip the reward-hacking audit (validation still runs).")
@click.option("--redo", is_flag=True, help="Import again the scenarios a previous run already finished.")
@click.option("--registry", default=None, help="Registry base URL for --install.")
@click.option("--parallel", default=1, show_default=True, help="Scenarios imported at once (one worker each).")
@click.option("--json", "as_json", is_flag=True, help="Print the import report as JSON.")
def synth_import_awm(path: Path, install: bool, out: Path, only: tuple[str, ...], limit: int | None,
                     references: Path | None, model: str | None, base_url: str | None, no_audit: bool, redo: bool,
                     registry: str | None, parallel: int, as_json: bool) -> None:
    """Serve AWM (AgentWorldModel-1K) scenarios as worlds: SQLite template, generated server run contained.

    PATH is a folder with AWM's files (gen_scenario.jsonl, gen_tasks.jsonl, gen_db.jsonl, gen_sample.jsonl,
    gen_envs.jsonl, gen_verifier.jsonl, gen_verifier.pure_code.jsonl). A task is kept only with a reference
    solution (from --references, or proposed by --model) that AWM's own verifier accepts, and only if it
    validates and no wrong policy of the reward-hacking audit passes it. A bad scenario is reported and
    skipped; a second run resumes (scenarios already done, with unchanged records, are not redone).

    \b
    Examples:
      mcpworld synth import-awm AgentWorldModel-1K --references refs.jsonl --limit 10 -o awm-worlds
      mcpworld synth import-awm AgentWorldModel-1K --only e_commerce_33 --model Qwen/Qwen3-32B \\
          --base-url http://127.0.0.1:8000/v1 --install
    """
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from mcpworld.core.contain import ContainmentUnavailable
    from mcpworld.core.paths import home, user_worlds_dir
    from mcpworld.synth.importers.awm import ScenarioReport, import_scenario, read_references, summarize
    from mcpworld.synth.importers.awm_format import AwmFormatError, normalize_scenario_name, read_dataset
    from mcpworld.synth.importers.awm_runtime import AwmRuntimeUnavailable
    from mcpworld.synth.importers.install import move_into_place, register, staging
    from mcpworld.worlds.loader import load_world

    if bool(model) != bool(base_url):
        raise click.UsageError("--model and --base-url go together (the model proposes reference solutions)")
    problems: list[str] = []  # lines that are no scenario's: said, skipped; a scenario's own bad record fails it alone
    try:
        scenarios = read_dataset(path, problems)
        refs = read_references(references) if references else {}
    except AwmFormatError as exc:
        raise click.ClickException(str(exc)) from None
    for problem in problems[:20]:
        click.echo(f"warning: skipped {problem}", err=True)
    if len(problems) > 20:
        click.echo(f"warning: and {len(problems) - 20} more bad lines skipped", err=True)
    if only:
        wanted = {normalize_scenario_name(o) for o in only}
        unknown = wanted - {s.key for s in scenarios}
        if unknown:
            known = ", ".join(s.key for s in scenarios[:12]) + (" ..." if len(scenarios) > 12 else "")
            raise click.ClickException(f"no scenario named {', '.join(sorted(unknown))} in {path}; it has: {known}")
        scenarios = [s for s in scenarios if s.key in wanted]
    scenarios = scenarios[:limit] if limit is not None else scenarios
    report_file = (home() if install else out) / "awm-import.json"
    report_file.parent.mkdir(parents=True, exist_ok=True)
    try:
        previous = {r["scenario"]: r for r in json.loads(report_file.read_text(encoding="utf-8"))["scenarios"]}
    except (OSError, ValueError, KeyError, TypeError):
        previous = {}
    console = Console(stderr=True)
    done: dict[str, ScenarioReport] = {}

    def save() -> None:
        reports = list(done.values())
        data = {"source": str(path), "summary": summarize(reports), "scenarios": [r.to_json() for r in reports]}
        report_file.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")

    for key, raw in previous.items():  # keep what earlier runs did for scenarios not in this run
        done[key] = ScenarioReport.from_json(raw)
    lock = threading.Lock()

    def run_one(scenario: Any) -> None:
        old = previous.get(scenario.key)
        where = (user_worlds_dir() if install else out) / str((old or {}).get("name"))
        if not redo and old and old.get("input_hash") == scenario.input_hash() and (
                not old.get("ok") or (where / "report.json").is_file()):
            result = ScenarioReport.from_json({**old, "resumed": True, "path": str(where) if old.get("ok") else None})
        else:
            own = _client(model, base_url)  # one per thread: a client belongs to the event loop that opened it
            with contextlib.ExitStack() as stack:
                target = stack.enter_context(staging(scenario.key)) if install else out
                result = anyio.run(lambda: import_scenario(scenario, target, references=refs, client=own,
                                                           audit=not no_audit))
                if install and result.ok and result.path:
                    result.path = str(move_into_place(Path(result.path), result.name))
            if install and result.ok and result.path:
                console.print("     " + register(load_world(Path(result.path)), "awm", registry).message,
                              markup=False, highlight=False)
        with lock:
            done[scenario.key] = result
            save()
            progress.advance(bar)
            if not as_json:
                _print_awm(console, result)

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=as_json or len(scenarios) < 2) as progress:
        bar = progress.add_task("importing", total=len(scenarios))
        # each scenario has its own worker, so N at once use N cores for their tool calls and verifiers
        with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            try:
                list(pool.map(run_one, scenarios))
            except (ContainmentUnavailable, AwmRuntimeUnavailable) as exc:
                raise click.ClickException(str(exc)) from None
    reports = [done[s.key] for s in scenarios]
    summary = summarize(reports)
    if as_json:
        click.echo(json.dumps({"summary": summary, "scenarios": [r.to_json() for r in reports]}, indent=1,
                              default=str))
    else:
        _print_awm_summary(console, summary, report_file)
    if scenarios and not summary["imported"]:
        sys.exit(1)


def _print_awm(console: Any, r: Any) -> None:
    note = " (resumed: done by an earlier run)" if r.resumed else ""
    if r.ok:
        console.print(f"[green]ok[/green]   {r.name}: {r.tools} tools, {len(r.kept)}/{r.tasks_total} tasks kept, "
                      f"{len(r.provisional)} provisional -> {r.path}{note}")
    else:
        console.print(f"fail {r.scenario}: {'; '.join(r.problems)}{note}", markup=False, highlight=False)
    for d in r.dropped:
        why = f"wrong policy {d['policy']} passed" if d.get("policy") else d["reason"]
        console.print(f"     dropped {d['task']}: {_clip(why, 160)}", markup=False, highlight=False)
    if r.provisional:
        console.print(f"     provisional (no reference; played with --include-provisional): "
                      f"{', '.join(r.provisional)}", markup=False, highlight=False)


def _print_awm_summary(console: Any, s: dict[str, Any], report_file: Path) -> None:
    console.print(f"{s['imported']}/{s['scenarios']} scenarios imported ({s['resumed']} resumed); "
                  f"tasks: {s['kept']} kept, {s['provisional']} provisional, {s['dropped']} dropped of {s['tasks']}")
    for label, key in (("kept", "kept_by_reason"), ("provisional", "provisional_by_reason"),
                       ("dropped", "dropped_by_reason")):
        for reason, n in s[key].items():
            console.print(f"  {label} {n}: {reason}", markup=False, highlight=False)
    for line in s["failed"]:
        console.print(f"  failed {_clip(line, 200)}", markup=False, highlight=False)
    console.print(f"report: {report_file}", markup=False, highlight=False)


@synth_group.command("promote")
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--worlds", "worlds_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the imported packages are (default: the installed worlds, $MCPWORLD_HOME/worlds).")
@click.option("--no-audit", is_flag=True, help="Skip the reward-hacking audit of promoted tasks (validation runs).")
@click.option("--json", "as_json", is_flag=True, help="Print what was promoted as JSON.")
def synth_promote(runs: tuple[Path, ...], worlds_dir: Path | None, no_audit: bool, as_json: bool) -> None:
    """Promote provisional AWM tasks whose passing trajectories agree: their end state becomes the reference.

    RUNS are trajectory files (`mcpworld run --include-provisional -o FILE`) or folders of them. A provisional
    task is promoted when two or more passing trajectories of distinct episodes leave the same end state (replayed
    here); the calls of one of them become its reference, and the task is validated and audited again like every
    referenced task. The others stay provisional, and the command says why.

    \b
    Example:
      mcpworld run --server awm-pet-clinic-1 --policy openai --model M --base-url URL -n 4 \\
          --include-provisional -o runs/pet.jsonl
      mcpworld synth promote runs/pet.jsonl
    """
    from mcpworld.core.paths import user_worlds_dir
    from mcpworld.synth.importers.awm import MANIFEST
    from mcpworld.synth.importers.awm_promote import passing_trajectories, promote

    root = worlds_dir or user_worlds_dir()
    passing = passing_trajectories(list(runs))
    by_world: dict[str, dict[str, list[Any]]] = {}
    for (world, task), found in passing.items():
        by_world.setdefault(world, {})[task] = found
    results = []
    for world, tasks in sorted(by_world.items()):
        path = root / world
        if not (path / MANIFEST).is_file():
            click.echo(f"skip {world}: no imported AWM package at {path}", err=True)
            continue
        results.append(promote(path, tasks, audit_tasks=not no_audit))
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in results], indent=1))
    else:
        for r in results:
            click.echo(f"{r.world}: promoted {len(r.promoted)} ({', '.join(r.promoted) or '-'})")
            for tid, why in r.kept_provisional.items():
                click.echo(f"  still provisional {tid}: {_clip(why, 200)}")
    if not results:
        raise click.ClickException("no trajectory names an imported AWM world" + (f" under {root}" if root else ""))


@synth_group.command("scenarios")
@click.option("--seeds", "seeds_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="Seed domains: one per line, or JSONL with \"domain\" (and \"description\").")
@click.option("-n", "count", default=1000, show_default=True, help="How many scenarios to keep.")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("scenarios.jsonl"),
              show_default=True, help="JSONL output (AWM's gen_scenario.jsonl layout); resumed when it exists.")
@click.option("--model", envvar="MCPWORLD_MODEL", default=None, help="Model name.")
@click.option("--base-url", envvar="OPENAI_BASE_URL", default=None, help="OpenAI-compatible endpoint.")
@click.option("--per-request", default=10, show_default=True, help="Scenarios asked for in one request.")
@click.option("--min-suitability", default=7, show_default=True, help="Keep scenarios the model scores at least this "
              "(1-10) for CRUD simulation.")
@click.option("--similarity", default=0.5, show_default=True, help="Word-shingle Jaccard at or above which a "
              "scenario is a near-duplicate of a kept one.")
@click.option("--max-rounds", type=int, default=None, help="Requests per seed at most (default: enough for -n).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def synth_scenarios(seeds_file: Path, count: int, out: Path, model: str | None, base_url: str | None,
                    per_request: int, min_suitability: int, similarity: float, max_rounds: int | None,
                    as_json: bool) -> None:
    """Grow seed domains into distinct CRUD-heavy scenarios with a model (AWM's scenario expansion).

    Near-duplicates (same name, or similar wording) and scenarios the model scores as hard to simulate are
    dropped; the summary counts requests and retries per stage and what was dropped, and why. Feed the output
    to `mcpworld synth world --scenarios OUT --parallel 4`.

    \b
    Example:
      mcpworld synth scenarios --seeds seeds.txt -n 1000 -o scenarios.jsonl \\
          --model Qwen/Qwen3-32B --base-url http://127.0.0.1:8000/v1
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from mcpworld.synth.synthesis.scenarios import expand, load_state, read_seeds

    try:
        seeds = read_seeds(seeds_file)
        already = len(load_state(out).kept)
    except (ValueError, KeyError) as exc:
        raise click.ClickException(str(exc)) from None
    client = _client(model, base_url, required=True)
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, disable=as_json) as progress:
        bar = progress.add_task("scenarios", total=count, completed=min(already, count))
        state = anyio.run(lambda: expand(client, seeds, count, out, per_request=per_request,
                                         min_suitability=min_suitability, threshold=similarity,
                                         max_rounds=max_rounds,
                                         progress=lambda k: progress.update(bar, completed=k)))
    summary = state.summary(count)
    summary["resumed_from"] = already
    if as_json:
        click.echo(json.dumps(summary, indent=1))
    else:
        stages = ", ".join(f"{k}: {v['requests']} requests, {v['retries']} retried, {v['failures']} failed "
                           f"({v['tries_per_success']} tries per success)" for k, v in summary["stages"].items())
        console.print(f"{summary['kept']}/{count} scenarios -> {out} ({already} from an earlier run; {len(seeds)} "
                      f"seeds, {summary['rounds']} rounds)", markup=False, highlight=False)
        console.print(f"  {stages}", markup=False, highlight=False)
        for reason, n in sorted(summary["dropped"].items(), key=lambda kv: -kv[1]):
            console.print(f"  dropped {n}: {reason} (e.g. {', '.join(summary['examples'][reason][:3])})",
                          markup=False, highlight=False)
    if summary["kept"] < count:
        console.print(f"only {summary['kept']} of {count}: the seeds ran out of rounds; add seeds or --max-rounds",
                      markup=False, highlight=False)
        sys.exit(1)


@synth_group.command("twin")
@click.argument("server")
@click.option("--name", default=None, help="World name (default: twin-<server name>).")
@click.option("--model", envvar="MCPWORLD_MODEL", default=None, help="Model name.")
@click.option("--base-url", envvar="OPENAI_BASE_URL", default=None, help="OpenAI-compatible endpoint.")
@click.option("--max-retries", default=2, show_default=True, help="Regenerations per stage after an error.")
@click.option("--install", is_flag=True, help="Install into $MCPWORLD_HOME/worlds and register it.")
@click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("twins"),
              show_default=True, help="Where to write the package (ignored with --install).")
@click.option("--registry", default=None, help="Registry base URL for --install.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def synth_twin(server: str, name: str | None, model: str | None, base_url: str | None, max_retries: int,
               install: bool, out: Path, registry: str | None, as_json: bool) -> None:
    """Twin a real MCP server: a stateful world with its tools' names and schemas, a database, and tasks.

    SERVER is a command that starts a stdio server (quoted, with its arguments), a Streamable HTTP URL, or a
    registry server.json. Its tools are listed, then a model writes the database, a server implementing each
    tool over it (run only in contained workers), and tasks with reference solutions and verifiers; every
    task is validated and played against the reward-hacking audit before it is kept.

    \b
    Examples:
      mcpworld synth twin "mcp-server-time --local-timezone UTC" --model Qwen/Qwen3-32B \\
          --base-url http://127.0.0.1:8000/v1 --install
      mcpworld synth twin http://127.0.0.1:9000/mcp --name twin-notes -o twins/
    """
    from mcpworld.core.contain import ContainmentUnavailable
    from mcpworld.synth.importers.install import move_into_place, register, staging
    from mcpworld.synth.synthesis.twin import TwinError, synthesize_twin
    from mcpworld.worlds.loader import load_world

    client = _client(model, base_url, required=True)
    with contextlib.ExitStack() as stack:
        target = stack.enter_context(staging("twin")) if install else out
        try:
            result = anyio.run(lambda: synthesize_twin(server, client, target, name=name, retries=max_retries))
        except (TwinError, ContainmentUnavailable) as exc:
            raise click.ClickException(str(exc)) from None
        if install and result.ok and result.report and result.report.path:
            result.report.path = str(move_into_place(Path(result.report.path), result.report.name))
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=1, default=str))
    attempts = ", ".join(f"{s.stage} {s.attempts}" for s in result.stages)
    if not result.ok:
        problems = result.problems or (result.report.problems if result.report else [])
        click.echo(f"fail twin of {result.server.name}: {'; '.join(problems)} (attempts: {attempts})", err=True)
        if result.report:
            _print_dropped_awm(result.report)
        sys.exit(1)
    report = result.report
    assert report is not None
    click.echo(f"ok   {report.name}: twin of {result.server.name}, {report.tools} tools, {len(report.kept)}/"
               f"{report.tasks_total} tasks kept -> {report.path} (attempts: {attempts})", err=True)
    _print_dropped_awm(report)
    if install:
        click.echo("     " + register(load_world(Path(report.path or "")), "twin", registry).message, err=True)


def _print_dropped_awm(report: Any) -> None:
    for d in report.dropped:
        why = f"wrong policy {d['policy']} passed" if d.get("policy") else d["reason"]
        click.echo(f"     dropped {d['task']}: {_clip(why, 160)}", err=True)


@synth_group.command("install-tasks")
@click.argument("world")
@click.argument("tasks_file", metavar="TASKS_FILE", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", default=None, help="The new world's name (default: WORLD-tasks).")
@click.option("--only", is_flag=True, help="Only the file's tasks (default: the world's own tasks too).")
def synth_install_tasks(world: str, tasks_file: Path, name: str | None, only: bool) -> None:
    """Install a tasks file (from `synth graph-tasks`) as a world every command can use.

    The new world has WORLD's tools and data and the file's tasks; it is checked by `world validate` first,
    and a running `mcpworld up` serves it within seconds.

    \b
    Example:
      mcpworld synth graph-tasks airline -n 20 -o airline-graph.json
      mcpworld synth install-tasks airline airline-graph.json --name airline-graph
      mcpworld run --server airline-graph --policy oracle
    """
    from mcpworld.synth.importers.install import InstallError
    from mcpworld.synth.tasks.installed import install_tasks
    from mcpworld.worlds.loader import WorldLoadError

    name = name or f"{world}-tasks"
    try:
        path, count = install_tasks(world, tasks_file, name, only=only)
    except (ValueError, InstallError, WorldLoadError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"installed {name} ({count} tasks on {world}'s tools) at {path}")
    click.echo(f"next: mcpworld run --server {name} --policy oracle   (a running `mcpworld up` serves it)")

