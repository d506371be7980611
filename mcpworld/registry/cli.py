"""`mcpworld registry ...` and `mcpworld up`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

registry_option = click.option("--registry", "registry", default=None,
                               help="Registry base URL (default: $MCPWORLD_REGISTRY, else the running `mcpworld up` "
                                    "whatever its --port, else http://127.0.0.1:8765).")
allow_host_option = click.option(
    "--allow-host", "allow_hosts", multiple=True, metavar="NAME",
    help="With a non-local --host: one more name clients use for this machine (e.g. its IP or a DNS alias), "
         "accepted in the Host header besides the bound host, this machine's hostname and localhost (repeatable; "
         "'*' accepts any). The first one names the server in registered URLs when bound to 0.0.0.0.")


def _send(registry: str | None, token: str | None, method: str, path: str, **kwargs: object) -> Any:
    """One authorised request through the registry client; its errors (unreachable, refused) as CLI errors."""
    from mcpworld.registry.client import RegistryClient, RegistryError

    try:
        with RegistryClient(registry, token=token) as client:
            return client.request(method, path, **kwargs)
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from None


def _get(registry: str | None, path: str, **params: object) -> dict:
    return _send(registry, None, "GET", path, params={k: v for k, v in params.items() if v is not None})


def all_items(registry: str | None, search: str | None = None, kind: str | None = None) -> list[dict]:
    """Every latest `{server, _meta}` entry, following cursors (the one paginated registry client)."""
    from mcpworld.registry.client import RegistryClient, RegistryError

    try:
        with RegistryClient(registry) as client:
            return list(client.servers(search=search, kind=kind))
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from None


def all_records(registry: str | None, search: str | None = None, kind: str | None = None) -> list[dict]:
    """Every latest server.json record."""
    return [item["server"] for item in all_items(registry, search, kind)]


@click.group("registry")
def registry_group() -> None:
    """Query and manage the registry of MCP servers."""


@registry_group.command("list")
@registry_option
@click.option("--search", default=None, help="Substring of name, description or tag.")
@click.option("--kind", type=click.Choice(["world", "swe", "world-model", "external"]), default=None)
@click.option("--json", "as_json", is_flag=True)
def registry_list(registry: str | None, search: str | None, kind: str | None, as_json: bool) -> None:
    """List registered servers with kind, health and counts.

    \b
    Example:
      mcpworld registry list --kind world
    """
    from rich.console import Console
    from rich.table import Table

    from mcpworld.registry.records import OFFICIAL, health_of, mcpworld_meta

    items = all_items(registry, search, kind)
    if as_json:
        click.echo(json.dumps(items, indent=2))
        return
    table = Table("name", "kind", "status", "health", "tools", "tasks", "url")
    for item in items:
        doc = item["server"]
        meta = mcpworld_meta(doc)
        health = health_of(item)
        status = health.get("status", "unknown")
        color = {"up": "green", "down": "red"}.get(status, "yellow")
        official = (item.get("_meta") or {}).get(OFFICIAL) or {}
        listed = official.get("status", "active")  # deprecated: still listed (the official API's rule), say so
        if official.get("statusMessage"):
            listed += f" ({official['statusMessage']})"
        table.add_row(doc["name"], meta.get("kind", "external"),
                      listed if listed == "active" else f"[yellow]{listed}[/yellow]", f"[{color}]{status}[/{color}]",
                      str(meta.get("tools", "")), str(meta.get("tasks", "")),
                      ", ".join(r["url"] for r in doc.get("remotes") or []))
    Console(width=200).print(table)


@registry_group.command("check")
@registry_option
@click.argument("names", nargs=-1)
@click.option("--token", envvar="MCPWORLD_REGISTRY_TOKEN", default=None, help="Registry token (writes need it).")
def registry_check(registry: str | None, names: tuple[str, ...], token: str | None) -> None:
    """Health-check servers now: connect, list tools, record status and latency.

    \b
    Example:
      mcpworld registry check                  # every server
      mcpworld registry check io.mcpworld/airline
    """
    from mcpworld.core.paths import registry_token

    answer = _send(registry, token or registry_token(None)[0], "POST", "/v0/health/check",
                   json=list(names) or None, timeout=120)
    down = 0
    for r in answer["results"]:
        down += r["status"] != "up"
        detail = f"{r['latency_ms']} ms, {r['tools']} tools" if r["status"] == "up" else r["error"]
        click.echo(f"{r['status']:<5} {r['name']}  {detail}")
    sys.exit(1 if down else 0)


@registry_group.command("publish")
@registry_option
@click.argument("server_json", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--token", envvar="MCPWORLD_REGISTRY_TOKEN", default=None)
def registry_publish(registry: str | None, server_json: Path, token: str | None) -> None:
    """Publish a server.json file (e.g. an external MCP server you want agents to find)."""
    from mcpworld.core.paths import registry_token

    token = token or registry_token(None)[0]
    try:
        doc = json.loads(server_json.read_text())
    except ValueError as exc:
        raise click.ClickException(f"{server_json}: not JSON: {exc}") from None
    from mcpworld.registry.client import RegistryClient, RegistryError

    try:
        with RegistryClient(registry, token=token) as client:
            client.request("POST", "/v0/publish", json=doc)
    except RegistryError as exc:
        if exc.status != 422:
            raise click.ClickException(str(exc)) from None
        body = exc.body if isinstance(exc.body, dict) else {}
        for e in body.get("errors") or [{"path": "$", "message": body.get("error") or str(exc)}]:
            click.echo(f"{server_json}: {e['path']}: {e['message']}", err=True)
        sys.exit(1)
    click.echo(f"published {doc['name']} {doc['version']}")


@registry_group.command("status")
@registry_option
@click.argument("name")
@click.argument("status", type=click.Choice(["active", "deprecated", "deleted"]))
@click.option("--version", "version", default=None, help="Only this version (default: every version).")
@click.option("-m", "--message", default=None, help="Why (shown to clients as statusMessage, at most 500 chars).")
@click.option("--token", envvar="MCPWORLD_REGISTRY_TOKEN", default=None)
def registry_status(registry: str | None, name: str, status: str, version: str | None, message: str | None,
                    token: str | None) -> None:
    """Deprecate, delete or reactivate a server (PATCH …/status, as in the official registry API).

    \b
    Examples:
      mcpworld registry status io.example/weather deprecated -m "use io.example/forecast"
      mcpworld registry status io.example/weather deleted --version 1.0.0
    """
    from urllib.parse import quote

    from mcpworld.core.paths import registry_token
    from mcpworld.registry.connect import full_name

    path = f"/v0.1/servers/{quote(full_name(name), safe='')}"
    path += f"/versions/{quote(version, safe='')}/status" if version else "/status"
    body = {"status": status, **({"statusMessage": message} if message else {})}
    answer = _send(registry, token or registry_token(None)[0], "PATCH", path, json=body)
    changed = answer["servers"] if "servers" in answer else [answer]
    for item in changed:
        click.echo(f"{status:<10} {item['server']['name']} {item['server']['version']}")


@registry_group.command("export")
@registry_option
@click.option("--format", "fmt", type=click.Choice(["claude-desktop", "claude-code", "vscode", "cursor", "inspector"]),
              required=True, help="The client: its config file's shape (inspector: MCP Inspector's --config file).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Write here (default: stdout). Existing entries of other servers in the file are kept.")
@click.argument("names", nargs=-1)
def registry_export(registry: str | None, fmt: str, output: Path | None, names: tuple[str, ...]) -> None:
    """Write an MCP client config naming the registered servers (all, or NAMES).

    \b
    Examples:
      mcpworld registry export --format claude-code -o .mcp.json
      mcpworld registry export --format vscode -o .vscode/mcp.json airline shop
    """
    from mcpworld.registry.connect import full_name
    from mcpworld.registry.export import entry_names, export, read_config

    docs = all_records(registry)
    if names:
        wanted = {full_name(n) for n in names}
        missing = wanted - {d["name"] for d in docs}
        if missing:
            raise click.ClickException(f"not registered: {', '.join(sorted(missing))}")
        docs = [d for d in docs if d["name"] in wanted]
    try:
        config = export(docs, fmt)  # type: ignore[arg-type]
    except ValueError as exc:
        raise click.ClickException(f"cannot export: {exc}") from None
    if output is None:
        click.echo(json.dumps(config, indent=2))
        return
    key = "servers" if fmt == "vscode" else "mcpServers"
    had_comments = False
    if output.exists():
        original = output.read_text()
        try:
            existing, had_comments = read_config(original)
        except ValueError as exc:
            raise click.ClickException(f"{output} exists but is not JSON ({exc}); fix or remove it first") from None
        if not isinstance(existing, dict) or not isinstance(existing.get(key, {}), dict):
            raise click.ClickException(f"{output} is not a {fmt} config (no {key!r} object); fix or remove it first")
        existing.setdefault(key, {}).update(config[key])
        config = {**config, **existing}
        if had_comments:
            output.with_name(output.name + ".bak").write_text(original)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(config, indent=2) + "\n")
    click.echo(f"wrote {len(docs)} server(s) to {output}: {', '.join(entry_names(docs))}")
    if had_comments:
        click.echo(f"note: the comments in {output} could not be kept (it is written as plain JSON); the file as it "
                   f"was is {output.name}.bak")


@registry_group.command("serve")
@click.option("--port", type=int, default=8765, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to bind. Beyond localhost, Host/Origin headers are checked (see --allow-host).")
@allow_host_option
@click.option("--db", default=None, envvar="MCPWORLD_REGISTRY_DB",
              help="SQLAlchemy URL, e.g. postgresql://host/registry when several hosts share one registry.")
@click.option("--token", default=None, envvar="MCPWORLD_REGISTRY_TOKEN", help="Bearer token for writes.")
@click.option("--cors-origin", "cors_origins", multiple=True, metavar="ORIGIN",
              help="A browser origin (e.g. http://localhost:5173) allowed to call the REST API; repeatable, '*' for "
                   "any (default: $MCPWORLD_CORS_ORIGINS, comma-separated).")
@click.option("--anonymous", is_flag=True, envvar="MCPWORLD_REGISTRY_ANONYMOUS",
              help="Answer POST /v0/auth/none (`mcp-publisher login none`) with short-lived tokens that may publish "
                   "only names under io.modelcontextprotocol.anonymous/.")
def registry_serve(port: int, host: str, allow_hosts: tuple[str, ...], db: str | None, token: str | None,
                   cors_origins: tuple[str, ...], anonymous: bool) -> None:
    """Serve only the registry (REST /v0.1 and /v0, and /registry/mcp), with no worlds: for a shared registry.

    \b
    Example:
      mcpworld registry serve --port 9000 --db postgresql://db.internal/mcpworld
      mcpworld registry serve --cors-origin http://localhost:5173      # a browser UI on that origin
    """
    import uvicorn

    from mcpworld.core.paths import registry_token
    from mcpworld.registry.api import create_app
    from mcpworld.registry.store import RegistryStore

    secret, is_new = registry_token(token)
    store = RegistryStore(db)
    click.echo(f"registry at http://{host}:{port}/v0.1/servers ({store.url})", err=True)
    if is_new:
        click.echo(f"registry token (shown once): {secret}", err=True)
    app = create_app(store, secret, host=host, allow_hosts=allow_hosts, cors_origins=list(cors_origins) or None,
                     anonymous=anonymous or None)
    uvicorn.run(app, host=host, port=port, log_level="warning")


# `mcpworld serve nemo-gym`: here, so that its --help imports nothing of the server (registry/nemo_gym.py)
@click.command("nemo-gym")
@click.option("--port", type=int, default=8000, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to bind. Beyond localhost, Host/Origin are checked and the registry token is needed.")
@click.option("--only", multiple=True, help="Serve only these worlds (repeatable). Default: every installed world.")
@click.option("--name", default="mcpworld", show_default=True,
              help="The server's name in your NeMo Gym config; the session cookie is MCPWorldResourcesServer___NAME.")
@click.option("--ttl", default=1800.0, show_default=True, help="Seconds an idle episode lives before eviction.")
@click.option("--max-episodes", default=4096, show_default=True, help="Cap on live episodes per world.")
@click.option("--write-dataset", "dataset", type=click.Path(dir_okay=False), default=None,
              help="Write one NeMo Gym dataset row per task (JSONL) to this file (- for stdout) and exit.")
@click.option("--split", type=click.Choice(["train", "test"]), default=None, help="With --write-dataset: one split.")
def serve_nemo_gym(port: int, host: str, only: tuple[str, ...], name: str, ttl: float, max_episodes: int,
                   dataset: str | None, split: str | None) -> None:
    """Serve worlds as a NeMo Gym resources server (what NeMo RL trains through).

    \b
    A rollout: POST /seed_session with the dataset row (it names the world and task, and
    sets the session cookie), POST /<tool> with a tool's arguments, POST /verify with the row
    plus the rollout's Responses API `response`: the reply has `reward` (1 passed, 0 failed,
    -1 for an unknown tool or malformed arguments: docs/training.md, "Rewards").

    \b
    Examples:
      mcpworld serve nemo-gym --only airline --write-dataset data/airline.jsonl
      mcpworld serve nemo-gym --only airline --port 8000
      curl -c jar -b jar -X POST localhost:8000/seed_session \\
           -d '{"verifier_metadata": {"world": "airline", "task": "cancel-within-24h"}}'
      curl -c jar -b jar -X POST localhost:8000/get_reservation -d '{"reservation_id": "ZFA04Y"}'
    See docs/training.md, "NeMo Gym", for the NeMo Gym config that points at it.
    """
    from pathlib import Path

    from mcpworld.core.serving import serve
    from mcpworld.registry.nemo_gym import GymWorlds, cookie_name, nemo_gym_app
    from mcpworld.worlds.episodes import EpisodeLimits
    from mcpworld.worlds.host import build_servers
    from mcpworld.worlds.loader import WorldLoadError, discover

    names = list(only) or [r.name for r in discover()]
    try:
        servers = build_servers(names, EpisodeLimits(ttl, max_episodes), skip_broken=not only)
    except WorldLoadError as exc:
        raise click.ClickException(str(exc)) from None
    if not servers:
        raise click.ClickException("no world to serve: install one, or check the names given to --only")
    gym = GymWorlds(servers, name)
    if gym.shadowed:
        click.echo(f"warning: tools {', '.join(gym.shadowed)} share a name with a route of this server and cannot "
                   "be called here; rename them in their worlds", err=True)
    if dataset is not None:
        rows = list(gym.dataset_rows(split))
        text = "".join(json.dumps(r) + "\n" for r in rows)
        if dataset == "-":
            click.echo(text, nl=False)
            return
        Path(dataset).parent.mkdir(parents=True, exist_ok=True)
        Path(dataset).write_text(text)
        click.echo(f"wrote {len(rows)} row(s) for {', '.join(s.runtime.world.name for s in servers)} to {dataset}",
                   err=True)
        return
    click.echo(f"NeMo Gym resources server for {', '.join(s.runtime.world.name for s in servers)} at "
               f"http://{host}:{port} (cookie {cookie_name(name)})", err=True)
    serve(lambda: nemo_gym_app(servers, host, name=name), host, port)
