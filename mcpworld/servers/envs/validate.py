"""`mcpworld world validate`: every problem of a world package, each with its file and field.

A world is valid when it imports, its tools describe themselves, its seed satisfies its constraints, and
every task's reference solution runs, passes its verifier, while a no-op episode fails it.
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mcpworld.servers.envs.diff import StateDiff
from mcpworld.servers.envs.loader import WorldLoadError, load_world
from mcpworld.servers.envs.runtime import WorldRuntime
from mcpworld.servers.envs.tools import ArgumentError, build_tool
from mcpworld.servers.envs.world import Task, World

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{1,62}$")


@dataclass(frozen=True)
class Problem:
    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}"


def _file_of(obj: object, fallback: str) -> str:
    try:
        return inspect.getsourcefile(obj) or fallback  # type: ignore[arg-type]
    except TypeError:
        return fallback


def _metadata_problems(world: World, init: str) -> list[Problem]:
    out = []
    if not NAME_RE.match(world.name):
        out.append(Problem(init, "name", f"{world.name!r} must be lowercase letters, digits and '-'"))
    for field in ("title", "description", "scenario", "version"):
        if not str(getattr(world, field)).strip():
            out.append(Problem(init, field, "must not be empty"))
    if len(world.description) > 100:
        out.append(Problem(init, "description", f"{len(world.description)} characters; registries allow 100"))
    return out


def _definition_problems(world: World, init: str) -> list[Problem]:
    out = []
    names = []
    for fn in world.tools:
        try:
            names.append(build_tool(fn).name)
        except (TypeError, NameError) as exc:
            out.append(Problem(_file_of(fn, init), f"tool {getattr(fn, '__name__', fn)}", str(exc)))
    out += [Problem(init, "tools", f"duplicate tool name {n!r}") for n, k in Counter(names).items() if k > 1]
    ids = Counter(t.id for t in world.tasks)
    out += [Problem(_file_of(world.tasks[0].verify, init), "tasks", f"duplicate task id {i!r}")
            for i, k in ids.items() if k > 1]
    if not world.tasks:
        out.append(Problem(init, "tasks", "a world needs at least one task"))
    return out


def _rule_problems(world: World, init: str) -> list[Problem]:
    """Rules need ids, text and cues, and no cue of one rule may also cite another (or refusals can't be told apart)."""
    out = [Problem(init, "rules", f"duplicate rule id {i!r}") for i, k in Counter(r.id for r in world.rules).items()
           if k > 1]
    for rule in world.rules:
        if not rule.text.strip() or not rule.cues:
            out.append(Problem(init, f"rule {rule.id}", "needs text and at least one cue"))
        for other in world.rules:
            if other.id == rule.id:
                continue
            for cue in rule.cues:
                clash = [c for c in other.cues if re.search(rf"(?<!\w){re.escape(c.lower())}(?!\w)", cue.lower())]
                if clash:
                    out.append(Problem(init, f"rule {rule.id}", f"cue {cue!r} also cites rule {other.id} "
                                                                f"(its cue {clash[0]!r}): make the cues distinct"))
    return out


def _kind_problems(world: World, task: Task, where: str, field: str) -> list[Problem]:
    out = []
    if task.kind == "answer" and not task.expect:
        out.append(Problem(where, f"{field}: expect", "an answer task declares its typed answer (Count, Number, "
                                                      "DateAnswer, TimeAnswer, YesNo, Entities)"))
    if task.kind == "refusal":
        known = {r.id for r in world.rules}
        if task.reason not in known:
            out.append(Problem(where, f"{field}: reason", f"a refusal task names the rule it must cite; "
                                                          f"{task.reason!r} is not one of: {', '.join(sorted(known))}"))
    return out


def task_problems(runtime: WorldRuntime, task: Task, init: str) -> list[Problem]:
    where = _file_of(task.verify, init) if task.verify is not None else init
    field = f"task {task.id}"
    out = _kind_problems(runtime.world, task, where, field)
    for i, step in enumerate(task.solution):
        spec = runtime.tools.get(step.name)
        if spec is None:
            out.append(Problem(where, f"{field}: solution[{i}]", f"unknown tool {step.name!r}"))
            continue
        try:
            spec.parse(step.arguments)
        except ArgumentError as exc:
            out.append(Problem(where, f"{field}: solution[{i}]", str(exc)))
    if out:
        return out
    try:
        if task.kind == "refusal" and not _state_of(runtime, task).is_empty:
            out.append(Problem(where, f"{field}: solution", "a refusal task's reference must leave the state "
                                                            "untouched (its forbidden call must fail, or be left out)"))
        episode = runtime.fork(task.id)
    except Exception as exc:
        return [Problem(where, f"{field}: setup", f"{type(exc).__name__}: {exc}")]
    for i, step in enumerate(task.solution):
        result = runtime.call(episode, step.name, step.arguments)
        if result.error is not None and task.kind != "refusal":
            out.append(Problem(where, f"{field}: solution[{i}] ({step.name})", f"failed: {result.error}"))
    verdict = runtime.verify(episode, task.answer)
    episode.close()
    if not verdict.passed:
        failed = "; ".join(f"{c.name}{' (' + c.detail + ')' if c.detail else ''}" for c in verdict.checks
                           if not c.passed)
        out.append(Problem(where, f"{field}: verify", f"the reference solution fails its verifier: {failed}"))
    noop = runtime.fork(task.id)
    if runtime.verify(noop, None).passed:
        out.append(Problem(where, f"{field}: verify", "a no-op episode passes: the verifier checks nothing the "
                                                      "task asks for (or the target already holds)"))
    noop.close()
    return out


def _state_of(runtime: WorldRuntime, task: Task) -> StateDiff:
    episode = runtime.fork(task.id)
    try:
        for step in task.solution:
            runtime.call(episode, step.name, step.arguments)
        return runtime.diff(episode)
    finally:
        episode.close()


def validate(path: str | Path) -> tuple[World | None, list[Problem]]:
    """Load and check the world at `path`; return it (when it loads) and every problem found."""
    init = str(Path(path) / "__init__.py") if Path(path).is_dir() else str(path)
    try:
        world = load_world(path)
    except WorldLoadError as exc:
        return None, [Problem(init, "import", str(exc))]
    problems = _metadata_problems(world, init) + _definition_problems(world, init) + _rule_problems(world, init)
    if problems:
        return world, problems
    runtime = WorldRuntime(world)
    try:
        runtime.template(None)
    except Exception as exc:
        return world, [Problem(_file_of(world.seed, init), "seed", f"{type(exc).__name__}: {str(exc).splitlines()[0]}")]
    for task in world.tasks:
        problems += task_problems(runtime, task, init)
    return world, problems
