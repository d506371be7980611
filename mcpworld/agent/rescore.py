"""`mcpworld rescore`: judge stored episodes again against the worlds as they are now.

Each trajectory's calls are replayed, in order, on a fresh fork of its task with its seed (the submission calls
included), in this process, and the episode is verified as the server would; the new verdict is compared with
the stored one. What changed after a world's tasks, tools or data changed is what NeMo Gym users call
"reverify". Episodes that were never played (infrastructure, setup and model errors) are skipped and counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpworld.agent.trajectory import Trajectory, read_trajectories
from mcpworld.worlds.loader import WorldLoadError
from mcpworld.worlds.runtime import WorldRuntime


@dataclass
class Rescored:
    """One stored episode judged again: before and after, and which build judged each."""

    task: str
    sample: int
    world: str
    before: bool | None
    after: bool
    score_before: float | None
    score_after: float
    built_before: str = ""
    built_after: str = ""

    @property
    def changed(self) -> bool:
        return self.before != self.after or self.score_before != self.score_after


@dataclass
class RescoreReport:
    rescored: list[Rescored] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # why -> how many

    @property
    def changed(self) -> list[Rescored]:
        return [r for r in self.rescored if r.changed]

    def as_dict(self) -> dict[str, Any]:
        return {"rescored": len(self.rescored), "changed": [vars(r) for r in self.changed],
                "skipped": dict(self.skipped)}


def world_of(server: str) -> str:
    """The world a trajectory's `server` names: "airline", "io.mcpworld/airline", ".../worlds/airline/mcp"."""
    parts = [p for p in server.rstrip("/").split("/") if p]
    if parts and parts[-1] == "mcp":
        parts = parts[:-1]
    return parts[-1] if parts else server


def final_answer(t: Trajectory) -> str | None:
    """The episode's last words to the user, as it was verified with them."""
    if t.verdict is not None and "answer" in t.verdict.evidence:
        return t.verdict.evidence["answer"]
    last = next((m for m in reversed(t.messages) if m.get("role") == "assistant"), None)
    return last.get("content") if last and not last.get("tool_calls") else None


def rescore_one(runtime: WorldRuntime, t: Trajectory) -> Rescored:
    episode = runtime.fork(t.task, t.seed)
    try:
        for step in t.steps:
            for call in step.calls:
                runtime.step(episode, call)
        verdict = runtime.verify(episode, final_answer(t))
    finally:
        episode.close()
    built = t.environment
    return Rescored(task=t.task, sample=t.sample, world=runtime.world.name,
                    before=t.verdict.passed if t.verdict else None, after=verdict.passed,
                    score_before=t.verdict.score if t.verdict else None, score_after=verdict.score,
                    built_before=built.get("digest", ""), built_after=runtime.world.digest)


def rescore(path: str | Path, load: Any = None) -> RescoreReport:
    """Judge every played episode of the trajectory file at `path` again (`load(name)` gives a world's runtime)."""
    from mcpworld.worlds.host import load_runtime

    load = load or load_runtime
    runtimes: dict[str, WorldRuntime | None] = {}
    report = RescoreReport()
    for t in read_trajectories(path):
        if not t.is_scored:
            report.skipped["not played (infrastructure, setup or model error)"] += 1
            continue
        name = t.environment.get("world") or world_of(t.server)
        if name not in runtimes:
            try:
                runtimes[name] = load(name)
            except (WorldLoadError, KeyError, FileNotFoundError, ValueError):
                runtimes[name] = None
        runtime = runtimes[name]
        if runtime is None:
            report.skipped[f"world {name!r} not found here"] += 1
        elif t.task not in runtime.tasks:
            report.skipped[f"task gone from {name}"] += 1
        else:
            report.rescored.append(rescore_one(runtime, t))
    return report
