"""The first minutes: `mcpworld up` on any port, and every client command finds it by itself; `mcpworld run` writes
where the docs say, never into the current directory; mcpworld's own records launch over stdio on this machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpworld.core.paths import running_up_url, up_state_file
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http
from mcpworld.registry.connect import DEFAULT_REGISTRY, connect, registry_url
from mcpworld.registry.records import local_record


def test_clients_find_the_running_up_and_ignore_a_dead_one(isolated_home: Path, monkeypatch) -> None:
    monkeypatch.delenv("MCPWORLD_REGISTRY", raising=False)
    assert registry_url() == DEFAULT_REGISTRY
    up_state_file().write_text(json.dumps({"pid": os.getpid(), "url": "http://127.0.0.1:9123"}))
    assert registry_url() == "http://127.0.0.1:9123"
    monkeypatch.setenv("MCPWORLD_REGISTRY", "http://elsewhere:1")
    assert registry_url() == "http://elsewhere:1"  # the environment still wins
    monkeypatch.delenv("MCPWORLD_REGISTRY")
    dead = subprocess.Popen(["true"])
    dead.wait()
    up_state_file().write_text(json.dumps({"pid": dead.pid, "url": "http://127.0.0.1:9123"}))
    assert running_up_url() is None and registry_url() == DEFAULT_REGISTRY  # a killed up's leftover file
    up_state_file().write_text("{not json")
    assert registry_url() == DEFAULT_REGISTRY


@pytest.fixture(scope="module")
def up_elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """`mcpworld up` on a random port, with no MCPWORLD_REGISTRY anywhere: clients must find it themselves."""
    home = tmp_path_factory.mktemp("newcomer-home")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "MCPWORLD_REGISTRY"}
    env["MCPWORLD_HOME"] = str(home)
    proc = subprocess.Popen(mcpworld_cmd("up", "--port", str(port), "--only", "airline", "--no-swe"), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc)
        yield {"env": env, "home": home, "port": port}
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def test_registry_commands_find_up_on_its_port(up_elsewhere: dict) -> None:
    listed = subprocess.run(mcpworld_cmd("registry", "list", "--json"), env=up_elsewhere["env"],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert [i["server"]["name"] for i in json.loads(listed.stdout)] == ["io.mcpworld/airline"]


def test_run_finds_up_and_writes_under_mcpworld_home(up_elsewhere: dict, tmp_path: Path) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    played = subprocess.run(mcpworld_cmd("run", "--server", "airline", "--policy", "oracle", "--task",
                                         "book-cheapest-economy"), env=up_elsewhere["env"], cwd=cwd,
                            capture_output=True, text=True, timeout=300)
    assert played.returncode == 0, played.stdout + played.stderr
    assert list(cwd.iterdir()) == [], "mcpworld run wrote into the current directory"
    files = list((up_elsewhere["home"] / "runs").glob("airline-oracle-*.jsonl"))
    assert len(files) == 1
    line = json.loads(files[0].read_text().splitlines()[0])
    assert line["task"] == "book-cheapest-economy" and line["reward"] == 1.0
    assert f"trajectories: {files[0]}" in played.stdout.splitlines()  # the summary names the file, whole
    resumed = subprocess.run(mcpworld_cmd("run", "--server", "airline", "--resume"), env=up_elsewhere["env"],
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 2 and "--resume needs -o/--output" in resumed.stderr


@pytest.mark.anyio
async def test_an_mcpworld_record_starts_over_stdio_here() -> None:
    record = local_record("airline", "Airline", "world", url="http://127.0.0.1:1/worlds/airline/mcp",
                          stdio_args=["serve", "world", "airline", "--stdio"])
    async with connect(record, prefer="stdio", timeout=60) as client:  # the HTTP URL is dead: stdio it is
        names = {t.name for t in (await client.list_tools()).tools}
    assert "find_customer" in names
