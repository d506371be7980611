"""The OpenEnv benchmark row without its venv: skipped, saying the command that sets it up (never a crash)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.peers import OPENENV_SETUP, OPENENV_VENV
from benchmarks.peers.openenv import export_airline
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
                          env=env, cwd=Path(__file__).resolve().parents[1], timeout=60)
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
