"""The AWM pipeline: a world from a scenario, each stage executed and regenerated with its error fed back.

Stages: tasks (a plan, with the world's rules) -> schema (models.py) -> seed (data.py) -> tools (tools.py) ->
verifiers (tasks.json: the rules with their cues, and each task's reference solution, typed answer or refusal
reason). Every code stage runs in a resource-limited worker (`jobs.check_*`, then `world validate` and the
reward-hacking audit themselves), never in this interpreter. A stage that fails is asked again in the same
conversation with the error appended, up to `max_retries` times; attempts and errors are recorded per stage.
When only some tasks stay broken (a no-op passes, the reference fails, a wrong policy of the audit passes),
those tasks are dropped, with the reason, and the package validated again.

The model writes code only where code is needed (models, seed, tools). Tasks and rules are data: the model's
JSON is validated here and saved as tasks.json, which the package loads; everything mcpworld writes into the
package (`__init__.py`, `tasks.py`) is constant text, with nothing the model wrote pasted into it.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from mcpworld.core.llm import ChatClient, LLMError
from mcpworld.core.paths import user_worlds_dir
from mcpworld.synth.chat import extract_block, parse_json, retry_message
from mcpworld.synth.importers.install import InstallError, Registration, install_package, register_record
from mcpworld.synth.sandbox.packages import MANIFEST
from mcpworld.synth.sandbox.worker import JobResult, Limits, Worker, shared_worker
from mcpworld.synth.synthesis import prompts
from mcpworld.synth.tasks.taskspec import parse_task_file
from mcpworld.worlds.validate import NAME_RE

PKG = "synth_world"  # the package's directory inside a worker's scratch directory
PRELOAD = ("json", "sqlmodel", "mcpworld.worlds.validate", "mcpworld.synth.sandbox.jobs",
           "mcpworld.synth.sandbox.packages", "mcpworld.agent.policies")
CHECK_LIMITS = Limits(cpu_s=60, wall_s=120, memory_mb=1536, file_mb=16, open_files=128)  # validate + audit
log = logging.getLogger("mcpworld.synth")
TASK_FIELD = re.compile(r"^task (\S+?)(?::|$)")
CODE = ("models.py", "data.py", "tools.py")  # what the model writes as code; tasks.json is its data
PACKAGE_INIT = '''"""A world synthesized by `mcpworld synth world` from a scenario (see world.json).

models.py, data.py and tools.py were written by a model, and tasks.json holds its tasks and rules as data.
This file is not: inside a worker process it imports the generated modules; anywhere else it serves them
through resource-limited workers. The tasks and rules are read from tasks.json, never executed.
"""

from pathlib import Path

from mcpworld.synth.tasks.taskspec import load_synthesized

world = load_synthesized(Path(__file__).parent, __name__)
'''
TASKS_PY = '''"""The tasks of this synthesized world: data in tasks.json (written by mcpworld, not by the model)."""

from pathlib import Path

from mcpworld.synth.tasks.taskspec import load_task_file

tasks = [t.to_task() for t in load_task_file(Path(__file__).parent / "tasks.json").tasks]
'''


class StageError(Exception):
    """A stage's output did not survive execution; the message is what the model is shown."""


@dataclass
class StageRecord:
    stage: str
    attempts: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


class SynthesisFailed(Exception):
    def __init__(self, record: StageRecord, last: str = ""):
        super().__init__(f"stage {record.stage} failed after {record.attempts} attempt(s): "
                         f"{record.errors[-1] if record.errors else 'no output'}")
        self.record, self.last = record, last


@dataclass
class Synthesis:
    """What one scenario produced: where the world is, how each stage went, what was dropped."""

    scenario: str
    name: str
    ok: bool
    path: str | None = None
    stages: list[StageRecord] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    drop_reasons: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    tools: int = 0
    tasks: int = 0
    registry: str = ""
    skipped: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def slug(scenario: str) -> str:
    """A world name from a scenario: its first words, lowercase, joined with '-'."""
    words = [w for w in re.split(r"[^a-z0-9]+", scenario.lower()) if w and w not in ("a", "an", "the", "of")]
    name = "-".join(words[:4])[:40].strip("-") or "world"
    if not name[0].isalpha():
        name = "w-" + name
    return name if NAME_RE.match(name) else "synth-world"


def _files(sources: dict[str, str], meta: dict[str, Any] | None = None) -> dict[str, str]:
    """The package's files for a worker: the generated code, then (for a whole package) ours and tasks.json."""
    files = {f"{PKG}/{name}": text for name, text in sources.items() if name in CODE}
    if meta is None:
        files[f"{PKG}/__init__.py"] = ""
    else:
        files[f"{PKG}/__init__.py"] = PACKAGE_INIT
        files[f"{PKG}/tasks.py"] = TASKS_PY
        files[f"{PKG}/tasks.json"] = sources["tasks.json"]
        files[f"{PKG}/{MANIFEST}"] = json.dumps(meta, indent=1)
    return files


def _problem_lines(report: dict[str, Any]) -> list[str]:
    lines = [f"{p['field']}: {p['message']}" for p in report["problems"]]
    return lines + [f"task {tid}: the reward-hacking audit: {why}" for tid, why in report.get("audit", {}).items()]


def _job_error(result: JobResult) -> str:
    tail = result.traceback.strip().splitlines()
    where = [line for line in tail if PKG in line][-3:]
    output = ["output: " + result.output[-800:]] if result.output else []
    return "\n".join([result.error or "failed", *where, *output])


@dataclass
class Pipeline:
    client: ChatClient
    max_retries: int = 3
    limits: Limits = CHECK_LIMITS

    @property
    def worker(self) -> Worker:
        return shared_worker(self.limits, PRELOAD)

    def _run(self, entry: str, files: dict[str, str], module: str = "mcpworld.synth.sandbox.jobs", **args: Any) -> Any:
        result = self.worker.run(f"{module}:{entry}", args, files=files)
        if not result.ok:
            raise StageError(_job_error(result))
        return result.value

    async def _stage(self, stage: str, scenario: str, context: dict[str, str],
                     check: Callable[[str], Any]) -> tuple[str, Any, StageRecord]:
        """Ask, execute, and on failure ask again with the error, until it works or retries run out."""
        record = StageRecord(stage)
        began = time.perf_counter()
        messages = prompts.stage_messages(stage, scenario, context)
        text = ""
        try:
            for _ in range(1 + self.max_retries):
                record.attempts += 1
                text = (await self.client.complete(messages)).message.get("content") or ""
                try:
                    return text, check(text), record
                except StageError as exc:
                    record.errors.append(str(exc))
                    messages = [*messages, {"role": "assistant", "content": text}, retry_message(str(exc))]
            raise SynthesisFailed(record, text)
        finally:
            record.seconds = round(time.perf_counter() - began, 3)

    async def synthesize(self, scenario: str, name: str | None = None, out_dir: Path | None = None,
                         install: bool = True, registry: str | None = None) -> Synthesis:
        """Run every stage; write, validate, install and register the world. Never raises for model output."""
        name = name or slug(scenario)
        out = Synthesis(scenario=scenario, name=name, ok=False)
        try:
            await self._all_stages(scenario, name, out, out_dir, install, registry)
        except SynthesisFailed as exc:
            out.stages.append(exc.record)
            out.problems.append(str(exc))
        except (StageError, LLMError, InstallError) as exc:  # the model endpoint broke, or a final step did
            out.problems.append(f"{type(exc).__name__}: {exc}")
        return out

    async def _all_stages(self, scenario: str, name: str, out: Synthesis, out_dir: Path | None, install: bool,
                          registry: str | None) -> None:
        sources: dict[str, str] = {}
        context: dict[str, str] = {}

        def plan_check(text: str) -> dict[str, Any]:
            try:
                plan = parse_json(text)
            except ValueError as exc:
                raise StageError(f"not JSON: {exc}") from None
            tasks = plan.get("tasks") if isinstance(plan, dict) else None
            if not tasks or not all(isinstance(t, dict) and t.get("id") and t.get("instruction") for t in tasks):
                raise StageError('expected {"title", "description", "tasks": [{"id", "kind", "instruction"}, ...]}')
            if len({t["id"] for t in tasks}) != len(tasks):
                raise StageError("task ids must be unique")
            return plan

        _, plan, record = await self._stage("tasks", scenario, context, plan_check)
        out.stages.append(record)
        context["plan"] = json.dumps(plan, indent=1, ensure_ascii=False)

        for stage, file, entry in (("schema", "models.py", "check_schema"), ("seed", "data.py", "check_seed"),
                                   ("tools", "tools.py", "check_tools")):
            def check(text: str, file: str = file, entry: str = entry) -> Any:
                code = extract_block(text)
                value = self._run(entry, _files({**sources, file: code}), package=PKG)
                sources[file] = code
                return value

            _, value, record = await self._stage(stage, scenario, context, check)
            out.stages.append(record)
            context[file] = sources[file]
            if stage == "seed":
                context["seeded rows"] = json.dumps({"counts": value["rows"], "samples": value["samples"]},
                                                    default=str)[:6000]
            if stage == "tools":
                context["tool signatures"] = json.dumps(value["tools"], indent=1)

        meta = {"name": name, "title": str(plan.get("title") or name.replace("-", " ").title())[:80],
                "description": _one_line(str(plan.get("description") or scenario)), "scenario": scenario.strip(),
                "tags": ["synthesized"], "version": "1.0.0", "dropped": [], "drop_reasons": {},
                "source": "mcpworld synth world (AWM pipeline)"}

        def verify_check(text: str) -> dict[str, Any]:
            try:
                spec = parse_task_file(parse_json(text))
            except ValueError as exc:  # not JSON, or not tasks.json (pydantic's ValidationError is a ValueError)
                detail = _validation_text(exc) if isinstance(exc, ValidationError) else f"not JSON: {exc}"
                raise StageError(f"tasks.json is not valid: {detail}") from None
            sources["tasks.json"] = json.dumps(spec.model_dump(mode="json"), indent=1, ensure_ascii=False) + "\n"
            report = self._run("validate_package", _files(sources, meta), package=PKG)
            if report["problems"] or report["audit"]:
                raise StageError("`mcpworld world validate` and `mcpworld world audit` found:\n"
                                 + "\n".join(_problem_lines(report)))
            return report

        try:
            _, report, record = await self._stage("verifiers", scenario, context, verify_check)
        except SynthesisFailed as exc:
            record = exc.record
            report = self._drop_broken_tasks(sources, meta, exc)
        out.stages.append(record)
        out.dropped, out.drop_reasons = list(meta["dropped"]), dict(meta["drop_reasons"])
        meta["sandbox"] = self._run("describe", _files(sources, meta), module="mcpworld.synth.sandbox.packages",
                                    path=PKG)
        path = _write(out_dir or Path(tempfile.mkdtemp(prefix="mcpworld-synth-")) / name, sources, meta)
        if install:
            path = install_package(path, name)
            out.registry = register_record(name, meta["title"], meta["description"], meta["version"], meta["tags"],
                                           len(report["tasks"]), report["tools"], "synth", registry).message
        out.path, out.ok = str(path), True
        out.tools, out.tasks = report["tools"], len(report["tasks"])

    def _drop_broken_tasks(self, sources: dict[str, str], meta: dict[str, Any],
                           failure: SynthesisFailed) -> dict[str, Any]:
        """Keep the tasks that validate and pass the audit: drop the others, if nothing else is wrong."""
        if "tasks.json" not in sources:
            raise failure
        report = self._run("validate_package", _files(sources, meta), package=PKG)
        reasons: dict[str, str] = {}
        for p in report["problems"]:
            m = TASK_FIELD.match(p["field"])
            if m is None:
                raise failure
            reasons.setdefault(m.group(1), f"{p['field']}: {p['message']}")
        for tid, why in report["audit"].items():
            reasons.setdefault(tid, why)
        if not reasons or set(reasons) >= set(report["tasks"]):
            raise failure
        meta["dropped"] = sorted(reasons)
        meta["drop_reasons"] = {tid: reasons[tid] for tid in sorted(reasons)}
        for tid in meta["dropped"]:
            log.warning("%s: dropped synthesized task %s: %s", meta["name"], tid, reasons[tid])
        report = self._run("validate_package", _files(sources, meta), package=PKG, audit=False)
        if report["problems"]:
            raise failure
        return report


def _validation_text(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors()[:12])


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 100 else line[:97].rsplit(" ", 1)[0] + "..."


def _write(dest: Path, sources: dict[str, str], meta: dict[str, Any]) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in CODE:
        (dest / name).write_text(sources[name], encoding="utf-8")
    (dest / "tasks.json").write_text(sources["tasks.json"], encoding="utf-8")
    (dest / "tasks.py").write_text(TASKS_PY, encoding="utf-8")
    (dest / "__init__.py").write_text(PACKAGE_INIT, encoding="utf-8")
    (dest / MANIFEST).write_text(json.dumps(meta, indent=1, ensure_ascii=False), encoding="utf-8")
    return dest


def existing_world_ok(name: str) -> bool:
    """Resume support: the world is installed and still validates (generated code checked in workers)."""
    from mcpworld.worlds.validate import validate

    path = user_worlds_dir() / name
    if not (path / "__init__.py").is_file():
        return False
    world, problems = validate(path)
    return world is not None and not problems


def read_scenarios(path: Path) -> list[tuple[str, str | None]]:
    """Scenarios from a file: one per line, or JSONL with {"scenario": ..., "name": ...}."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("{"):
            doc = json.loads(line)
            out.append((str(doc["scenario"]), doc.get("name")))
        else:
            out.append((line, None))
    return out


__all__ = ["Pipeline", "Registration", "Synthesis", "existing_world_ok", "read_scenarios", "slug"]
