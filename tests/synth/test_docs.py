"""docs/synthesis.md's commands exist with the options it shows, and its offline example runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from click.testing import CliRunner

from mcpworld.synth.cli import synth_group
from mcpworld.synth.tasks.taskspec import load_tasks

DOC = Path(__file__).resolve().parents[2] / "docs" / "synthesis.md"


def commands() -> list[list[str]]:
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [shlex.split(line.split(" > ")[0])[2:] for line in lines if line.strip().startswith("mcpworld synth ")]


def test_documented_commands_use_real_options() -> None:
    found = commands()
    assert {c[0] for c in found} == {"world", "graph-tasks", "import-agent-world", "arena", "import-awm", "scenarios",
                                     "twin", "promote", "install-tasks"}
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


def test_typed_answers_and_audit_example_runs(capsys) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    example = next(b for b in blocks if "audit(" in b and "graph_tasks" in b)
    exec(compile(example, "docs/synthesis.md", "exec"), {"__name__": "docs_example"})
    out = capsys.readouterr().out
    assert "no wrong policy passes: True" in out and "reference " in out
    assert any(kind in out for kind in ("['count']", "['number']", "['entities']"))


def test_library_fixture_shown_in_the_docs_is_what_the_tests_replay() -> None:
    import json

    from mcpworld.synth.tasks.taskspec import parse_task_file

    shown = next(b for b in re.findall(r"```json\n(.*?)```", DOC.read_text(), re.S) if '"rules"' in b)
    spec = parse_task_file(json.loads(shown))
    fixture = json.loads((DOC.parents[1] / "tests" / "data" / "synth" / "library_world.json").read_text())
    replayed = parse_task_file(json.loads(re.search(r"```json\n(.*?)```", next(
        v for k, v in fixture["scripts"].items() if k.startswith("[synth:verifiers]"))[-1]["content"], re.S)[1]))
    ours = {t.id: t for t in replayed.tasks}
    assert all(t.model_dump() == ours[t.id].model_dump() for t in spec.tasks)
    assert {r.id for r in spec.rules} <= {r.id for r in replayed.rules}
