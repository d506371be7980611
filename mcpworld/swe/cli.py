"""The SWE sandbox's command line: `mcpworld swe ...` (list, grade, build-projects, build-instances) and
`mcpworld serve swe` (stdio or HTTP), also `python -m mcpworld.swe`; the backend is chosen by name (`backends`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from mcpworld.swe.backends import BACKENDS, SWEBackend, make_backend
from mcpworld.swe.instances import Instance, InstanceError
from mcpworld.swe.shell import BackendUnavailable

instances_option = click.option(
    "--instances", "instances_file", type=click.Path(dir_okay=False), default=None,
    help="SWE-bench instances (JSON or JSONL). Default: the shipped instances.")
repos_option = click.option(
    "--repos", "repos_dir", type=click.Path(file_okay=False), default=None,
    help="Folder of repositories (<owner>__<name> or <name>, a git folder or archive) for instances without "
         "repo_source.")
backend_option = click.option("--backend", type=click.Choice(list(BACKENDS)), default="local",
                              show_default=True,
                              help="Where commands and tests run; simulated: SWT predicts what code prints "
                                   "($MCPWORLD_SWT_URL) and, with $MCPWORLD_SWR_URL, SWR grades.")


def _instances(instances_file: str | None, repos_dir: str | None, require_source: bool = True) -> list[Instance]:
    from mcpworld.swe.builder import builtin_instances
    from mcpworld.swe.instances import load_instances

    problems: list[str] = []
    try:
        loaded = load_instances(instances_file, repos_dir, problems=problems,
                                require_source=require_source) if instances_file else builtin_instances()
    except InstanceError as exc:
        raise click.ClickException(str(exc)) from None
    for problem in problems:  # a malformed record is skipped with its line number; the rest load
        click.echo(f"warning: skipped {problem}", err=True)
    return loaded


def _backend(name: str, instances: list[Instance]) -> SWEBackend:
    """The backend by name, hiding these instances' answers; simulated needs MCPWORLD_SWT_URL (docs/world-models.md)."""
    try:
        return make_backend(name, instances)
    except BackendUnavailable as exc:
        raise click.ClickException(str(exc)) from None


@click.group("swe")
def swe_group() -> None:
    """The SWE sandbox: list instances, grade predictions, build the shipped instances."""


@swe_group.command("list")
@instances_option
@repos_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def swe_list(instances_file: str | None, repos_dir: str | None, as_json: bool) -> None:
    """List instances with their repository and test counts.

    \b
    Example:
      mcpworld swe list
      mcpworld swe list --instances my_instances.jsonl --json
    """
    rows: list[dict[str, Any]] = [
        {"instance_id": i.instance_id, "repo": i.repo, "base_commit": i.base_commit[:12],
         "FAIL_TO_PASS": len(i.FAIL_TO_PASS), "PASS_TO_PASS": len(i.PASS_TO_PASS), "difficulty": i.difficulty,
         "title": i.problem_statement.strip().splitlines()[0][:80]}
        for i in _instances(instances_file, repos_dir, require_source=False)]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("instance", "F2P", "P2P", "difficulty", "title")
    for r in rows:
        table.add_row(r["instance_id"], str(r["FAIL_TO_PASS"]), str(r["PASS_TO_PASS"]), r["difficulty"], r["title"])
    Console().print(table)


@swe_group.command("grade")
@instances_option
@repos_option
@click.option("--predictions", "predictions_file", required=True,
              help="SWE-bench predictions (JSON list or JSONL of {instance_id, model_patch, model_name_or_path}), "
                   "or 'gold' to grade the instances' own patches.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write the report JSON here.")
@click.option("--timeout", default=600.0, show_default=True,
              help="Seconds each instance's tests may run; past it the instance is unresolved, with the reason.")
@click.option("-j", "--jobs", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Instances graded in parallel.")
@click.option("--logs", "logs_dir", type=click.Path(file_okay=False), default=None,
              help="Keep each instance's logs in DIR/<run_id>/<model>/<instance_id>/ (patch.diff, eval.sh, "
                   "test_output.txt, report.json: the harness's layout) and the run report in DIR.")
@click.option("--run-id", default="mcpworld", show_default=True, help="Names the run in --logs and the run report.")
@click.option("--wheelhouse", multiple=True, type=click.Path(file_okay=False),
              help="Folder of wheels/sdists that instance environments are built from, offline (repeatable).")
@click.option("--specs", "specs_file", type=click.Path(dir_okay=False), default=None,
              help="Environment specs, the harness's shape: JSON {repo: {version: {python, packages, "
                   "pip_packages, pre_install, install, test_cmd}}}.")
@click.option("--mode", type=click.Choice(["strict", "harness"]), default="strict", show_default=True,
              help="strict: only the patch's changes to source files count (tests, test configuration and start-up "
                   "hooks are dropped and listed), and a grader's canary test must fail; harness: exactly as the "
                   "SWE-bench harness grades.")
@backend_option
def swe_grade(instances_file: str | None, repos_dir: str | None, predictions_file: str, output: str | None,
              timeout: float, jobs: int, logs_dir: str | None, run_id: str, wheelhouse: tuple[str, ...],
              specs_file: str | None, mode: str, backend: str) -> None:
    """Grade predictions like SWE-bench: apply each patch and test_patch, run the tests, report.

    The report maps instance_id to the harness's report.json entry {patch_is_None, patch_exists,
    patch_successfully_applied, resolved, infra_failure, tests_status} plus resolution, the grading mode, the
    files a strict grade left out (dropped) and, on a problem, error.
    Instances with an environment spec (their install_config, or --specs) run their tests in a virtualenv built
    once from --wheelhouse and reused. Exits 0 whatever the results; 1 on bad input.

    \b
    Example:
      mcpworld swe grade --predictions gold -o gold_report.json
      mcpworld swe grade --instances instances.jsonl --predictions preds.jsonl -j 4 --logs logs -o report.json
    """
    from concurrent.futures import ThreadPoolExecutor

    from mcpworld.swe.envs import EnvManager
    from mcpworld.swe.grading import empty_report, grade, load_predictions, run_summary, save_logs
    from mcpworld.swe.workspace import WorkspaceError, WorkspacePool

    instances = {i.instance_id: i for i in _instances(instances_file, repos_dir)}
    if predictions_file == "gold":
        predictions = [{"instance_id": i.instance_id, "model_patch": i.patch, "model_name_or_path": "gold"}
                       for i in instances.values()]
    else:
        try:
            predictions = load_predictions(predictions_file)
        except (OSError, ValueError) as exc:
            raise click.ClickException(str(exc)) from None
    unknown = [p["instance_id"] for p in predictions if p["instance_id"] not in instances]
    if unknown:
        raise click.ClickException(f"{len(unknown)} prediction(s) for unknown instances: {', '.join(unknown[:5])}")
    specs = None
    if specs_file:
        try:
            specs = json.loads(Path(specs_file).read_text())
        except (OSError, ValueError) as exc:
            raise click.ClickException(f"{specs_file}: cannot read environment specs: {exc}") from None
    be = _backend(backend, list(instances.values())).execution
    envs = EnvManager([Path(w) for w in wheelhouse])
    pool = WorkspacePool(warm=0)
    report: dict[str, Any] = {}
    errors: dict[str, str] = {}

    def one(pred: dict[str, Any]) -> None:
        instance = instances[pred["instance_id"]]
        model = str(pred.get("model_name_or_path") or "model").replace("/", "__")
        try:
            result = grade(instance, pred.get("model_patch"), pool, be, timeout, envs=envs, specs=specs,
                           mode=mode)  # type: ignore[arg-type]
            entry = result.report
            if logs_dir and result.log:
                save_logs(result, pred.get("model_patch"), Path(logs_dir) / run_id / model / instance.instance_id)
        except WorkspaceError as exc:  # our side (source, environment): an error, never a grade
            entry = {**empty_report(pred.get("model_patch")), "error": str(exc)}
            errors[instance.instance_id] = str(exc)
        report[instance.instance_id] = entry
        mark = {"FULL": "resolved", "PARTIAL": "partial"}.get(entry.get("resolution", "NO"), "not resolved")
        note = f"  ({entry['error'][:160]})" if entry.get("error") else ""
        click.echo(f"{instance.instance_id:40} {mark}{note}", err=True)

    try:
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="swe-grade") as executor:
            list(executor.map(one, predictions))
    finally:
        pool.close_all()
    report = {p["instance_id"]: report[p["instance_id"]] for p in predictions}
    resolved = sum(1 for r in report.values() if r["resolved"])
    click.echo(f"resolved {resolved}/{len(report)}", err=True)
    if logs_dir:
        model = str(predictions[0].get("model_name_or_path") or "model").replace("/", "__") if predictions else "model"
        summary = run_summary(list(instances), {p["instance_id"]: p for p in predictions}, report, errors)
        path = Path(logs_dir) / f"{model}.{run_id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(summary, indent=4) + "\n")
        click.echo(f"wrote {path}", err=True)
    text = json.dumps(report, indent=2)
    if output:
        Path(output).write_text(text + "\n")
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text)


@swe_group.command("build-projects")
@click.argument("dest", type=click.Path(file_okay=False))
@click.option("--offline", is_flag=True, help="Use only sdists and wheels already in DEST (no pip download).")
def swe_build_projects(dest: str, offline: bool) -> None:
    """Build instances from real PyPI projects (six with pytest, more-itertools with unittest, Django's runner).

    Downloads their sdists and the wheels their environments need with pip into DEST/sdists and DEST/wheelhouse
    (skipped with --offline), then writes DEST/repos and DEST/instances.jsonl.

    \b
    Example:
      mcpworld swe build-projects ./real && mcpworld swe grade --instances ./real/instances.jsonl \\
          --wheelhouse ./real/wheelhouse --predictions gold
    """
    from mcpworld.swe.builder import build_projects, fetch_projects

    root = Path(dest)
    try:
        if not offline:
            fetch_projects(root / "sdists", root / "wheelhouse")
        click.echo(str(build_projects(root, root / "sdists")))
    except (OSError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from None


@swe_group.command("build-instances")
@click.argument("dest", type=click.Path(file_okay=False))
def swe_build(dest: str) -> None:
    """Build the shipped repositories and instances.jsonl into DEST (they are also built on first use).

    \b
    Example:
      mcpworld swe build-instances ./swe-data && mcpworld swe list --instances ./swe-data/instances.jsonl
    """
    from mcpworld.swe.builder import build_instances

    path = build_instances(dest)
    click.echo(str(path))


@click.command("swe")
@click.option("--stdio", is_flag=True, help="Speak MCP on stdin/stdout (what Claude Desktop launches).")
@click.option("--port", type=int, default=None, help="Serve over Streamable HTTP at /swe/mcp on this port.")
@click.option("--host", default="127.0.0.1", show_default=True)
@instances_option
@repos_option
@backend_option
@click.option("--command-timeout", default=120.0, show_default=True, help="Longest a bash command may run (s).")
@click.option("--max-episodes", default=64, show_default=True, help="Cap on live episodes (workspaces).")
@click.option("--ttl", default=3600.0, show_default=True, help="Seconds an idle episode lives before removal.")
@click.option("--warm", default=1, show_default=True, help="Checkouts kept ready per instance in use (0: none).")
def serve_swe(stdio: bool, port: int | None, host: str, instances_file: str | None, repos_dir: str | None,
              backend: str, command_timeout: float, max_episodes: int, ttl: float, warm: int) -> None:
    """Serve the SWE sandbox (editor, bash, search, lsp, submit) as an MCP server.

    \b
    Examples:
      mcpworld serve swe --stdio
      mcpworld serve swe --port 8766 --instances my_instances.jsonl
    """
    from mcpworld.swe.server import SWEOptions, SWEServer

    if stdio == (port is not None):
        raise click.UsageError("choose exactly one of --stdio or --port")
    options = SWEOptions(command_timeout_s=command_timeout, max_episodes=max_episodes, ttl_s=ttl, warm=warm)
    instances = _instances(instances_file, repos_dir)
    chosen = _backend(backend, instances)
    sw = SWEServer(instances, chosen.execution, options, grader=chosen.grader)
    if stdio:
        serve_stdio(sw)
    else:
        serve_http(sw, host, port)  # type: ignore[arg-type]


def serve_stdio(sw: Any) -> None:
    """Serve on stdin/stdout until the client hangs up; workspaces are removed on the way out."""
    import atexit
    import signal

    from mcpworld.core.stdio import run_stdio

    atexit.register(sw.close_all)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # a terminated server still removes its workspaces
    try:
        run_stdio(sw.server)  # malformed lines get JSON-RPC errors, and serving goes on
    finally:
        sw.close_all()


def serve_http(sw: Any, host: str, port: int) -> None:
    """Serve at /swe/mcp (and /healthz) on host:port until Ctrl-C; workspaces are removed on the way out."""
    from mcpworld.core.episode_server import endpoint_app
    from mcpworld.core.security import Exposure
    from mcpworld.core.serving import serve
    from mcpworld.swe.server import SWE_PATH, running_swe, swe_routes

    exposure = Exposure.of(host)
    app = endpoint_app(swe_routes(sw, host, exposure), lambda: {"tasks": len(sw.instances), "live_episodes": len(sw)},
                       lambda: running_swe(sw), exposure)
    click.echo(f"swe          http://{host}:{port}{SWE_PATH}", err=True)
    serve(lambda: app, host, port)
