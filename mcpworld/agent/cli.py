"""`mcpworld run`: play tasks of a registered server with a policy, write trajectories, print a summary.

Exit status: 0 when every episode was played; LOST_EXIT (3) when some were lost to infrastructure errors (they
are written as infra_error with no reward, and `--resume` plays exactly those again); SETUP_EXIT (4) when the run
was set up so that some could not be played at all (the oracle got no references, a replay file lacks a task, the
model's endpoint failed): written as setup_error or model_error, with no reward, and played again by --resume.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

# The names `run` offers, known without importing the policies and formats (they import the MCP SDK, a second and
# more: `run --help` must answer at once, issue 35); tests/agent/test_loop.py holds them to POLICIES and FORMATS.
POLICY_CHOICES = ("oracle", "random", "replay", "openai")
FORMAT_CHOICES = ("native", "text", "awm")
LOST_EXIT = 3  # episodes were lost to infrastructure errors: rerun with --resume
SETUP_EXIT = 4  # episodes not played as the run was set up (no references, no recording, a failing model endpoint)


def default_output(server: str, policy: str) -> Path:
    """A new trajectory file under $MCPWORLD_HOME/runs, named for the server, the policy and the time."""
    from datetime import datetime, timezone

    from mcpworld.core.paths import runs_dir

    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", server.removeprefix("io.mcpworld/")).strip("-")[:60] or "server"
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
    return runs_dir() / f"{slug}-{policy}-{stamp}.jsonl"


@click.command("run")
@click.option("--server", required=True, help="Registered name (airline, io.mcpworld/airline) or an MCP URL.")
@click.option("--task", "task_ids", multiple=True, help="Task id (repeatable). Default: every task.")
@click.option("--split", type=click.Choice(["train", "test"]), default=None, help="Only tasks of this split.")
@click.option("--policy", type=click.Choice(POLICY_CHOICES), default="oracle",
              show_default=True)
@click.option("--model", default=None, envvar="MCPWORLD_MODEL", help="Model name for --policy openai.")
@click.option("--base-url", default=None, envvar="OPENAI_BASE_URL",
              help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (vllm serve). Key: $OPENAI_API_KEY.")
@click.option("--format", "fmt", type=click.Choice(FORMAT_CHOICES), default="native", show_default=True,
              help="Tool-call format: native tool_calls, <tool_call> text, or AWM's list_tools/call_tool.")
@click.option("--temperature", type=float, default=None)
@click.option("--max-tokens", type=int, default=None,
              help="Cap on each reply (--policy openai); a tool call cut off there ends the episode as `truncated`.")
@click.option("--no-tool-check", is_flag=True,
              help="Skip checking that the endpoint honours native `tools` (--policy openai --format native).")
@click.option("--replay-file", type=click.Path(exists=True, path_type=Path), default=None,
              help="Trajectories to replay with --policy replay.")
@click.option("-n", "-k", "--samples", default=1, show_default=True,
              help="Samples per task (seeds --seed, --seed+1, ...); with 2 or more, pass^1..pass^k are reported "
                   "as tau2-bench does.")
@click.option("--concurrency", default=4, show_default=True, help="Episodes in flight at once.")
@click.option("--max-turns", default=20, show_default=True)
@click.option("--turn-timeout", default=120.0, show_default=True, help="Seconds per policy turn.")
@click.option("--history", type=int, default=None, help="Keep only the last K turns in the model's context.")
@click.option("--seed", default=0, show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Trajectory file (JSONL, appended). Default: a new file "
                   "$MCPWORLD_HOME/runs/SERVER-POLICY-TIME.jsonl (~/.mcpworld/runs/...), named in the summary.")
@click.option("--resume", is_flag=True,
              help="Skip (task, sample) pairs already in --output (required with it); pairs lost to infrastructure "
                   "errors are replayed.")
@click.option("--retries", default=3, show_default=True,
              help="Tries after the first for an episode lost to an infrastructure error (server gone, connection "
                   "broken, request timed out), each on a fresh connection and episode.")
@click.option("--retry-backoff", default=1.0, show_default=True,
              help="Seconds before the first retry; doubles each retry (at most 30).")
@click.option("--registry", default=None,
              help="Registry base URL (default: $MCPWORLD_REGISTRY, else the running `mcpworld up`, else :8765).")
@click.option("--include-provisional", is_flag=True,
              help="Also play provisional tasks (imported without a reference: judged by their own verifier).")
def run_command(server: str, task_ids: tuple[str, ...], split: str | None, policy: str, model: str | None,
                base_url: str | None, fmt: str, temperature: float | None, max_tokens: int | None,
                no_tool_check: bool, replay_file: Path | None, samples: int,
                concurrency: int, max_turns: int, turn_timeout: float, history: int | None, seed: int,
                output: Path | None, resume: bool, retries: int, retry_backoff: float, registry: str | None,
                include_provisional: bool) -> None:
    """Run episodes and record trajectories (JSONL, one episode per line).

    Exits 3 when episodes were lost to infrastructure errors (no reward is given for them); rerun with
    --resume to play exactly those. Exits 4 when the setup kept episodes from being played (the oracle got no
    references from a server holding another registry token, a replay file lacks a task, the model's endpoint
    failed): the error says what to fix; those episodes carry no reward either.

    \b
    Examples:
      mcpworld run --server airline --policy oracle
      mcpworld run --server airline --split test --policy openai --model Qwen/Qwen3-8B \\
          --base-url http://127.0.0.1:8000/v1 -n 4 --concurrency 16 -o qwen.jsonl --resume
      mcpworld run --server tau2-airline --policy replay --replay-file rec.jsonl -k 4   # pass^1..pass^4
    """
    import anyio
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.table import Table

    from mcpworld.agent.loop import EpisodeConfig
    from mcpworld.agent.policies import Policy, make_policy
    from mcpworld.agent.runner import RunSpec, list_tasks, run
    from mcpworld.registry.connect import ConnectError

    if policy == "replay" and replay_file is None:
        raise click.UsageError("--policy replay needs --replay-file")
    if resume and output is None:
        raise click.UsageError("--resume needs -o/--output: the trajectory file to resume")
    if policy == "openai" and not (model and base_url):
        raise click.UsageError("--policy openai needs --model and --base-url (or MCPWORLD_MODEL / OPENAI_BASE_URL)")
    if policy == "openai" and fmt == "native" and not no_tool_check:
        from mcpworld.agent.formats import native_tools_problem
        from mcpworld.core.llm import ChatClient

        if problem := native_tools_problem(ChatClient(base_url=base_url, model=model)):  # type: ignore[arg-type]
            raise click.ClickException(problem)
    try:
        tasks = anyio.run(list_tasks, server, registry, split, include_provisional)
    except ConnectError as exc:
        raise click.ClickException(str(exc)) from None
    if task_ids:
        known = {t.id for t in tasks}
        missing = [t for t in task_ids if t not in known]
        if missing:
            raise click.ClickException(f"unknown task(s) on {server}: {', '.join(missing)}")
        tasks = [t for t in tasks if t.id in task_ids]
    output = output or default_output(server, policy)
    spec = RunSpec(server=server, tasks=tasks, samples=samples, concurrency=concurrency, seed=seed, output=output,
                   resume=resume, registry=registry, retries=retries, backoff_s=retry_backoff,
                   config=EpisodeConfig(max_turns=max_turns, turn_timeout_s=turn_timeout, history_turns=history))

    def policy_for(index: int) -> Policy:
        return make_policy(policy, seed=seed, index=index, format=fmt, model=model, base_url=base_url,
                           temperature=temperature, max_tokens=max_tokens, timeout_s=turn_timeout,
                           replay_file=replay_file)

    total = len(tasks) * samples
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True)) as progress:
        bar = progress.add_task(f"{server} · {policy}", total=total)
        try:
            _, summary = anyio.run(lambda: run(spec, policy_for, on_done=lambda t: progress.advance(bar)))
        except KeyboardInterrupt:  # every finished episode is on disk already: say how to go on from there
            progress.stop()
            click.echo(f"stopped (Ctrl-C): the finished episodes are in {output}; play the rest with the same "
                       f"command and --resume -o {output}", err=True)
            raise SystemExit(130) from None
        except (OSError, BaseExceptionGroup) as exc:
            failed = _os_error(exc)
            if failed is None:
                raise
            raise click.ClickException(  # a full disk, a read-only folder: say so, and how to go on
                f"could not write the trajectories to {output}: {failed.strerror or failed}. Every episode written "
                f"before it is kept; free some space (or pick another -o) and run the same command with --resume "
                f"-o {output}") from None
        progress.update(bar, completed=total)
    table = Table("metric", "value", title=f"{server} · {policy} → {output}")
    for k, v in summary.rows():
        table.add_row(k, v)
    Console().print(table)
    click.echo(f"trajectories: {output}")  # whole, on its own line: a table title may be cut to the terminal's width
    if (setup := summary.setup_message()) is not None:
        click.echo(f"error: {setup}", err=True)
        raise SystemExit(SETUP_EXIT)
    if (lost := summary.lost_message()) is not None:
        click.echo(f"error: {lost}", err=True)
        click.echo(f"  the same command with: --resume -o {output}", err=True)
        raise SystemExit(LOST_EXIT)


def _os_error(exc: BaseException) -> OSError | None:
    """The storage error at the bottom of `exc` (a task group wraps what its tasks raised), or None."""
    import errno

    from mcpworld.core.errors import innermost

    exc = innermost(exc)
    storage = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO, errno.EFBIG}
    return exc if isinstance(exc, OSError) and exc.errno in storage else None


@click.command("rescore")
@click.argument("trajectories", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the report (every changed verdict, the skip reasons) as JSON here.")
def rescore_command(trajectories: Path, json_path: Path | None) -> None:
    """Judge stored episodes again: each trajectory's calls replayed on a fresh fork of its task and seed,
    verified by the world as it is now (in this process), and compared with the stored verdict.

    Use it after a world's tasks, tools or data changed, to see which stored rollouts would now be judged
    differently. Each trajectory records the build that judged it (`environment.digest`). Episodes that were
    never played (infrastructure, setup, model errors) are skipped and counted. Exit status: 0 when no verdict
    changed, 1 when some did, 2 on unreadable input.

    \b
    Example:
      mcpworld run --server airline --policy oracle -o airline.jsonl
      mcpworld rescore airline.jsonl --json rescored.json
    """
    import json

    from rich.console import Console
    from rich.table import Table

    from mcpworld.agent.rescore import rescore

    report = rescore(trajectories)
    table = Table("task", "sample", "before", "after", "build before → now", title=f"{trajectories}: "
                  f"{len(report.rescored)} rescored, {len(report.changed)} changed")
    for r in report.changed:
        table.add_row(r.task, str(r.sample), f"{r.before} ({r.score_before})", f"{r.after} ({r.score_after:g})",
                      f"{r.built_before or '?'} → {r.built_after or '?'}")
    Console().print(table)
    for why, n in sorted(report.skipped.items()):
        click.echo(f"skipped {n}: {why}")
    if json_path is not None:
        json_path.write_text(json.dumps(report.as_dict(), indent=2, default=str))
    raise SystemExit(1 if report.changed else 0)
