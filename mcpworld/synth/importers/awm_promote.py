"""`mcpworld synth promote RUNS...`: provisional AWM tasks (`awm_provisional`) promoted by agreeing trajectories.

A provisional task whose passing trajectories (two or more, from distinct episodes) leave the same end state,
replayed here, gets the calls of one of them as its reference and that trajectory's final answer; it is then
validated and audited like every referenced task, and stays provisional (with the reason) if that fails.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpworld.core.models import ToolCall
from mcpworld.worlds.runtime import WorldRuntime


@dataclass
class Promotion:
    """What `promote` did for one world: tasks promoted, and why the others stayed provisional."""

    world: str
    path: str
    promoted: list[str] = field(default_factory=list)
    kept_provisional: dict[str, str] = field(default_factory=dict)


def _agreeing(runtime: WorldRuntime, task_id: str, trajectories: list[Any]) -> tuple[Any, int] | None:
    """The first passing trajectory whose end state (replayed here) two or more distinct episodes share."""
    from mcpworld.worlds.reference import canonical, mismatches

    states: list[tuple[Any, Any]] = []
    seen: set[tuple[str, int, str | None]] = set()
    for t in trajectories:
        key = (t.policy, t.sample, t.episode)
        if key in seen:
            continue
        seen.add(key)
        episode = runtime.fork(task_id, 0)
        try:
            for call in _calls(t):
                runtime.call(episode, call.name, call.arguments)
            state = canonical(runtime.diff(episode), episode.generated, runtime.world.free_fields)
        finally:
            episode.close()
        states.append((t, state))
    best: tuple[Any, int] | None = None
    for t, state in states:
        agree = sum(not mismatches(state, other) for _, other in states)
        if agree >= 2 and (best is None or agree > best[1]):
            best = (t, agree)
    return best


def _calls(trajectory: Any) -> list[ToolCall]:
    """The trajectory's calls that succeeded, submissions left out (the runtime adds the reference's own)."""
    from mcpworld.worlds.submissions import SUBMISSION_TOOLS

    return [ToolCall(name=c.name, arguments=dict(c.arguments)) for step in trajectory.steps for c in step.calls
            if not c.is_error and c.name not in SUBMISSION_TOOLS]


def passing_trajectories(runs: list[Path]) -> dict[tuple[str, str], list[Any]]:
    """(world name, task id) -> passing trajectories, from every file in `runs` (files, or folders of them)."""
    from mcpworld.agent.trajectory import read_trajectories

    out: dict[tuple[str, str], list[Any]] = {}
    for run in runs:
        files = sorted(run.rglob("*.jsonl")) if run.is_dir() else [run]
        for file in files:
            for t in read_trajectories(file):
                if t.verdict is not None and t.verdict.passed and not t.is_infra:  # AWM worlds never vary by seed
                    out.setdefault((t.server.rsplit("/", 1)[-1], t.task), []).append(t)
    return out


def promote(path: Path, passing: dict[str, list[Any]], audit_tasks: bool = True) -> Promotion:
    """Promote the provisional tasks of the AWM package at `path` that agreeing trajectories solve."""
    import dataclasses

    from mcpworld.synth.importers.awm import REPORT_FILE, load_package
    from mcpworld.synth.tasks.taskspec import audit_problems, load_tasks, save_tasks
    from mcpworld.worlds.validate import task_problems

    specs = load_tasks(path / "tasks.json")
    world = load_package(path)
    result = Promotion(world=world.name, path=str(path))
    runtime = WorldRuntime(world)
    candidates = {}
    for spec in specs:
        if not spec.meta.get("provisional"):
            continue
        found = passing.get(spec.id) or []
        best = _agreeing(runtime, spec.id, found) if len(found) >= 2 else None
        if best is None:
            result.kept_provisional[spec.id] = (f"{len(found)} passing trajectories" if len(found) < 2 else
                                                f"no two of its {len(found)} passing trajectories agree on the "
                                                "end state")
            continue
        trajectory, agree = best
        answer = trajectory.verdict.evidence.get("answer") if trajectory.verdict else None
        candidates[spec.id] = spec.model_copy(update={
            "solution": _calls(trajectory), "answer": answer,
            "meta": {**{k: v for k, v in spec.meta.items() if k != "provisional"},
                     "reference": f"promoted: {agree} trajectories agree ({trajectory.policy})"}})
    if candidates:  # judged as referenced tasks now: validated, then audited, like every kept task
        trial = [candidates.get(s.id, s) for s in specs]
        save_tasks(path / "tasks.json", trial)
        runtime = WorldRuntime(load_package(path))
        failed: dict[str, str] = {}
        for tid in candidates:
            problems = task_problems(runtime, runtime.tasks[tid], str(path / "tasks.json"))
            if problems:
                failed[tid] = f"{problems[0].field}: {problems[0].message}"
        if audit_tasks:
            ok = sorted(set(candidates) - set(failed))
            if ok:
                only = dataclasses.replace(runtime.world, tasks=[runtime.tasks[t] for t in ok])
                for tid, d in audit_problems(WorldRuntime(only), ok).items():
                    failed[tid] = d.reason
        for tid, why in failed.items():
            result.kept_provisional[tid] = f"promoted reference fails: {why}"[:600]
        final = [candidates[s.id] if s.id in candidates and s.id not in failed else s for s in specs]
        save_tasks(path / "tasks.json", final)
        result.promoted = sorted(set(candidates) - set(failed))
        report_file = path / REPORT_FILE
        if report_file.is_file() and result.promoted:
            report = json.loads(report_file.read_text(encoding="utf-8"))
            report["kept"] = [*report.get("kept", []), *result.promoted]
            report["provisional"] = [t for t in report.get("provisional", []) if t not in result.promoted]
            report["promoted"] = sorted({*report.get("promoted", []), *result.promoted})
            report_file.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    return result


__all__ = ["Promotion", "passing_trajectories", "promote"]
