"""Synthesized tasks as data: JSON files that become `Task` objects with honest verifiers.

Graph and programmatic tasks are produced at run time and must survive a round trip through a file (the
`graph-tasks` output, an imported world's tasks.json, the arena's targeted tasks), so their checks are
data too: the final values an answer must mention, or a generated verifier script (run in a worker).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcpworld.models import Check, ToolCall
from mcpworld.servers.envs.world import Outcome, Task, World


class MentionsCheck(BaseModel):
    """The final answer names every value; `unchanged` also requires no writes (when the chain made none)."""

    type: Literal["mentions"] = "mentions"
    values: list[str]
    unchanged: bool = True


class ScriptCheck(BaseModel):
    """A generated `verify(answer, data)` script and the data it reads (captured tool results)."""

    type: Literal["script"] = "script"
    script: str
    data: Any = None
    description: str = ""
    unchanged: bool = True


class SynthTask(BaseModel):
    """A task as JSON; `to_task()` gives the runtime `Task`."""

    id: str
    instruction: str
    kind: Literal["answer", "state", "refusal"] = "answer"
    solution: list[ToolCall] = Field(default_factory=list)
    answer: str | None = None
    rubric: list[str] = Field(default_factory=list)
    split: Literal["train", "test"] = "train"
    difficulty: Literal["easy", "medium", "hard"] = "easy"
    check: MentionsCheck | ScriptCheck = Field(discriminator="type")
    source: str = "graph"
    world: str = ""
    meta: dict[str, Any] = Field(default_factory=dict)

    def to_task(self) -> Task:
        return Task(id=self.id, instruction=self.instruction, verify=make_verifier(self.check), solution=self.solution,
                    answer=self.answer, kind=self.kind, rubric=self.rubric, split=self.split,
                    difficulty=self.difficulty)


def make_verifier(check: MentionsCheck | ScriptCheck) -> Any:
    """The verifier for a check: answer_mentions, or the script run in a limited worker."""
    if isinstance(check, MentionsCheck):
        values, unchanged = list(check.values), check.unchanged
        return lambda o: [o.answer_mentions(*values), *([o.diff.unchanged()] if unchanged else [])]

    def run_script(o: Outcome) -> list[Check]:
        from mcpworld.servers.synth.programmatic import script_check

        return [script_check(check, o.answer), *([o.diff.unchanged()] if check.unchanged else [])]

    return run_script


def save_tasks(path: str | Path, tasks: list[SynthTask]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([t.model_dump(mode="json") for t in tasks], indent=2, ensure_ascii=False) + "\n")
    return path


def load_tasks(path: str | Path) -> list[SynthTask]:
    data = json.loads(Path(path).read_text())
    if isinstance(data, dict):
        data = data.get("tasks", [])
    return [SynthTask.model_validate(t) for t in data]


def with_tasks(world: World, tasks: list[SynthTask], replace: bool = False) -> World:
    """A copy of `world` that also (or only) has `tasks`; ids that clash with the world's own are skipped."""
    own = [] if replace else list(world.tasks)
    taken = {t.id for t in own}
    extra = [t.to_task() for t in tasks if t.id not in taken]
    return dataclasses.replace(world, tasks=own + extra)
