"""The OpenEnv benchmark: without its venv the row is skipped, naming the command that sets it up (never a crash);
with it, the "same runtime" peer answers exactly what our WorldRuntime answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.peers import OPENENV_SETUP, OPENENV_VENV, has_runtime, openenv_python
from benchmarks.peers.openenv import TASK, export_airline, peer_server
from benchmarks.serving import openenv_rows


def test_row_skips_with_the_setup_command_when_the_peer_venv_is_absent(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("MCPWORLD_OPENENV_PYTHON", str(tmp_path / "no-such-python"))
    rows = openenv_rows(quick=True)
    assert len(rows) == 1 and rows[0].ok
    assert OPENENV_SETUP in rows[0].name and "no-such-python" in rows[0].name
    assert OPENENV_SETUP in capsys.readouterr().err


def test_peers_cli_names_the_setup_command_and_fails_when_absent(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "MCPWORLD_OPENENV_PYTHON": str(tmp_path / "missing")}
    done = subprocess.run([sys.executable, "-m", "benchmarks.peers", "openenv"], capture_output=True, text=True,
                          env=env, cwd=Path(__file__).resolve().parents[2], timeout=60)
    assert done.returncode == 1
    assert OPENENV_SETUP in done.stderr and str(OPENENV_VENV) not in done.stdout


def test_export_is_the_world_data_the_peer_loads(tmp_path: Path) -> None:
    out = tmp_path / "airline.json"
    export_airline(out)
    data = json.loads(out.read_text())
    flights = data["tables"]["flight"]
    ids = [row[flights["columns"].index("id")] for row in flights["rows"]]
    assert "MW307-0602" in ids  # the flight both load generators ask for
    assert not any(name.startswith("_mcpworld") for name in data["tables"])  # our bookkeeping stays ours


PLAY = """
import asyncio, json, sys
from openenv.core.generic_client import GenericEnvClient

async def main():
    env = GenericEnvClient(base_url=sys.argv[1], connect_timeout_s=60, message_timeout_s=60)
    await env.connect()
    await env.reset()
    got = await env.step({"tool": "get_flight", "flight_id": "MW307-0602"})
    missing = await env.step({"tool": "get_flight", "flight_id": "NO-SUCH"})
    ended = await env.step({"tool": "end"})
    await env.close()
    print(json.dumps({"flight": got.observation["flight"], "missing": missing.observation["error"],
                      "done": ended.done, "reward": ended.reward}))

asyncio.run(main())
"""


def test_runtime_variant_answers_what_our_world_runtime_answers(tmp_path: Path) -> None:
    """The "same runtime" peer runs our WorldRuntime behind OpenEnv: its answers are our tool's, errors included."""
    python = openenv_python()
    if python is None or not has_runtime(python):
        pytest.skip(f"needs the OpenEnv peer venv with mcpworld in it: run `{OPENENV_SETUP}`")
    from mcpworld.worlds.host import load_runtime

    runtime = load_runtime("airline")
    episode = runtime.fork(TASK, 0)
    try:
        expected = runtime.call(episode, "get_flight", {"flight_id": "MW307-0602"}).value
        expected_error = runtime.call(episode, "get_flight", {"flight_id": "NO-SUCH"}).error
    finally:
        episode.close()
    with peer_server(python, "runtime", tmp_path / "unused.json") as s:
        done = subprocess.run([str(python), "-c", PLAY, s["url"]], capture_output=True, text=True, timeout=120,
                              cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["flight"] == expected and out["missing"] == expected_error
    assert out["done"] is True and out["reward"] == 0.0  # verified like ours: nothing was cancelled, so no reward
