"""`mcpworld swe build-instances` (`mcpworld/swe/builder.py`) as a person types it: a relative destination works
(it failed with "fatal: not a git repository: 'swe-data/repos/minicalc/.git'", issue 35)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcpworld.swe.cli import swe_group


def test_build_instances_into_a_relative_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(swe_group, ["build-instances", "swe-data"])
    assert result.exit_code == 0, result.output
    written = Path(result.output.strip())
    assert written == tmp_path / "swe-data" / "instances.jsonl"
    rows = [json.loads(line) for line in written.read_text().splitlines()]
    assert rows and all((tmp_path / "swe-data" / "repos").exists() for _ in rows)
