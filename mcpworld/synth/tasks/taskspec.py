"""Synthesized tasks as data: JSON files that become `Task` objects judged by the runtime alone.

Graph and programmatic tasks are produced at run time and must survive a round trip through a file (the
`graph-tasks` output, an imported world's tasks.json, the arena's targeted tasks, a synthesized world's
tasks.json), so everything that judges them is data too:

- every task is judged against its reference solution's final database (the runtime does that for all tasks);
- an answer task carries its typed answer (`AnswerCheck.parts`: a `Count`, a `Number`, a `DateAnswer`,
  `Entities` with their wrong candidates...), which becomes `Task.expect`;
- a refusal task names the world rule it must cite (`reason`), one of the rules in the same file.

No verifier code is generated or run to judge a synthesized task. Before any task is kept, `audit_problems`
plays the reward-hacking audit on it (`mcpworld world audit`): a task that a wrong policy passes, or whose
reference or paraphrased answers fail, is dropped with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, model_validator

from mcpworld.core.models import ToolCall
from mcpworld.worlds.answers import AnswerPart
from mcpworld.worlds.world import Rule, Task, World

if TYPE_CHECKING:
    from mcpworld.worlds.runtime import WorldRuntime

log = logging.getLogger("mcpworld.synth")

RETIRED = {"mentions": "substring matching", "script": "a generated verifier script"}


class AnswerCheck(BaseModel):
    """The typed answer an answer task expects (`Task.expect`): parts from `mcpworld.worlds.answers`."""

    type: Literal["answer"] = "answer"
    parts: list[AnswerPart] = Field(min_length=1)


class SynthTask(BaseModel):
    """A task as JSON; `to_task()` gives the runtime `Task`.

    `check` holds the typed answer of an answer task (a file may also write it as `"expect": [parts]`);
    `reason` is the rule id a refusal task must cite.
    """

    id: str
    instruction: str
    kind: Literal["answer", "state", "refusal"] = "answer"
    solution: list[ToolCall] = Field(default_factory=list)
    answer: str | None = None
    rubric: list[str] = Field(default_factory=list)
    split: Literal["train", "test"] = "train"
    difficulty: Literal["easy", "medium", "hard"] = "easy"
    check: AnswerCheck | None = None
    reason: str | None = None
    alternatives: list[list[ToolCall]] = Field(default_factory=list)
    source: str = "graph"
    world: str = ""
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _typed_answers_only(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        check = data.get("check")
        if isinstance(check, dict) and check.get("type") in RETIRED:
            raise ValueError(f"task {data.get('id')!r} uses the retired {check['type']!r} check "
                             f"({RETIRED[check['type']]}, which wrong answers pass): regenerate it with "
                             "`mcpworld synth graph-tasks`, which writes typed answers")
        return _normalize_task(data)

    @model_validator(mode="after")
    def _kind_fits(self) -> SynthTask:
        if self.kind == "answer" and self.check is None:
            raise ValueError(f"answer task {self.id!r} needs its typed answer (`expect` parts)")
        if self.kind == "refusal" and not self.reason:
            raise ValueError(f"refusal task {self.id!r} needs the `reason` (a rule id) it must cite")
        return self

    @property
    def parts(self) -> list[Any]:
        return list(self.check.parts) if self.check else []

    def to_task(self) -> Task:
        return Task(id=self.id, instruction=self.instruction, solution=list(self.solution), answer=self.answer,
                    kind=self.kind, rubric=list(self.rubric), split=self.split, difficulty=self.difficulty,
                    expect=self.parts, reason=self.reason, alternatives=[list(a) for a in self.alternatives])


class RuleSpec(BaseModel):
    """A world rule as JSON (`world.Rule`): its policy text, the cues that cite it, whether the tools enforce it."""

    id: str
    text: str
    cues: list[str] = Field(min_length=1)
    enforced: bool = True

    def to_rule(self) -> Rule:
        return Rule(id=self.id, text=self.text, cues=tuple(self.cues), enforced=self.enforced)


class TaskFile(BaseModel):
    """A tasks.json with the rules its refusal tasks cite and the free-text columns the reference ignores."""

    rules: list[RuleSpec] = Field(default_factory=list)
    free_fields: dict[str, list[str]] = Field(default_factory=dict)
    tasks: list[SynthTask] = Field(default_factory=list)

    @model_validator(mode="after")
    def _reasons_known(self) -> TaskFile:
        known = {r.id for r in self.rules}
        for task in self.tasks:
            if task.reason is not None and task.reason not in known:
                raise ValueError(f"task {task.id!r}: reason {task.reason!r} is not a rule id; rules: "
                                 f"{', '.join(sorted(known)) or '(none)'}")
        return self


def _normalize_task(task: Any) -> Any:
    """`expect` (the short form a model writes) becomes `check` before validation."""
    if isinstance(task, dict) and "expect" in task:
        task = dict(task)
        expect = task.pop("expect")
        if expect and not task.get("check"):
            task["check"] = {"type": "answer", "parts": expect}
    return task


def parse_task_file(data: Any) -> TaskFile:
    """A tasks.json's content: a list of tasks, or {"rules", "free_fields", "tasks"}."""
    if isinstance(data, list):
        data = {"tasks": data}
    return TaskFile.model_validate(data)


def save_tasks(path: str | Path, tasks: list[SynthTask]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([t.model_dump(mode="json") for t in tasks], indent=2, ensure_ascii=False) + "\n")
    return path


def load_task_file(path: str | Path) -> TaskFile:
    return parse_task_file(json.loads(Path(path).read_text(encoding="utf-8")))


def load_tasks(path: str | Path) -> list[SynthTask]:
    return load_task_file(path).tasks


def with_tasks(world: World, tasks: list[SynthTask], replace: bool = False) -> World:
    """A copy of `world` that also (or only) has `tasks`; ids that clash with the world's own are skipped."""
    own = [] if replace else list(world.tasks)
    taken = {t.id for t in own}
    extra = [t.to_task() for t in tasks if t.id not in taken]
    return dataclasses.replace(world, tasks=own + extra)


# -- the audit gate ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Dropped:
    """A synthesized task that was not kept, and why (`policy`: the wrong policy that passed, if one did)."""

    task: str
    reason: str
    policy: str | None = None

    def __str__(self) -> str:
        return f"{self.task} ({self.reason})"


def audit_problems(runtime: WorldRuntime, ids: list[str] | None = None) -> dict[str, Dropped]:
    """Play the reward-hacking audit on tasks of `runtime`; the tasks that must be dropped, with the reason.

    A task is dropped when any wrong policy passes it (the first one is named), or when its reference or a
    paraphrase of its typed answer fails.
    """
    from mcpworld.worlds.audit import audit

    report = audit(runtime, ids)
    out: dict[str, Dropped] = {}
    for r in report.failures:
        if r.task in out:
            continue
        attempt = f"{r.attempt}: " if r.attempt else ""
        if r.expected_pass:
            out[r.task] = Dropped(r.task, f"{r.policy} must pass but failed: {attempt}{r.detail}")
        else:
            out[r.task] = Dropped(r.task, f"wrong policy {r.policy} passed: {attempt}{r.detail}", r.policy)
    return out


def report_dropped(world: str, dropped: list[Dropped]) -> None:
    for d in dropped:
        log.warning("%s: dropped synthesized task %s: %s", world, d.task, d.reason)


# -- synthesized world packages: tasks and rules from tasks.json -------------------------------------------


def load_synthesized(path: Path, module_name: str) -> World:
    """A synthesized world package (`mcpworld synth world`): generated code through `sandbox.packages`, tasks as data.

    Tools, models and seed are generated code, served by `sandbox.packages.load_package` (real inside a worker, a
    proxy elsewhere). The tasks, rules and free-text columns come from the package's tasks.json, parsed here
    as data: judging an episode needs no generated code at all.
    """
    from mcpworld.synth.sandbox.packages import MANIFEST, load_package

    world = load_package(path, module_name)
    spec = load_task_file(path / "tasks.json")
    dropped = set(json.loads((path / MANIFEST).read_text(encoding="utf-8")).get("dropped", []))
    return dataclasses.replace(world, rules=[r.to_rule() for r in spec.rules],
                               free_fields={t: tuple(c) for t, c in spec.free_fields.items()},
                               tasks=[t.to_task() for t in spec.tasks if t.id not in dropped])
