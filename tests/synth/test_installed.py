"""World packages installed before `mcpworld.synth` had subpackages keep loading: their `__init__.py` and
`tasks.py` import `mcpworld.synth.sandboxed`, `.awm`, `.agent_world` and `.taskspec` (a package on a user's disk is
a file format)."""

from __future__ import annotations

import importlib

import pytest

from mcpworld.synth import INSTALLED_IMPORTS


@pytest.mark.parametrize("old", sorted(INSTALLED_IMPORTS))
def test_an_old_import_path_gives_the_same_objects(old: str) -> None:
    legacy, real = importlib.import_module(old), importlib.import_module(INSTALLED_IMPORTS[old])
    names = [n for n in vars(real) if not n.startswith("_")]
    assert names and all(getattr(legacy, n) is getattr(real, n) for n in names)


def test_the_lines_old_packages_hold_still_run() -> None:
    namespace: dict = {}
    exec("from mcpworld.synth.sandboxed import load_package\n"  # synthesized worlds' __init__.py
         "from mcpworld.synth.awm import load_package as awm\n"  # AWM imports
         "from mcpworld.synth.agent_world import load_package as agent_world\n"  # Agent-World imports
         "from mcpworld.synth.taskspec import load_synthesized, load_task_file\n", namespace)  # their tasks.py
    assert callable(namespace["load_package"]) and callable(namespace["load_task_file"])


def test_a_tasks_file_installed_as_a_world_is_usable_by_every_command(isolated_home) -> None:
    """`synth graph-tasks` writes a file only Python could use (issue 35); `synth install-tasks` makes it a world
    that `up`, `run`, `serve` and `train` find by name, its references passing and its no-op failing."""
    from click.testing import CliRunner

    from mcpworld.synth.cli import synth_group
    from mcpworld.worlds.loader import discover, load_world
    from mcpworld.worlds.runtime import WorldRuntime

    out = isolated_home / "airline-graph.json"
    made = CliRunner().invoke(synth_group, ["graph-tasks", "airline", "-n", "3", "--seed", "1", "-o", str(out)])
    assert made.exit_code == 0, made.output
    installed = CliRunner().invoke(synth_group, ["install-tasks", "airline", str(out), "--name", "airline-graph"])
    assert installed.exit_code == 0, installed.output
    assert "airline-graph" in {r.name for r in discover()}
    runtime = WorldRuntime(load_world(isolated_home / "worlds" / "airline-graph"))
    synthesized = [t for t in runtime.tasks.values() if t.id not in {t.id for t in load_world(
        next(r.path for r in discover() if r.name == "airline")).tasks}]
    assert len(synthesized) == 3
    for task in synthesized:
        reference = runtime.fork(task.id)
        try:
            for step in runtime.solution(task):
                runtime.call(reference, step.name, step.arguments)
            assert runtime.verify(reference, task.answer).passed, task.id
        finally:
            reference.close()
        noop = runtime.fork(task.id)
        try:
            assert not runtime.verify(noop, None).passed, task.id
        finally:
            noop.close()
    refused = CliRunner().invoke(synth_group, ["install-tasks", "airline", str(out), "--name", "airline"])
    assert refused.exit_code == 1 and "a name of its own" in refused.output
