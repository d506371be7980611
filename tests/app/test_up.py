"""End to end: `mcpworld up` as a real process, reached over REST, the registry's MCP server and connect()."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client

from mcpworld.core.contain import wait_until
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http
from mcpworld.registry.connect import connect
from mcpworld.registry.records import health_of

TOKEN = os.environ["MCPWORLD_REGISTRY_TOKEN"]  # set by conftest: unlocks reference solutions


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    home = tmp_path_factory.mktemp("up-home")
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(home), "MCPWORLD_REGISTRY": f"http://127.0.0.1:{port}"}
    proc = subprocess.Popen(mcpworld_cmd("up", "--port", str(port), "--health-interval", "1"), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/healthz", proc)
    yield {"base": base, "env": env, "proc": proc, "home": home, "port": port}
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


def test_lists_every_world_over_rest(up: dict) -> None:
    servers = httpx.get(up["base"] + "/v0/servers").json()["servers"]
    names = {s["server"]["name"] for s in servers}
    catalog = {w["name"] for w in httpx.get(up["base"] + "/worlds").json()["worlds"]}
    assert {f"io.mcpworld/{n}" for n in catalog} | {"io.mcpworld/swe"} == names
    assert "io.mcpworld/airline" in names
    kinds = {s["server"]["name"]: s["server"]["_meta"]["io.mcpworld/server"]["kind"] for s in servers}
    assert kinds["io.mcpworld/swe"] == "swe" and kinds["io.mcpworld/airline"] == "world"


@pytest.mark.anyio
async def test_registry_mcp_server_finds_worlds(up: dict) -> None:
    async with Client(up["base"] + "/registry/mcp") as client:
        result = await client.call_tool("search_servers", {"query": "airline"})
        found = result.structured_content["result"]
        assert [s["name"] for s in found] == ["io.mcpworld/airline"]
        assert found[0]["kind"] == "world" and found[0]["tasks"] >= 15


@pytest.mark.anyio
async def test_connect_by_name_completes_a_task(up: dict) -> None:
    async with connect("airline", registry=up["base"]) as client:
        ctl = EpisodeControl(client)
        task = next(t for t in (await ctl.tasks(token=TOKEN)).tasks if t.id == "book-cheapest-economy")
        episode = (await ctl.start(task.id)).episode
        for step in task.solution:
            assert not (await ctl.call(episode, step.name, step.arguments)).is_error
        assert (await ctl.verify(episode, task.answer)).verdict.passed


@pytest.mark.anyio
async def test_a_world_installed_while_up_runs_is_served_registered_and_playable(up: dict) -> None:
    """docs/worlds.md: save a world under ~/.mcpworld/worlds and a running `up` serves it (it said so, and `run
    --server pantry` then failed with "no server named io.mcpworld/pantry", issue 35)."""
    from tests.test_docs import example

    pkg = Path(up["home"]) / "worlds" / "pantry"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(example("worlds.md", "world"))

    def registered() -> bool:
        names = {s["server"]["name"] for s in httpx.get(up["base"] + "/v0/servers").json()["servers"]}
        return "io.mcpworld/pantry" in names

    assert wait_until(registered, timeout=60), "the new world was never registered"
    listed = {w["name"] for w in httpx.get(up["base"] + "/worlds").json()["worlds"]}
    assert "pantry" in listed
    async with connect("pantry", registry=up["base"]) as client:
        ctl = EpisodeControl(client)
        task = (await ctl.tasks(token=TOKEN)).tasks[0]
        episode = (await ctl.start(task.id)).episode
        for step in task.solution:
            assert not (await ctl.call(episode, step.name, step.arguments)).is_error
        assert (await ctl.verify(episode, task.answer)).verdict.passed


@pytest.mark.anyio
async def test_swe_sandbox_is_served_and_solvable(up: dict) -> None:
    async with connect("swe", registry=up["base"]) as client:
        ctl = EpisodeControl(client)
        task = (await ctl.tasks(token=os.environ["MCPWORLD_REGISTRY_TOKEN"])).tasks[0]
        episode = (await ctl.start(task.id)).episode
        for step in task.solution:
            assert not (await ctl.call(episode, step.name, step.arguments)).is_error
        assert (await ctl.verify(episode)).verdict.passed


def test_health_is_recorded(up: dict) -> None:
    result = subprocess.run(mcpworld_cmd("registry", "check"), env=up["env"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "up    io.mcpworld/airline" in result.stdout
    record = httpx.get(up["base"] + "/v0/servers/io.mcpworld%2Fairline/versions/latest").json()
    assert health_of(record)["status"] == "up"  # the registry's fact: in the response's _meta, not the record's


def test_export_files_parse_and_name_every_server(up: dict, tmp_path: Path) -> None:
    names = {s["server"]["name"].split("/")[1] for s in httpx.get(up["base"] + "/v0/servers").json()["servers"]}
    for fmt, rel, key in [("claude-desktop", "claude_desktop_config.json", "mcpServers"),
                          ("claude-code", ".mcp.json", "mcpServers"), ("vscode", ".vscode/mcp.json", "servers"),
                          ("cursor", ".cursor/mcp.json", "mcpServers")]:
        out = tmp_path / rel
        result = subprocess.run(mcpworld_cmd("registry", "export", "--format", fmt, "-o", str(out)),
                                env=up["env"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert set(json.loads(out.read_text())[key]) == names


def test_second_up_says_so(up: dict) -> None:
    result = subprocess.run(mcpworld_cmd("up", "--port", str(free_port())), env=up["env"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1
    assert "already running" in result.stderr and str(up["proc"].pid) in result.stderr


def test_ctrl_c_stops_cleanly(up: dict) -> None:
    proc = up["proc"]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 0
    assert not (up["home"] / "up.json").exists()
    with pytest.raises(httpx.HTTPError):
        httpx.get(up["base"] + "/healthz", timeout=2)


def test_sigterm_stops_cleanly_and_clients_stop_finding_it(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp_path)}
    proc = _start_up(env, port)
    assert json.loads((tmp_path / "up.json").read_text())["pid"] == proc.pid
    proc.send_signal(signal.SIGTERM)  # what systemd, docker stop and `kill` send
    proc.wait(timeout=30)
    assert not (tmp_path / "up.json").exists()


def _start_up(env: dict, port: int, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen(mcpworld_cmd("up", "--port", str(port), "--only", "airline", "--no-swe", *args), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_http(f"http://127.0.0.1:{port}/healthz", proc)
    return proc


def _wait_registered(base: str, name: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Wait until the registry lists `name` (a condition, not a time), failing early if `up` exits."""
    deadline = time.monotonic() + timeout
    while name not in {s["server"]["name"] for s in httpx.get(base + "/v0/servers").json()["servers"]}:
        assert proc.poll() is None, f"up exited with {proc.returncode}"
        assert time.monotonic() < deadline, f"{name} was not registered within {timeout:g}s"
        time.sleep(0.1)


async def _play_a_task_as_a_person(url: str) -> None:
    """As Claude Code connects: start_task, the one call the task needs, check_task passes."""
    async with Client(url) as client:
        assert {"start_task", "check_task"} <= {t.name for t in (await client.list_tools()).tools}
        started = await client.call_tool("start_task", {"task_id": "cancel-within-24h"})
        episode = started.structured_content["episode"]
        cancel = {"reservation_id": "ZFA04Y", "reason": "change_of_plan", "episode": episode}
        assert not (await client.call_tool("cancel_reservation", cancel)).is_error
        verdict = (await client.call_tool("check_task", {"episode": episode})).structured_content
        assert verdict["passed"], verdict


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0


@pytest.mark.anyio
async def test_interactive_up_lets_an_http_client_play_and_restarts_at_once(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp_path), "MCPWORLD_REGISTRY": f"http://127.0.0.1:{port}"}
    proc = _start_up(env, port, "--interactive")
    try:
        await _play_a_task_as_a_person(f"http://127.0.0.1:{port}/worlds/airline/mcp")
        with httpx.Client() as keep_alive:  # connections the server closes itself when it stops: TIME_WAIT on its side
            for _ in range(3):
                assert keep_alive.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
            _stop(proc)
        proc = _start_up(env, port)  # at once, same port
        assert httpx.get(f"http://127.0.0.1:{port}/worlds").json()["worlds"][0]["name"] == "airline"
    finally:
        if proc.poll() is None:
            _stop(proc)


@pytest.mark.anyio
async def test_up_with_two_workers_serves_tasks_through_the_registry(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp_path), "MCPWORLD_REGISTRY": f"http://127.0.0.1:{port}"}
    proc = _start_up(env, port, "--workers", "2")
    try:
        # /healthz can answer from worker 1 while worker 0 (the one that publishes) is still starting
        _wait_registered(f"http://127.0.0.1:{port}", "io.mcpworld/airline", proc)
        workers = set()
        for _ in range(6):
            async with connect("airline", registry=f"http://127.0.0.1:{port}") as client:
                ctl = EpisodeControl(client)
                task = next(t for t in (await ctl.tasks(token=TOKEN)).tasks if t.id == "cancel-within-24h")
                episode = (await ctl.start(task.id)).episode
                workers.add(episode.split("-")[1])
                for step in task.solution:
                    assert not (await ctl.call(episode, step.name, step.arguments)).is_error
                assert (await ctl.verify(episode, task.answer, close=True)).verdict.passed
        assert all(w.startswith("w") for w in workers), workers  # episode ids name their worker
    finally:
        _stop(proc)



@pytest.mark.anyio
async def test_after_the_readme_a_person_plays_from_an_exported_http_client_and_training_stays_sealed(
        tmp_path: Path) -> None:
    """Plain `up` plus `registry export --format claude-code`: the entry names the world's play endpoint, where a
    person starts, plays and checks a task; the training endpoint and the registry's remote still list no
    play tools (issue 35). The banner is short, says what to do next, and only once the port answers."""
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp_path), "MCPWORLD_REGISTRY": f"http://127.0.0.1:{port}"}
    proc = _start_up(env, port)
    try:
        _wait_registered(f"http://127.0.0.1:{port}", "io.mcpworld/airline", proc)
        out = tmp_path / ".mcp.json"
        exported = subprocess.run(mcpworld_cmd("registry", "export", "--format", "claude-code", "-o", str(out)),
                                  env=env, capture_output=True, text=True, timeout=60)
        assert exported.returncode == 0, exported.stderr
        url = json.loads(out.read_text())["mcpServers"]["airline"]["url"]
        assert url == f"http://127.0.0.1:{port}/play/airline/mcp"
        await _play_a_task_as_a_person(url)
        server = next(s["server"] for s in httpx.get(f"http://127.0.0.1:{port}/v0/servers").json()["servers"]
                      if s["server"]["name"] == "io.mcpworld/airline")
        assert [r["url"] for r in server["remotes"]] == [f"http://127.0.0.1:{port}/worlds/airline/mcp"]
        async with Client(server["remotes"][0]["url"]) as training:
            assert not {"start_task", "check_task"} & {t.name for t in (await training.list_tools()).tools}
    finally:
        if proc.poll() is None:
            _stop(proc)
    banner = proc.stdout.read() if proc.stdout else ""
    assert "Next, in another terminal:" in banner and "registry export --format claude-code" in banner
    assert len(banner.splitlines()) < 25, banner  # was 93 lines, most of them a pasted Claude Desktop config


def test_a_failed_up_leaves_no_token_it_never_showed(tmp_path: Path) -> None:
    """The port is taken: `up` fails with the reason, and the token it made (never printed) is gone, so the next
    `up` makes one and shows it (issue 35)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "MCPWORLD_HOME": str(tmp_path)}
        env.pop("MCPWORLD_REGISTRY_TOKEN", None)
        result = subprocess.run(mcpworld_cmd("up", "--port", str(port), "--only", "airline", "--no-swe"), env=env,
                                capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "in use" in result.stderr + result.stdout
    assert not (tmp_path / "registry.token").exists()
