"""`mcpworld world ...` and `mcpworld serve ...`: inspect, validate and serve worlds."""

from __future__ import annotations

import json
import sys

import click

# Nothing of the worlds is imported here: `mcpworld world --help` answers without the SDK or SQLModel (issue 35).

episode_options = [
    click.option("--ttl", default=1800.0, show_default=True, help="Seconds an idle episode lives before eviction."),
    click.option("--max-episodes", default=4096, show_default=True, help="Cap on live episodes per world."),
    click.option("--interactive", is_flag=True,
                 help="Add start_task/check_task tools so a person in an MCP client can play tasks."),
]


def with_episode_options(fn):  # type: ignore[no-untyped-def]
    for option in reversed(episode_options):
        fn = option(fn)
    return fn


@click.group("world")
def world_group() -> None:
    """Inspect and validate world packages."""


@world_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def world_list(as_json: bool) -> None:
    """List installed worlds with their tool and task counts.

    \b
    Example:
      mcpworld world list
      mcpworld world list --json | jq '.[].name'
    """
    from mcpworld.worlds.loader import WorldLoadError, discover, load_world

    rows = []
    for ref in discover():
        try:
            w = load_world(ref.path)
        except WorldLoadError as exc:
            rows.append({"name": ref.name, "path": str(ref.path), "error": str(exc)})
            continue
        rows.append({"name": w.name, "title": w.title, "version": w.version, "tools": len(w.tools),
                     "tasks": len(w.tasks), "tags": w.tags, "path": str(ref.path)})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("name", "title", "tools", "tasks", "tags")
    for r in rows:
        if "error" in r:
            table.add_row(r["name"], f"[red]load error: {r['error']}[/red]", "-", "-", "")
        else:
            table.add_row(r["name"], r["title"], str(r["tools"]), str(r["tasks"]), ", ".join(r["tags"]))
    Console().print(table)


@world_group.command("validate")
@click.argument("paths", nargs=-1, required=True)
def world_validate(paths: tuple[str, ...]) -> None:
    """Check world packages: imports, tool schemas, seed constraints, and every task's reference solution
    (it must pass its verifier, and a no-op episode must fail it).

    Exits 1 when any problem is found, printing FILE: FIELD: PROBLEM for each.

    \b
    Example:
      mcpworld world validate mcpworld/worlds/catalog/airline
      mcpworld world validate airline shop     # installed world names work too
    """
    from mcpworld.worlds.loader import WorldLoadError, resolve
    from mcpworld.worlds.validate import validate

    bad = 0
    for p in paths:
        try:
            target = resolve(p)
        except WorldLoadError as exc:
            click.echo(f"{p}: {exc}", err=True)
            bad += 1
            continue
        world, problems = validate(target)
        for problem in problems:
            click.echo(str(problem), err=True)
        bad += len(problems)
        if not problems and world is not None:
            click.echo(f"ok  {world.name}: {len(world.tools)} tools, {len(world.tasks)} tasks")
    if bad:
        click.echo(f"{bad} problem(s) found", err=True)
        sys.exit(1)


@world_group.command("audit")
@click.argument("paths", nargs=-1, required=True, metavar="NAME|PATH...")
@click.option("--task", "task_ids", multiple=True, metavar="ID",
              help="Audit only this task (repeatable). Default: every task.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also write the full report (table, failures, every result) as JSON to FILE.")
@click.option("--quiet", is_flag=True, help="No progress bar and no table: print only the failures.")
def world_audit(paths: tuple[str, ...], task_ids: tuple[str, ...], json_path: str | None, quiet: bool) -> None:
    """Audit worlds for reward hacking: play attacks generated from each task; each must fail.

    For every task the reference solution must pass, and so must every accepted form of its typed answer.
    Then attacks are played, in-process and seeded: noop, no-submission, wrong-value (every other value of
    the answer's type), second-submission, other-rule, leaky-decline and claiming-decline (refusals),
    needless-decline, prefix (the reference stopped early), collateral (an unrelated row edited),
    perturbed-args (a write argument changed), free-text (injection, wipe, another record's data) and random
    calls. A wrong policy that passes a task is a hole an RL policy will find. Below each table: the chance
    levels (what a constant or random policy earns per task kind), with a warning above 1 in 10.

    Prints a table (policies x task kinds, "passed/total"; wrong passes in red), then each failure as
    WORLD: TASK: POLICY: ATTEMPT: DETAIL.

    \b
    Exit codes:
      0  no wrong policy passed any task; every reference and accepted answer form passed
      1  at least one wrong policy passed, or a reference or accepted answer form failed
      2  a world could not be loaded, or a --task id is unknown

    \b
    Examples:
      mcpworld world audit airline
      mcpworld world audit ./my_world --task refund-late --json audit.json
      mcpworld world audit airline shop --quiet
    """
    from mcpworld.worlds.audit import CHANCE_WARNING, audit
    from mcpworld.worlds.loader import WorldLoadError, load_world, resolve
    from mcpworld.worlds.runtime import WorldRuntime

    runtimes = []
    for p in paths:
        try:
            world = load_world(resolve(p))
            runtime = WorldRuntime(world)
            runtime.template(None)
        except WorldLoadError as exc:
            click.echo(f"{p}: {exc}", err=True)
            sys.exit(2)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            click.echo(f"{p}: cannot build the world: {type(exc).__name__}: {first}", err=True)
            sys.exit(2)
        runtimes.append(runtime)
    wanted = list(dict.fromkeys(task_ids))
    unknown = [t for t in wanted if not any(t in r.tasks for r in runtimes)]
    if unknown:
        known = ", ".join(t for r in runtimes for t in r.tasks)
        click.echo(f"unknown task(s) {', '.join(unknown)}; tasks: {known}", err=True)
        sys.exit(2)

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    reports = []
    for runtime in runtimes:
        ids = [t for t in runtime.tasks if t in wanted] if wanted else list(runtime.tasks)
        if quiet:
            reports.append(audit(runtime, ids))
            continue
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[current]}"), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=True) as progress:
            bar = progress.add_task(f"audit {runtime.world.name}", total=len(ids), current="")
            reports.append(audit(runtime, ids, on_progress=lambda done, total, tid: progress.update(
                bar, completed=done, current=tid)))

    console = Console()
    for report in reports:
        if quiet:
            continue
        table = Table(title=f"{report.world}: {len(report.tasks)} task(s)")
        table.add_column("policy")
        for kind in ("answer", "state", "refusal", "total"):
            table.add_column(kind, justify="right")
        for row in report.table():
            cells = []
            for kind in ("answer", "state", "refusal", "total"):
                cell = row[kind]
                if cell != "-":
                    passed, total = (int(x) for x in cell.split("/"))
                    bad = passed != total if row["expected_pass"] else passed > 0
                    cell = f"[red]{cell}[/red]" if bad else f"[green]{cell}[/green]"
                cells.append(cell)
            name = row["policy"] + (" (must pass)" if row["expected_pass"] else "")
            table.add_row(name, *cells)
        console.print(table)
        chance = Table(title=f"{report.world}: chance levels (expected reward per task without doing the job)")
        for column in ("kind", "tasks", "policy", "reward", "how"):
            chance.add_column(column, justify="right" if column in ("tasks", "reward") else "left")
        for c in report.chance:
            level = f"{c.level:.3f}"
            chance.add_row(c.kind, str(c.tasks), c.policy, f"[red]{level}[/red]" if c.level > CHANCE_WARNING
                           else level, c.how)
        console.print(chance)
        for warning in report.warnings:
            click.echo(f"{report.world}: chance level above 1 in 10: {warning}")
        for policy, passed in report.tau2.items():  # τ² worlds: what τ²'s own reward lets a wrong policy pass
            click.echo(f"{report.world}: tau2 mode: {policy} passes {len(passed)}/{len(report.tasks)} task(s): "
                       + ", ".join(passed))
    failures = [(report.world, f) for report in reports for f in report.failures]
    for world_name, f in failures:
        click.echo(f"{world_name}: {f.task}: {f.policy}: {f.attempt + ': ' if f.attempt else ''}{f.detail}")
    if json_path:
        from pathlib import Path

        Path(json_path).write_text(json.dumps({"ok": not failures, "worlds": [r.as_dict() for r in reports]},
                                              indent=2, default=str))
    if failures:
        click.echo(f"{len(failures)} audit failure(s)", err=True)
        sys.exit(1)
    click.echo(f"ok  {', '.join(r.world for r in reports)}: no wrong policy passed "
               f"{sum(len(r.tasks) for r in reports)} task(s)")


@click.command("world")
@click.argument("name")
@click.option("--stdio", is_flag=True, help="Speak MCP on stdin/stdout (what Claude Desktop launches).")
@click.option("--port", type=int, default=None, help="Serve this one world over HTTP on this port instead.")
@click.option("--host", default="127.0.0.1", show_default=True)
@with_episode_options
def serve_world(name: str, stdio: bool, port: int | None, host: str, ttl: float, max_episodes: int,
                interactive: bool) -> None:
    """Serve one world (a catalog name or a package path).

    \b
    Examples:
      mcpworld serve world airline --stdio --interactive
      mcpworld serve world ./my_world --port 8765
    """
    from mcpworld.worlds.episodes import EpisodeLimits
    from mcpworld.worlds.host import build_servers, serve_stdio
    from mcpworld.worlds.loader import WorldLoadError

    if stdio == (port is not None):
        raise click.UsageError("choose exactly one of --stdio or --port")
    try:
        servers = build_servers([name], EpisodeLimits(ttl, max_episodes), interactive)
    except WorldLoadError as exc:
        raise click.ClickException(str(exc)) from None
    if stdio:
        serve_stdio(servers[0])
    else:
        _run_http(servers, host, port)  # type: ignore[arg-type]


@click.command("worlds")
@click.option("--port", type=int, default=8765, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to bind. Anything but localhost exposes the worlds to your network.")
@click.option("--only", multiple=True, help="Serve only these worlds (repeatable). Default: every installed world.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Processes behind the one port (each holds its own episodes; a dead one is restarted).")
@with_episode_options
def serve_worlds(port: int, host: str, only: tuple[str, ...], workers: int, ttl: float, max_episodes: int,
                 interactive: bool) -> None:
    """Serve every installed world over Streamable HTTP, each at /worlds/<name>/mcp.

    \b
    Example:
      mcpworld serve worlds --port 8765
      curl http://127.0.0.1:8765/worlds          # the index
    """
    from mcpworld.core import workers as procs
    from mcpworld.core.serving import serve
    from mcpworld.worlds.episodes import EpisodeLimits
    from mcpworld.worlds.host import build_servers, world_path, worlds_app
    from mcpworld.worlds.loader import WorldLoadError, discover, resolve

    names = list(only) or [r.name for r in discover()]
    if workers > 1 and procs.current() is None:  # the supervisor: each worker loads the worlds itself
        try:
            for name in names:
                resolve(name)
        except WorldLoadError as exc:
            raise click.ClickException(str(exc)) from None
        for name in names:
            click.echo(f"{name:12} http://{host}:{port}{world_path(name)}", err=True)
        serve(lambda: None, host, port, workers)
        return
    try:
        servers = build_servers(names, EpisodeLimits(ttl, max_episodes), interactive, skip_broken=not only)
    except WorldLoadError as exc:
        raise click.ClickException(str(exc)) from None
    if procs.current() is not None:
        serve(lambda: worlds_app(servers, host=host), host, port, workers)
        return
    _run_http(servers, host, port)


def _run_http(servers, host: str, port: int) -> None:  # type: ignore[no-untyped-def]
    from mcpworld.core.serving import serve
    from mcpworld.worlds.host import world_path, worlds_app

    for s in servers:
        click.echo(f"{s.runtime.world.name:12} http://{host}:{port}{world_path(s.runtime.world.name)}", err=True)
    serve(lambda: worlds_app(servers, host=host), host, port)
