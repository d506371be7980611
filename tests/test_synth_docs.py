"""docs/synthesis.md's commands exist with the options it shows, and its offline example runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from click.testing import CliRunner

from mcpworld.servers.synth.cli import synth_group
from mcpworld.servers.synth.taskspec import load_tasks

DOC = Path(__file__).resolve().parents[1] / "docs" / "synthesis.md"


def commands() -> list[list[str]]:
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [shlex.split(line.split(" > ")[0])[2:] for line in lines if line.strip().startswith("mcpworld synth ")]


def test_documented_commands_use_real_options() -> None:
    found = commands()
    assert {c[0] for c in found} == {"world", "graph-tasks", "import-agent-world", "arena"}
    for args in found:
        command = synth_group.commands[args[0]]
        known = {opt for p in command.params for opt in getattr(p, "opts", [])}
        used = {a.split("=")[0] for a in args[1:] if a.startswith("-")}
        assert used <= known, (args, used - known)


def test_offline_graph_example_runs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = next(c for c in commands() if c[0] == "graph-tasks" and "airline" in c)
    result = CliRunner().invoke(synth_group, [*args[:3], "5", *args[4:]])  # fewer tasks, same command
    assert result.exit_code == 0, result.output
    assert load_tasks(tmp_path / "airline-graph.json")
