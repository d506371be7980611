"""`mcpworld up`: the registry, every world, the SWE sandbox and world models on one port (composition)."""

from __future__ import annotations

import click

from mcpworld.registry.cli import allow_host_option


@click.command("up")
@click.option("--port", type=int, default=8765, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to bind. Beyond localhost, Host/Origin are checked (see --allow-host) and every world, "
                   "SWE and world-model endpoint needs 'Authorization: Bearer <registry token>'.")
@allow_host_option
@click.option("--db", default=None, envvar="MCPWORLD_REGISTRY_DB",
              help="Registry store as an SQLAlchemy URL (default: SQLite in $MCPWORLD_HOME).")
@click.option("--token", default=None, envvar="MCPWORLD_REGISTRY_TOKEN",
              help="Bearer token for registry writes (default: generated once and saved).")
@click.option("--only", multiple=True, help="Serve only these worlds (repeatable).")
@click.option("--health-interval", default=60.0, show_default=True, help="Seconds between health checks.")
@click.option("--max-episodes", default=4096, show_default=True, help="Cap on live episodes per world.")
@click.option("--interactive", is_flag=True,
              help="Add start_task/check_task to the training endpoints (/worlds/<name>/mcp) too. Without it people "
                   "play at /play/<name>/mcp, which `registry export` names for Claude Code, VS Code and Cursor.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Processes behind the one port: each holds its own episodes; requests follow their episode; a "
                   "worker that dies is restarted (only its own episodes are lost).")
@click.option("--no-swe", is_flag=True, help="Do not serve the SWE sandbox (its shipped instances).")
@click.option("--swt-url", envvar="MCPWORLD_SWT_URL", default=None,
              help="OpenAI-compatible endpoint(s) of an SWT model (comma-separated): serve the SWT world model.")
@click.option("--swr-url", envvar="MCPWORLD_SWR_URL", default=None,
              help="Endpoint(s) of an SWR model: serve the SWR world model (virtual test runner).")
@click.option("--ray", "ray_address", default=None, is_flag=False, flag_value="auto", metavar="[ADDRESS]",
              help="Serve the worlds from Ray actors spread over a cluster's nodes, each registered as a replica of "
                   "every world's record (this process keeps the registry). ADDRESS: a Ray address (default 'auto': "
                   "the cluster this machine is in), or 'local' for a one-node Ray here. Needs the ray extra.")
@click.option("--replicas", default=2, show_default=True, type=click.IntRange(1, 4096),
              help="With --ray: how many actors serve the worlds (each serves every world).")
@click.option("--replica-cpus", default=1.0, show_default=True, type=click.FloatRange(0.01),
              help="With --ray: CPUs each actor declares (Ray places no more actors on a node than its CPUs allow).")
def up_command(port: int, host: str, allow_hosts: tuple[str, ...], db: str | None, token: str | None,
               only: tuple[str, ...], health_interval: float, max_episodes: int, interactive: bool, workers: int,
               no_swe: bool, swt_url: str | None, swr_url: str | None, ray_address: str | None, replicas: int,
               replica_cpus: float) -> None:
    """Start everything: the registry, every installed world over HTTP, registered and health-checked.

    One port serves it all: /v0 (registry REST), /registry/mcp (registry as an MCP server),
    /worlds/<name>/mcp (each world), /swe/mcp (the SWE sandbox). Prints the URLs, the registry token and a
    Claude Desktop snippet. Ctrl-C stops everything.

    \b
    Example:
      mcpworld up
      mcpworld registry list          # in another terminal
      mcpworld up --host 0.0.0.0 --allow-host envhost   # a cluster: clients set MCPWORLD_REGISTRY_TOKEN
      mcpworld up --ray --replicas 8 --host 0.0.0.0 --allow-host head   # worlds on a Ray cluster (docs/scaling.md)
    """
    from mcpworld.app.up import (
        AlreadyRunning,
        Stack,
        acquire,
        banner,
        build_app,
        release,
    )
    from mcpworld.core import workers as procs
    from mcpworld.core.paths import forget_token, registry_token
    from mcpworld.core.serving import serve
    from mcpworld.registry.store import RegistryStore
    from mcpworld.worlds.episodes import EpisodeLimits
    from mcpworld.worlds.host import build_servers
    from mcpworld.worlds.loader import discover

    secret, is_new = registry_token(token)
    names = list(only) or [r.name for r in discover()]
    cluster = None
    if ray_address is not None:
        from mcpworld.app.cluster import Placement, import_ray

        if workers > 1:
            raise click.UsageError("--ray and --workers: with --ray the actors serve the worlds; scale with --replicas")
        try:
            import_ray()
        except RuntimeError as exc:
            raise click.ClickException(str(exc)) from None
        cluster = Placement(ray_address, names, secret, replicas=replicas, num_cpus=replica_cpus,
                            interactive=interactive, max_episodes=max_episodes,
                            poll_s=max(0.5, min(5.0, health_interval)))
    from mcpworld.swe.server import build_swe_server
    from mcpworld.swe.shell import BackendUnavailable
    from mcpworld.worldmodels.servers import WorldModelConfig, world_model_servers

    worker = procs.current()
    swe = None
    if not no_swe:
        try:
            swe = build_swe_server(token=secret)
        except BackendUnavailable as exc:  # no containment here: serve everything else, and say why
            click.echo(f"warning: not serving the SWE sandbox: {exc}\n(pass --no-swe to silence this)", err=True)
    limits = EpisodeLimits(max_episodes=max_episodes)

    def add_worlds(new: list[str]) -> list:
        return build_servers(new, limits, interactive=interactive, skip_broken=True, token=secret)

    stack = Stack(host=host, port=port, store=RegistryStore(db), token=secret,
                  worlds=build_servers(names, limits, interactive=interactive, skip_broken=not only, token=secret),
                  add_worlds=None if only or cluster else add_worlds,  # --only: exactly those; else new ones join
                  health_interval_s=health_interval, swe=swe,
                  world_models=world_model_servers(WorldModelConfig.from_env(swt_url=swt_url, swr_url=swr_url)),
                  allow_hosts=allow_hosts, interactive=interactive,
                  primary=worker is None or worker.index == 0,  # one process publishes and health-checks
                  cluster=cluster)
    stack.play = [stack.play_server(s) for s in stack.worlds]
    if worker is not None:  # one of `--workers N`: the supervisor holds the lock and printed the banner
        serve(lambda: build_app(stack), host, port, workers)
        return
    shown: list[bool] = []

    def ready() -> None:  # the port answers: now say so
        click.echo(banner(stack, is_new))
        shown.append(True)

    try:
        try:
            acquire(stack)
        except AlreadyRunning as exc:
            raise click.ClickException(str(exc)) from None
        if cluster is not None:
            try:
                cluster.connect()
            except Exception as exc:
                release()
                raise click.ClickException(f"cannot join the Ray cluster at {ray_address}: {exc}") from None
        try:
            serve(lambda: build_app(stack), host, port, workers, on_ready=ready)
        finally:
            release()
    finally:
        if is_new and not shown:  # never shown: the next `up` makes and shows a new one
            forget_token(secret)
