"""`mcpworld rescore` (issue 29): stored episodes judged again against the world as it is now.

A run is recorded against `mcpworld serve worlds`; rescoring it against the same world changes nothing, and
against a world whose task was changed since names exactly the episodes now judged differently.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import anyio
from click.testing import CliRunner

from mcpworld.agent.policies import OraclePolicy
from mcpworld.agent.rescore import rescore, world_of
from mcpworld.agent.runner import RunSpec, list_tasks, run
from mcpworld.app.cli import main
from mcpworld.worlds.answers import Count
from mcpworld.worlds.host import load_runtime
from mcpworld.worlds.runtime import WorldRuntime

TASKS = ("business-seats-left", "cancel-within-24h", "refuse-basic-cancel")


def recorded(url: str, out: Path) -> Path:
    tasks = [t for t in anyio.run(list_tasks, f"{url}/worlds/airline/mcp", None, None) if t.id in TASKS]
    spec = RunSpec(server=f"{url}/worlds/airline/mcp", tasks=tasks, output=out)
    anyio.run(lambda: run(spec, lambda i: OraclePolicy()))
    return out


def test_rescore_finds_what_a_changed_task_judges_differently(worlds_url: str, tmp_path: Path) -> None:
    path = recorded(worlds_url, tmp_path / "run.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert {line["environment"]["world"] for line in lines} == {"airline"}
    assert all(len(line["environment"]["digest"]) == 16 and line["environment"]["verdict"] for line in lines)

    same = rescore(path)
    assert len(same.rescored) == 3 and not same.changed

    current = load_runtime("airline")
    world = current.world
    tasks = [dataclasses.replace(t, expect=[Count(9)]) if t.id == "business-seats-left" else t for t in world.tasks]
    changed = rescore(path, load=lambda name: WorldRuntime(dataclasses.replace(world, tasks=tasks)))
    assert [(r.task, r.before, r.after) for r in changed.changed] == [("business-seats-left", True, False)]

    result = CliRunner().invoke(main, ["rescore", str(path), "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output  # nothing changed against the world as installed
    assert json.loads((tmp_path / "r.json").read_text())["rescored"] == 3


def test_world_names_from_every_server_form() -> None:
    assert world_of("airline") == world_of("io.mcpworld/airline") == "airline"
    assert world_of("http://127.0.0.1:8765/worlds/airline/mcp") == "airline"
