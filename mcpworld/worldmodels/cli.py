"""`mcpworld worldmodel collect|eval|serve-model` and `mcpworld serve world-model`: the world models SWT and SWR."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

CANDIDATES = ("gold", "empty", "wrong")  # mirrors candidates.CANDIDATES; kept here so --help imports nothing heavy


def _csv(value: str, allowed: tuple[str, ...], what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if bad or not items:
        raise click.BadParameter(f"{what}: choose from {', '.join(allowed)} (comma-separated), got {value!r}")
    return items


def _instances(instances_file: str | None, shipped: bool, repos_dir: str | None, only: tuple[str, ...],
               limit: int | None) -> list[Any]:
    from mcpworld.swe.builder import builtin_instances
    from mcpworld.swe.instances import InstanceError, load_instances

    if instances_file and shipped:
        raise click.UsageError("choose one of --instances FILE or --shipped")
    try:
        instances = load_instances(instances_file, repos_dir) if instances_file else builtin_instances()
    except InstanceError as exc:
        raise click.ClickException(str(exc)) from None
    if only:
        unknown = set(only) - {i.instance_id for i in instances}
        if unknown:
            raise click.ClickException(f"unknown instance(s): {', '.join(sorted(unknown))}")
        instances = [i for i in instances if i.instance_id in only]
    return instances[:limit] if limit else instances


def instance_options(fn: Any) -> Any:
    for option in reversed([
        click.option("--instances", "instances_file", type=click.Path(dir_okay=False), default=None,
                     help="SWE-bench instances (JSON or JSONL)."),
        click.option("--shipped", is_flag=True, help="Use the SWE sandbox's shipped instances (the default)."),
        click.option("--repos", "repos_dir", type=click.Path(file_okay=False), default=None,
                     help="Folder of repositories for instances without repo_source."),
        click.option("--only", multiple=True, help="Only this instance id (repeatable)."),
        click.option("--limit", type=int, default=None, help="At most this many instances."),
        click.option("--commands", "-c", "commands", multiple=True,
                     help="A command to run besides the instance's test command (repeatable)."),
        click.option("--no-test-command", is_flag=True, help="Do not run the instance's own test command."),
        click.option("--candidates", default=",".join(CANDIDATES), show_default=True,
                     help="Candidate patches: gold, empty, wrong (comma-separated)."),
        click.option("--timeout", default=300.0, show_default=True, help="Seconds each real command may run."),
        click.option("--include-gold", is_flag=True, help="Show SWT the gold patch too (SWE-World's option)."),
    ]):
        fn = option(fn)
    return fn


@click.command("collect")
@instance_options
@click.option("--kinds", default="swt,swr", show_default=True, help="Which pairs to record: swt, swr.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="Chat JSONL to write.")
def collect_command(instances_file: str | None, shipped: bool, repos_dir: str | None, only: tuple[str, ...],
                    limit: int | None, commands: tuple[str, ...], no_test_command: bool, candidates: str,
                    timeout: float, include_gold: bool, kinds: str, output: str) -> None:
    """Record SWT/SWR distillation data from real runs: prompts -> real output, real test logs and rewards.

    \b
    Examples:
      mcpworld worldmodel collect --shipped -o data.jsonl
      mcpworld worldmodel collect --instances instances.jsonl -c "python -c 'import pkg'" -o swt.jsonl --kinds swt
    """
    from mcpworld.worldmodels.distill import collect

    insts = _instances(instances_file, shipped, repos_dir, only, limit)
    stats = collect(insts, output, commands, candidates=_csv(candidates, CANDIDATES, "--candidates"),
                    test_command=not no_test_command, kinds=_csv(kinds, ("swt", "swr"), "--kinds"), timeout=timeout,
                    include_gold=include_gold, progress=lambda s: click.echo(s, err=True))
    for error in stats.errors:
        click.echo(f"error: {error}", err=True)
    click.echo(f"wrote {stats.swt} SWT and {stats.swr} SWR pairs to {output}", err=True)
    if stats.errors and not (stats.swt or stats.swr):
        sys.exit(1)


@click.command("eval")
@instance_options
@click.option("--swt-url", envvar="MCPWORLD_SWT_URL", default=None,
              help="SWT endpoint(s), comma-separated (default $MCPWORLD_SWT_URL).")
@click.option("--swr-url", envvar="MCPWORLD_SWR_URL", default=None,
              help="SWR endpoint(s), comma-separated (default $MCPWORLD_SWR_URL).")
@click.option("--swt-model", default="swt", show_default=True, help="Served model name of SWT.")
@click.option("--swr-model", default="swr", show_default=True, help="Served model name of SWR.")
@click.option("-k", "k", default=3, show_default=True, help="SWR samples per patch.")
@click.option("--model-timeout", default=120.0, show_default=True, help="Seconds per model request.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write the report JSON here.")
def eval_command(instances_file: str | None, shipped: bool, repos_dir: str | None, only: tuple[str, ...],
                 limit: int | None, commands: tuple[str, ...], no_test_command: bool, candidates: str, timeout: float,
                 include_gold: bool, swt_url: str | None, swr_url: str | None, swt_model: str, swr_model: str, k: int,
                 model_timeout: float, output: str | None) -> None:
    """Fidelity: SWT against real execution (exit codes, output similarity), SWR against real grading
    (accuracy, precision, recall), over instances x candidate patches (gold, empty, wrong).

    \b
    Example:
      mcpworld worldmodel eval --shipped --swt-url http://127.0.0.1:8001/v1 --swr-url http://127.0.0.1:8002/v1 -o f.json
    """
    import anyio

    from mcpworld.worldmodels.fidelity import evaluate, print_report
    from mcpworld.worldmodels.llm_pool import ModelPool, parse_urls
    from mcpworld.worldmodels.swr import SWR, SWRScorer
    from mcpworld.worldmodels.swt import SWT

    if not parse_urls(swt_url) and not parse_urls(swr_url):
        raise click.UsageError("give --swt-url and/or --swr-url (or set MCPWORLD_SWT_URL / MCPWORLD_SWR_URL)")
    insts = _instances(instances_file, shipped, repos_dir, only, limit)
    swt = SWT(ModelPool.from_urls(swt_url, swt_model, timeout_s=model_timeout)) if parse_urls(swt_url) else None
    scorer = SWRScorer.of(SWR(ModelPool.from_urls(swr_url, swr_model, timeout_s=model_timeout), k=k), insts) \
        if parse_urls(swr_url) else None

    async def main() -> Any:
        return await evaluate(insts, swt=swt, scorer=scorer, commands=commands, test_command=not no_test_command,
                              candidates=_csv(candidates, CANDIDATES, "--candidates"), timeout=timeout,
                              include_gold=include_gold)

    try:
        report = anyio.run(main)
    finally:
        if scorer is not None:
            scorer.close()
    print_report(report)
    if output:
        Path(output).write_text(json.dumps(report.to_dict(), indent=2) + "\n")
        click.echo(f"wrote {output}", err=True)


@click.command("serve-model")
@click.option("--swt", "swt_ckpt", default=None, help="SWT checkpoint (folder or Hugging Face id).")
@click.option("--swr", "swr_ckpt", default=None, help="SWR checkpoint (folder or Hugging Face id).")
@click.option("--swt-port", default=8001, show_default=True)
@click.option("--swr-port", default=8002, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address vLLM binds (0.0.0.0 to serve other hosts of a cluster).")
@click.option("--tensor-parallel-size", "tp", default=1, show_default=True)
@click.option("--gpu-memory-utilization", type=float, default=None,
              help="Per server (default 0.9, or 0.45 each when both share the GPUs).")
@click.option("--max-model-len", default=32768, show_default=True)
@click.option("--swt-gpus", default=None, help="CUDA_VISIBLE_DEVICES for SWT, e.g. 0,1.")
@click.option("--swr-gpus", default=None, help="CUDA_VISIBLE_DEVICES for SWR.")
@click.option("--extra", multiple=True, help="Extra argument passed to vllm serve (repeatable).")
@click.option("--run", is_flag=True, help="Start the servers here (a GPU machine with vllm) instead of printing.")
def serve_model_command(swt_ckpt: str | None, swr_ckpt: str | None, swt_port: int, swr_port: int, host: str, tp: int,
                        gpu_memory_utilization: float | None, max_model_len: int, swt_gpus: str | None,
                        swr_gpus: str | None, extra: tuple[str, ...], run: bool) -> None:
    """Print (or --run) the `vllm serve` commands for SWT/SWR checkpoints, served as `swt` and `swr`.

    \b
    Example:
      mcpworld worldmodel serve-model --swt ./ckpt/swt --swr ./ckpt/swr
      mcpworld worldmodel serve-model --swt ./ckpt/swt --swt-gpus 0 --swr ./ckpt/swr --swr-gpus 1 --run
    """
    from mcpworld.worldmodels.vllm import env_exports, run_servers, serve_specs

    try:
        specs = serve_specs(swt_ckpt, swr_ckpt, swt_port=swt_port, swr_port=swr_port, host=host, tensor_parallel=tp,
                            gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                            swt_gpus=swt_gpus, swr_gpus=swr_gpus, extra=extra)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    for spec in specs:
        click.echo(spec.shell_line())
    click.echo("# then point mcpworld at them:", err=True)
    for line in env_exports(specs):
        click.echo(line, err=True)
    if run:
        try:
            sys.exit(run_servers(specs))
        except RuntimeError as exc:
            raise click.ClickException(str(exc)) from None


@click.command("world-model")
@click.argument("name", type=click.Choice(["swt", "swr"]))
@click.option("--stdio", is_flag=True, help="Speak MCP on stdin/stdout.")
@click.option("--port", type=int, default=None, help="Serve over HTTP at /world-models/NAME/mcp on this port.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--url", default=None, help="Model endpoint(s), comma-separated (default $MCPWORLD_SWT_URL or "
                                          "$MCPWORLD_SWR_URL).")
@click.option("--model", default=None, help="Served model name (default swt / swr).")
@click.option("--instances", "instances_file", type=click.Path(dir_okay=False), default=None,
              help="SWE instances (default: the shipped ones).")
@click.option("-k", "k", default=3, show_default=True, help="SWR samples per patch.")
def serve_world_model_command(name: str, stdio: bool, port: int | None, host: str, url: str | None,
                              model: str | None, instances_file: str | None, k: int) -> None:
    """Serve SWT (`simulate`) or SWR (`score`) as an MCP server.

    \b
    Examples:
      MCPWORLD_SWT_URL=http://127.0.0.1:8001/v1 mcpworld serve world-model swt --stdio
      mcpworld serve world-model swr --port 8767 --url http://gpu1:8002/v1,http://gpu2:8002/v1
    """
    from mcpworld.worldmodels.servers import WorldModelConfig, world_model_servers

    if stdio == (port is not None):
        raise click.UsageError("choose exactly one of --stdio or --port")
    config = WorldModelConfig.from_env(instances_file=instances_file, k=k)
    if name == "swt":
        config.swt_url, config.swr_url = url or config.swt_url, None
        config.swt_model = model or config.swt_model
    else:
        config.swr_url, config.swt_url = url or config.swr_url, None
        config.swr_model = model or config.swr_model
    mounted = world_model_servers(config)
    if not mounted:
        raise click.UsageError(f"no endpoint for {name}: pass --url or set MCPWORLD_{name.upper()}_URL")
    if stdio:
        _serve_stdio(mounted[0])
    else:
        _serve_http(mounted[0], host, port)  # type: ignore[arg-type]


def _serve_stdio(m: Any) -> None:
    from mcpworld.core.stdio import run_stdio  # checked lines: malformed JSON-RPC gets an error, not silence

    try:
        run_stdio(m.server)
    finally:
        m.closer()


def _serve_http(m: Any, host: str, port: int) -> None:
    from mcpworld.core.episode_server import endpoint_app
    from mcpworld.core.security import Exposure
    from mcpworld.core.serving import serve
    from mcpworld.worldmodels.servers import running_world_models

    exposure = Exposure.of(host)
    app = endpoint_app(m.routes(host, exposure), lambda: {"model": m.name}, lambda: running_world_models([m]),
                       exposure)
    click.echo(f"{m.name}          http://{host}:{port}{m.path}", err=True)
    serve(lambda: app, host, port)


@click.group("worldmodel")
def worldmodel_group() -> None:
    """World models SWT (predicts what a command prints) and SWR (a virtual test runner): record distillation
    data, measure fidelity against real execution, and print the commands that serve trained checkpoints."""


worldmodel_group.add_command(collect_command)
worldmodel_group.add_command(eval_command)
worldmodel_group.add_command(serve_model_command)
