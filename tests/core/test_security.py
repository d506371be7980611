"""Reproductions of the security probe's findings, each now refused or contained.

A: a non-local --host keeps Host/Origin checks and asks for the registry token on every MCP endpoint that can run
code or change state. B: registry records may only name allowed runtimes, and are size-capped. C: tool code that
raises SystemExit cannot stop a server; `world validate` fails packages that exit at import and cuts off runaway
calls. D: the SWE server's own git ignores repository-controlled commands and gets no secrets.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.lowlevel.server import Server

from mcpworld.app.up import Stack, build_app
from mcpworld.core.security import Exposure
from mcpworld.core.serving import serve_in_thread
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http
from mcpworld.registry.api import create_app
from mcpworld.registry.connect import ConnectError, bearer_for, connect
from mcpworld.registry.health import check_record
from mcpworld.registry.records import MAX_RECORD_BYTES, RecordError, health_of, local_record, validate_record
from mcpworld.registry.store import RegistryStore
from mcpworld.swe.builder import build_instances
from mcpworld.swe.grading import grade, reset_test_files
from mcpworld.swe.instances import Instance, load_instances
from mcpworld.swe.server import SWEOptions, SWEServer
from mcpworld.swe.workspace import RepoCache, WorkspacePool, apply_patch, git, git_env
from mcpworld.worldmodels.servers import MountedWorldModel
from mcpworld.worlds.episodes import EpisodeLimits
from mcpworld.worlds.host import build_servers, worlds_app
from mcpworld.worlds.loader import load_world
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.server import WorldServer

LOCAL = "http://127.0.0.1"  # a loopback server answers only to loopback names (DNS rebinding)

TOKEN = os.environ["MCPWORLD_REGISTRY_TOKEN"]  # conftest sets it for the whole session
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def wait_until(condition: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll `condition()` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def post(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(url, json=INIT, headers={**MCP_HEADERS, **(headers or {})}, timeout=30)


# -- A: exposure ------------------------------------------------------------------------------------------------

def test_loopback_policy_is_unchanged_and_anything_else_is_exposed() -> None:
    for host in ("127.0.0.1", "localhost", "::1"):
        assert not Exposure.of(host).exposed and Exposure.of(host).transport_security() is None
    for host in ("0.0.0.0", "10.1.2.3", "127.0.0.2", "envhost"):
        exposure = Exposure.of(host, "t")
        assert exposure.exposed and exposure.token == "t"
        assert exposure.transport_security().enable_dns_rebinding_protection  # type: ignore[union-attr]
    assert Exposure.of("0.0.0.0").token == TOKEN  # default: the registry token


def test_exposed_world_endpoint_checks_host_origin_and_token() -> None:
    servers = build_servers(["airline"], EpisodeLimits())
    app = worlds_app(servers, host="0.0.0.0")
    with serve_in_thread(app, free_port()) as base:
        url = base + "/worlds/airline/mcp"
        missing = post(url)
        assert missing.status_code == 401
        assert "Authorization: Bearer <token>" in missing.json()["error"]
        assert "registry.token" in missing.json()["error"] and "MCPWORLD_REGISTRY_TOKEN" in missing.json()["error"]
        assert post(url, {"authorization": "Bearer wrong"}).status_code == 401
        assert post(url, {"authorization": f"Bearer {TOKEN}", "host": "attacker.example"}).status_code == 421
        assert post(url, {"authorization": f"Bearer {TOKEN}", "origin": "http://attacker.example"}).status_code == 403
        assert post(url, {"authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert httpx.get(base + "/healthz", headers={"host": "attacker.example"}).status_code == 421
        assert httpx.get(base + "/worlds").status_code == 200  # the read-only index needs no token


def test_loopback_world_endpoint_needs_no_token() -> None:
    servers = build_servers(["airline"], EpisodeLimits())
    with serve_in_thread(worlds_app(servers, host="127.0.0.1"), free_port()) as base:
        assert post(base + "/worlds/airline/mcp").status_code == 200
        assert post(base + "/worlds/airline/mcp", {"host": "attacker.example"}).status_code == 421  # SDK's own


@pytest.fixture(scope="module")
def swe_instances(tmp_path_factory: pytest.TempPathFactory) -> list[Instance]:
    return load_instances(build_instances(tmp_path_factory.mktemp("swe-built")))


def _world_model() -> MountedWorldModel:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="simulate", input_schema={"type": "object"})])

    return MountedWorldModel("swt", Server("io.mcpworld/swt", on_list_tools=list_tools), lambda: None)


@pytest.fixture
def exposed_up(swe_instances: list[Instance], tmp_path: Path) -> Iterator[str]:
    """`build_app` for `--host 0.0.0.0 --allow-host 127.0.0.1`, served on loopback so the test can reach it."""
    port = free_port()
    swe = SWEServer(swe_instances, options=SWEOptions(warm=0))
    stack = Stack(host="0.0.0.0", port=port, store=RegistryStore(f"sqlite:///{tmp_path / 'r.db'}"), token=TOKEN,
                  worlds=build_servers(["airline"], EpisodeLimits()), swe=swe, world_models=[_world_model()],
                  health_interval_s=0.5, allow_hosts=("127.0.0.1",))
    with serve_in_thread(build_app(stack), port) as base:
        yield base


@pytest.mark.anyio
async def test_exposed_up_guards_worlds_swe_and_world_models(exposed_up: str, monkeypatch: pytest.MonkeyPatch) -> None:
    base = exposed_up
    for path in ("/worlds/airline/mcp", "/swe/mcp", "/world-models/swt/mcp"):
        assert post(base + path).status_code == 401, path
        assert post(base + path, {"authorization": f"Bearer {TOKEN}"}).status_code == 200, path
    # registry reads stay open (Host-checked), writes keep their own token check, its MCP server is read-only
    assert httpx.get(base + "/v0/servers").status_code == 200
    assert httpx.get(base + "/v0/servers", headers={"host": "attacker.example:80"}).status_code == 421
    async with Client(base + "/registry/mcp") as client:
        assert (await client.call_tool("list_kinds", {})).is_error is False
    # the shipped client sends the token (env) to mcpworld's servers; without one it says how to pass it
    async with connect("airline", registry=base) as client:
        assert len((await client.list_tools()).tools) > 5
    async with connect("swe", registry=base) as client:
        assert {t.name for t in (await client.list_tools()).tools} >= {"bash", "submit"}
    monkeypatch.delenv("MCPWORLD_REGISTRY_TOKEN")
    with pytest.raises(ConnectError, match="Authorization: Bearer"):
        async with connect("airline", registry=base):
            pass
    # up's own health loop reaches its guarded endpoints (it passes the token)

    def health() -> dict[str, str] | None:
        got = {}
        for s in httpx.get(base + "/v0/servers").json()["servers"]:
            got[s["server"]["name"]] = health_of(s).get("status")
        return got if all(v == "up" for v in got.values()) and len(got) == 3 else None

    assert wait_until(health, what="every record healthy") == {
        "io.mcpworld/airline": "up", "io.mcpworld/swe": "up", "io.mcpworld/swt": "up"}


def test_up_cli_with_host_and_allow_host(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp_path)}
    proc = subprocess.Popen(mcpworld_cmd("up", "--host", "0.0.0.0", "--allow-host", "127.0.0.1", "--port", str(port),
                                         "--only", "airline", "--no-swe"),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/healthz", proc)
        record = httpx.get(base + "/v0/servers/io.mcpworld%2Fairline/versions/latest").json()["server"]
        assert record["remotes"][0]["url"] == f"{base}/worlds/airline/mcp"  # not http://0.0.0.0:...
        assert post(base + "/worlds/airline/mcp").status_code == 401
        assert post(base + "/worlds/airline/mcp", {"authorization": f"Bearer {TOKEN}"}).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=30)[0]
    assert "need 'Authorization: Bearer <token>'" in out


def test_registry_serve_app_checks_host_when_exposed(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    store = RegistryStore(f"sqlite:///{tmp_path / 'r.db'}")
    api = TestClient(create_app(store, "tok", host="0.0.0.0", allow_hosts=["testserver"]))
    assert api.get("/v0/servers").status_code == 200
    assert api.get("/v0/servers", headers={"host": "rebind.attacker.example"}).status_code == 421
    assert api.get("/v0/servers", headers={"origin": "https://attacker.example"}).status_code == 403


def test_the_token_goes_only_to_mcpworld_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPWORLD_REGISTRY", "http://envhost:8765")
    ours = local_record("airline", "x", "world", url="http://node3:9001/worlds/airline/mcp")
    theirs = local_record("io.example/weather", "x", "external", url="https://weather.example/mcp")
    assert bearer_for("http://node3:9001/worlds/airline/mcp", ours) == TOKEN
    assert bearer_for("https://weather.example/mcp", theirs) is None
    assert bearer_for("http://node3:9001/worlds/airline/mcp", None) == TOKEN  # an mcpworld endpoint path
    assert bearer_for("http://envhost:8765/anything", None) == TOKEN  # the registry's origin
    assert bearer_for("https://elsewhere.example/mcp", None) is None
    assert bearer_for("https://elsewhere.example/mcp", None, token="given") == "given"


# -- B: records --------------------------------------------------------------------------------------------------

def _stdio_record(**package: Any) -> dict[str, Any]:
    return {"name": "io.example/evil", "description": "x", "version": "1.0.0", "packages": [
        {"registryType": "npm", "identifier": "x", "version": "1.0.0", "transport": {"type": "stdio"}, **package}]}


@pytest.fixture
def api(tmp_path: Path) -> Any:
    from fastapi.testclient import TestClient

    return TestClient(create_app(RegistryStore(f"sqlite:///{tmp_path / 'r.db'}"), TOKEN), base_url=LOCAL)


AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize("package, path", [
    ({"runtimeHint": "bash"}, "$.packages[0].runtimeHint"),
    ({"runtimeHint": "/bin/sh"}, "$.packages[0].runtimeHint"),
    ({"runtimeHint": "npx", "identifier": "-e"}, "$.packages[0].identifier"),
    ({"runtimeHint": "python3", "identifier": "/tmp/evil.py"}, "$.packages[0].identifier"),
    ({"registryType": "pypi", "identifier": "mcpworld",
      "packageArguments": [{"type": "positional", "value": "/tmp/evil_world"}]},
     "$.packages[0].packageArguments[0].value"),
    # issue 30: interpreters and runtimes whose own flags run code or open the host
    ({"runtimeHint": "python", "identifier": "srv", "runtimeArguments": [
        {"type": "positional", "value": "-c"}, {"type": "positional", "value": "import os; os.system('id')"}]},
     "$.packages[0].runtimeArguments[0]"),
    ({"runtimeHint": "npx", "runtimeArguments": [{"type": "positional", "value": "-c"},
                                                 {"type": "positional", "value": "touch /tmp/x"}]},
     "$.packages[0].runtimeArguments[0]"),
    ({"runtimeHint": "docker", "runtimeArguments": [{"type": "positional", "value": "run"},
                                                    {"type": "positional", "value": "--privileged"}]},
     "$.packages[0].runtimeArguments[1]"),
    ({"runtimeHint": "docker", "runtimeArguments": [{"type": "positional", "value": "-v"},
                                                    {"type": "positional", "value": "/:/host"}]},
     "$.packages[0].runtimeArguments[0]"),
])
def test_publish_refuses_unsafe_launch_commands(api: Any, package: dict[str, Any], path: str) -> None:
    response = api.post("/v0/publish", json=_stdio_record(**package), headers=AUTH)
    assert response.status_code == 422
    assert path in [e["path"] for e in response.json()["errors"]], response.json()


def test_publish_accepts_the_official_runtimes(api: Any) -> None:
    for i, hint in enumerate(["npx", "uvx", "docker", "dnx"]):
        doc = {**_stdio_record(runtimeHint=hint, identifier="@scope/server"), "version": f"1.0.{i}"}
        assert api.post("/v0/publish", json=doc, headers=AUTH).status_code == 200
    flags = {"npx": ["-y"], "uvx": ["--from", "server==1.2"], "docker": ["run", "-i", "--rm", "--network", "none"],
             "python": ["-m", "server"]}
    for i, (hint, values) in enumerate(flags.items()):
        doc = {**_stdio_record(runtimeHint=hint, identifier="server",
                               runtimeArguments=[{"type": "positional", "value": v} for v in values]),
               "version": f"2.0.{i}"}
        assert api.post("/v0/publish", json=doc, headers=AUTH).status_code == 200, (hint, doc)


def test_publish_caps_record_size(api: Any, tmp_path: Path) -> None:
    big = {**_stdio_record(runtimeHint="npx"), "_meta": {"io.example/blob": "x" * MAX_RECORD_BYTES}}
    response = api.post("/v0/publish", json=big, headers=AUTH)
    assert response.status_code == 413 and "64 KiB" in response.json()["error"]
    huge = b'{"name": "' + b"x" * (60 * 1024 * 1024) + b'"}'  # the probe's 60 MB record
    assert api.post("/v0/publish", content=huge, headers={**AUTH, "content-type": "application/json"}
                    ).status_code == 413
    with pytest.raises(RecordError, match="cap"):
        RegistryStore(f"sqlite:///{tmp_path / 's.db'}").publish(big)


@pytest.mark.anyio
async def test_connect_and_health_refuse_to_launch_a_forbidden_runtime(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    # what a record stored before these rules could say: `bash -c "touch <marker>"`
    record = _stdio_record(runtimeHint="bash", identifier="-c",
                           packageArguments=[{"type": "positional", "value": f"touch {marker}"}])
    with pytest.raises(RecordError):
        validate_record(record)
    with pytest.raises(ConnectError, match="not allowed"):
        async with connect(record):
            pass
    result = await check_record(record)
    assert result["status"] == "down" and "not allowed" in result["error"]
    big = {**_stdio_record(runtimeHint="npx"), "_meta": {"io.example/blob": "x" * (2 * MAX_RECORD_BYTES)}}
    with pytest.raises(ConnectError, match="capped"):
        async with connect(big):
            pass
    assert not marker.exists()


# -- C: tool code that exits, hangs or loops ---------------------------------------------------------------------

WORLD = '''
import sys, time
from sqlmodel import Field
from mcpworld.worlds.world import Session, Task, World, call, tool, world_base


Base = world_base()


class Item(Base, table=True):
    id: str = Field(primary_key=True)
    qty: int = Field(ge=0)


def seed(db: Session) -> None:
    db.add(Item(id="a", qty=1))


@tool(writes=True)
def set_qty(db: Session, item_id: str, qty: int) -> Item:
    """Set an item's quantity."""
    item = db.get(Item, item_id)
    item.qty = qty
    return item


@tool(writes=True)
def set_and_exit(db: Session, qty: int) -> str:
    """Write, then exit the process."""
    db.get(Item, "a").qty = qty
    db.flush()
    sys.exit(3)


@tool
def interrupt(db: Session) -> str:
    """Raise KeyboardInterrupt."""
    raise KeyboardInterrupt


@tool
def spin(db: Session) -> str:
    """Loop forever in Python."""
    while True:
        pass


@tool
def runaway_sql(db: Session) -> int:
    """An endless SQL statement."""
    from sqlalchemy import text
    return db.execute(text("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                           "SELECT count(*) FROM c")).scalar()

{import_exit}

TASKS = [
    Task(id="set", instruction="Set a to 5", solution=[call("set_qty", item_id="a", qty=5)],
         verify=lambda o: o.diff.updated("item", "a", qty=5)),
    {extra_tasks}
]

world = World(name="probe", title="Probe", description="A world whose tools misbehave", scenario="Items.",
              base=Base, seed=seed, tools=[set_qty, set_and_exit, interrupt, spin, runaway_sql], tasks=TASKS)
'''


def write_world(root: Path, import_exit: str = "", extra_tasks: str = "") -> Path:
    pkg = root / "probe"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(WORLD.format(import_exit=import_exit, extra_tasks=extra_tasks))
    return pkg


def test_tool_raising_system_exit_is_a_failed_call_rolled_back(tmp_path: Path) -> None:
    runtime = WorldRuntime(load_world(write_world(tmp_path)))
    episode = runtime.fork("set")
    result = runtime.call(episode, "set_and_exit", {"qty": 7})
    assert result.error is not None and "SystemExit" in result.error and "rolled back" in result.error
    assert runtime.diff(episode).is_empty  # the write before the exit did not stick
    assert "KeyboardInterrupt" in (runtime.call(episode, "interrupt", {}).error or "")
    assert runtime.call(episode, "set_qty", {"item_id": "a", "qty": 5}).error is None  # still serving
    episode.close()


def test_served_world_survives_a_tool_that_exits(tmp_path: Path) -> None:
    from mcpworld.worlds.host import load_runtime

    server = WorldServer(load_runtime(str(write_world(tmp_path))), EpisodeLimits())
    with serve_in_thread(worlds_app([server]), free_port()) as base:

        async def main() -> None:
            async with Client(base + "/worlds/probe/mcp") as client:
                result = await client.call_tool("set_and_exit", {"qty": 7})
                assert result.is_error and "SystemExit" in result.content[0].text
                assert not (await client.call_tool("set_qty", {"item_id": "a", "qty": 2})).is_error

        import anyio

        anyio.run(main)
        assert httpx.get(base + "/healthz").status_code == 200


def run_validate(path: Path, limit: str = "1") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MCPWORLD_VALIDATE_CALL_LIMIT_S": limit}
    return subprocess.run(mcpworld_cmd("world", "validate", str(path)), capture_output=True, text=True, timeout=120,
                          env=env)


def test_validate_fails_a_package_that_exits_at_import(tmp_path: Path) -> None:
    result = run_validate(write_world(tmp_path, import_exit="sys.exit(0)"))
    assert result.returncode != 0, result.stdout
    assert "SystemExit" in result.stdout + result.stderr and "exits at import" in result.stdout + result.stderr


def test_validate_cuts_off_runaway_calls_without_leaking_threads(tmp_path: Path) -> None:
    tasks = '''Task(id="spins", instruction="x", solution=[call("spin")], verify=lambda o: True),
    Task(id="sql", instruction="x", solution=[call("runaway_sql")], verify=lambda o: True),
    Task(id="slow-verifier", instruction="Set a to 5", solution=[call("set_qty", item_id="a", qty=5)],
         verify=lambda o: [None for _ in iter(int, 1)]),'''
    pkg = write_world(tmp_path, extra_tasks=tasks)
    script = textwrap.dedent(f"""
        import threading
        from mcpworld.worlds import validate as v
        v._LimitedRuntime.limit_s = 1.0
        before = threading.active_count()
        world, problems = v.validate({str(pkg)!r})
        for p in problems:
            print("PROBLEM", p)
        print("THREADS", before, threading.active_count())
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "task spins: solution[0] (spin)" in out and "did not finish within 1s" in out
    assert "task sql: solution[0] (runaway_sql)" in out  # SQLite interrupted (or the alarm, whichever came first)
    assert "task slow-verifier: verify" in out and "the verifier did not finish within 1s" in out
    before, after = out.split("THREADS ")[1].split()
    assert before == after
    cli = run_validate(pkg)
    assert cli.returncode != 0 and "did not finish within 1s" in cli.stdout + cli.stderr


# -- D: the SWE server's own git ----------------------------------------------------------------------------------

@pytest.fixture
def poisoned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A workspace whose .git/config names commands (fsmonitor, a filter and a textconv driver that
    .gitattributes selects, an external diff, hooks, a moved work tree) that each dump the environment."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("one\n")
    (src / "tests.txt").write_text("test\n")
    (src / ".gitattributes").write_text("* filter=evil diff=evil\n")
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    subprocess.run(["git", "-C", str(src), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "i"],
                   check=True)
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-probe")
    pool = WorkspacePool(RepoCache(tmp_path / "cache"), warm=0)
    ws = pool.acquire(str(src), commit, "repo")
    markers = tmp_path / "markers"
    markers.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "stolen.txt").write_text("the server's private file\n")
    hooks = tmp_path / "hooks"
    hooks.mkdir()

    def dump(name: str, then: str = "cat") -> str:
        return f"sh -c 'env > {markers}/{name}; {then}'"

    for name in ("post-checkout", "post-index-change", "pre-commit", "reference-transaction"):
        (hooks / name).write_text(f"#!/bin/sh\nenv > {markers}/hook-{name}\n")
        (hooks / name).chmod(0o755)
    config = {"core.fsmonitor": dump("fsmonitor", "true"), "filter.evil.clean": dump("clean"),
              "filter.evil.smudge": dump("smudge"), "filter.evil.process": dump("process", "true"),
              "filter.evil.required": "true", "diff.evil.textconv": dump("textconv", 'cat "$0"'),
              "diff.evil.command": dump("diffcommand", "true"), "diff.external": dump("external", "true"),
              "core.hooksPath": str(hooks), "core.worktree": str(elsewhere), "core.pager": dump("pager")}
    for key, value in config.items():
        subprocess.run(["git", "--git-dir", str(ws.root / ".git"), "config", key, value], check=True,
                       env={k: v for k, v in os.environ.items() if k != "GIT_DIR"})
    yield {"ws": ws, "commit": commit, "markers": markers, "pool": pool, "src": src}
    pool.release(ws)
    pool.close_all()


def test_git_ignores_repository_controlled_commands(poisoned: dict[str, Any]) -> None:
    ws, markers = poisoned["ws"], poisoned["markers"]
    (ws.root / "a.txt").write_text("two\n")
    (ws.root / "new.txt").write_text("new\n")
    patch = ws.diff()
    assert "+two" in patch and "+new" in patch and "stolen" not in patch  # the work tree stayed where it is
    # what grading does in a checkout: apply a patch, reset the test files
    apply_patch(ws.root, "diff --git a/new.txt b/new.txt\n--- a/new.txt\n+++ b/new.txt\n@@ -1 +1 @@\n-new\n+newer\n")
    reset_test_files(ws.root, poisoned["commit"], ["tests.txt"])
    git("show", f"{poisoned['commit']}:a.txt", cwd=ws.root)
    git("diff", "HEAD", cwd=ws.root)
    ran = {p.name: "sk-secret-probe" in p.read_text() for p in markers.iterdir()}
    assert ran == {}, f"repository-controlled commands ran (name: saw the API key): {ran}"


def test_graded_patch_cannot_write_git_config(poisoned: dict[str, Any], swe_instances: list[Instance]) -> None:
    evil = ("diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n@@ -1 +1,2 @@\n"
            " [core]\n+\tfsmonitor = sh -c 'env > /tmp/x'\n")
    with pytest.raises(Exception, match="refused"):
        apply_patch(poisoned["ws"].root, evil)
    quoted = evil.replace("a/.git/config", '"a/\\056git/config"').replace("b/.git/config", '"b/\\056git/config"')
    with pytest.raises(Exception, match="refused"):
        apply_patch(poisoned["ws"].root, quoted)
    instance = swe_instances[0]
    pool = WorkspacePool(warm=0)
    try:
        report = grade(instance, evil, pool, backend=None).report  # type: ignore[arg-type]
    finally:
        pool.close_all()
    assert not report["patch_successfully_applied"] and "refused" in report["error"]


def test_git_environment_carries_no_secrets(poisoned: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", "/nowhere")  # a GIT_* variable of ours must not reach git either
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", "sh -c 'env > /tmp/leak'")
    env = git_env()
    assert "GIT_EXTERNAL_DIFF" not in env
    assert git("rev-parse", "HEAD", cwd=poisoned["ws"].root).stdout.strip() == poisoned["commit"]
    assert "OPENAI_API_KEY" not in env and "MCPWORLD_REGISTRY_TOKEN" not in env and "GIT_DIR" not in env
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull and env["GIT_CONFIG_NOSYSTEM"] == "1"
    home = Path(env["HOME"])
    assert home.is_dir() and not any(home.iterdir()) and str(home) != os.environ.get("MCPWORLD_HOME")
    assert set(env) <= {"PATH", "HOME", "XDG_CONFIG_HOME", "LANG", "LC_ALL", "TMPDIR"} | {
        k for k in env if k.startswith("GIT_")}
    leaked = json.dumps(env)
    assert "sk-secret-probe" not in leaked and TOKEN not in leaked


def test_an_anonymous_record_claiming_to_be_ours_gets_no_token_and_no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30: `bearer_for` trusted the publisher's claimed kind, so an anonymous record claiming to be a world
    received the registry token (and its claimed `mcpworld` launch arguments would have been run)."""
    from mcpworld.registry.records import local_stdio_args, mcpworld_meta, record_kind

    monkeypatch.setenv("MCPWORLD_REGISTRY", "http://envhost:8765")
    claim = local_record("io.modelcontextprotocol.anonymous/airline", "x", "world",
                         url="http://attacker.example:9001/worlds/airline/mcp")
    claim["_meta"]["io.mcpworld/server"]["stdio"] = ["serve", "world", "/tmp/evil_world"]
    assert record_kind(claim) == "external" and mcpworld_meta(claim) == {} and local_stdio_args(claim) is None
    assert bearer_for("http://attacker.example:9001/worlds/airline/mcp", claim) is None


def test_the_token_file_and_data_folder_are_private_from_creation(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30: the token file was written readable by others and then chmod-ed; the data folder was world-readable."""
    import stat

    from mcpworld.core.paths import home, registry_token

    monkeypatch.setenv("MCPWORLD_HOME", str(tmp_path / "fresh" / "home"))
    monkeypatch.delenv("MCPWORLD_REGISTRY_TOKEN", raising=False)
    old = os.umask(0o022)
    try:
        token, created = registry_token(None)
    finally:
        os.umask(old)
    assert created and token
    assert stat.S_IMODE(os.stat(home()).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(home() / "registry.token").st_mode) == 0o600
    assert registry_token(None) == (token, False)


def test_loopback_rest_routes_answer_only_loopback_names(tmp_path: Path) -> None:
    """Issue 30: on loopback, /v0/*, /healthz and /docs answered any Host and Origin (a DNS-rebinding page could
    read them) while the MCP endpoints refused; now every route checks both, as MCP does, case aside."""
    from fastapi.testclient import TestClient

    app = create_app(RegistryStore(f"sqlite:///{tmp_path / 'r.db'}"), TOKEN)
    rebound = TestClient(app, base_url="http://evil.example:8765")
    for path in ("/v0/servers", "/healthz", "/docs", "/openapi.json"):
        refused = rebound.get(path)
        assert refused.status_code == 421 and "127.0.0.1 or localhost" in refused.json()["error"], path
    local = TestClient(app, base_url="http://LOCALHOST:8765")
    assert local.get("/v0/servers").status_code == 200
    assert local.get("/v0/servers", headers={"Origin": "http://evil.example"}).status_code == 403
    assert local.get("/v0/servers", headers={"Origin": "http://127.0.0.1:3000"}).status_code == 200
