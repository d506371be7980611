"""Every shipped world meets the catalog bar, and every task is honest: reference passes, no-op fails."""

from __future__ import annotations

import pytest

from mcpworld.worlds.loader import CATALOG_DIR, discover, load_world
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.validate import validate

CATALOG = sorted(p.name for p in CATALOG_DIR.iterdir() if (p / "__init__.py").is_file())
RUNTIMES = {name: WorldRuntime(load_world(CATALOG_DIR / name)) for name in CATALOG}
TASKS = [(name, task_id) for name, rt in RUNTIMES.items() for task_id in rt.tasks]


def test_catalog_has_six_distinct_worlds() -> None:
    assert len(CATALOG) >= 6
    assert {r.name for r in discover()} >= set(CATALOG)


@pytest.mark.parametrize("name", CATALOG)
def test_world_size_and_mix(name: str) -> None:
    rt = RUNTIMES[name]
    assert len(rt.tools) >= 12
    assert len(rt.tasks) >= 15
    tasks = list(rt.tasks.values())
    assert sum(len(t.solution) >= 3 for t in tasks) * 3 >= len(tasks), "a third of tasks need >= 3 calls"
    kinds = {t.kind for t in tasks}
    assert {"answer", "state", "refusal"} <= kinds
    assert any(s.meta.writes for s in rt.tools.values()) and any(not s.meta.writes for s in rt.tools.values())


@pytest.mark.parametrize("name", CATALOG)
def test_world_validates(name: str) -> None:
    world, problems = validate(CATALOG_DIR / name)
    assert world is not None and problems == []


@pytest.mark.parametrize(("name", "task_id"), TASKS)
def test_reference_passes_and_noop_fails(name: str, task_id: str) -> None:
    rt = RUNTIMES[name]
    task = rt.tasks[task_id]
    episode = rt.fork(task_id, seed=0)
    for i, step in enumerate(rt.solution(task)):  # the task's calls, then its submission
        result = rt.call(episode, step.name, step.arguments)
        if task.kind != "refusal" or i >= len(task.solution):
            assert result.error is None, f"{step.name}: {result.error}"
    verdict = rt.verify(episode, task.answer)
    assert verdict.passed, [c for c in verdict.checks if not c.passed]
    assert verdict.score == 1.0
    noop = rt.verify(rt.fork(task_id), None)
    assert not noop.passed
    if task.kind == "refusal":
        assert verdict.evidence["diff"] == {}, "a refusal task's reference must leave the state untouched"
