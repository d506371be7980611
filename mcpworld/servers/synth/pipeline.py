"""The AWM pipeline: a world from a scenario, each stage executed and regenerated with its error fed back.

Stages: tasks (a plan) -> schema (models.py) -> seed (data.py) -> tools (tools.py) -> verifiers (tasks.py).
Every code stage runs in a resource-limited worker (`jobs.check_*`, then `world validate` itself), never in
this interpreter. A stage that fails is asked again in the same conversation with the error appended, up to
`max_retries` times; attempts and errors are recorded per stage. When only some tasks stay broken (a no-op
passes, or the reference fails), those tasks are dropped and the package validated again.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from mcpworld.llm import ChatClient, LLMError
from mcpworld.paths import user_worlds_dir
from mcpworld.servers.envs.validate import NAME_RE
from mcpworld.servers.synth import prompts
from mcpworld.servers.synth.install import Registration, install_package, register_record
from mcpworld.servers.synth.sandboxed import MANIFEST, PACKAGE_INIT, SOURCES
from mcpworld.servers.synth.worker import JobResult, Limits, Worker, shared_worker

PKG = "synth_world"  # the package's directory inside a worker's scratch directory
PRELOAD = ("json", "sqlmodel", "mcpworld.servers.envs.validate", "mcpworld.servers.synth.jobs",
           "mcpworld.servers.synth.sandboxed", "mcpworld.agent.policies")
CHECK_LIMITS = Limits(cpu_s=30, wall_s=60, memory_mb=1536, file_mb=16, open_files=128)
TASK_FIELD = re.compile(r"^task (\S+?)(?::|$)")


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
    files = {f"{PKG}/{name}": text for name, text in sources.items()}
    if meta is None:
        files[f"{PKG}/__init__.py"] = ""
    else:
        files[f"{PKG}/__init__.py"] = PACKAGE_INIT.format(title=meta["title"].replace('"', "'"))
        files[f"{PKG}/{MANIFEST}"] = json.dumps(meta, indent=1)
    return files


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

    def _run(self, entry: str, files: dict[str, str], module: str = "jobs", **args: Any) -> Any:
        result = self.worker.run(f"mcpworld.servers.synth.{module}:{entry}", args, files=files)
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
                    messages = [*messages, {"role": "assistant", "content": text}, prompts.retry_message(str(exc))]
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
        except (StageError, LLMError) as exc:  # the model endpoint broke, or a final step did
            out.problems.append(f"{type(exc).__name__}: {exc}")
        return out

    async def _all_stages(self, scenario: str, name: str, out: Synthesis, out_dir: Path | None, install: bool,
                          registry: str | None) -> None:
        sources: dict[str, str] = {}
        context: dict[str, str] = {}

        def plan_check(text: str) -> dict[str, Any]:
            try:
                plan = prompts.parse_json(text)
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
                code = prompts.extract_block(text)
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
                "tags": ["synthesized"], "version": "1.0.0", "dropped": [],
                "source": "mcpworld synth world (AWM pipeline)"}

        def verify_check(text: str) -> dict[str, Any]:
            code = prompts.extract_block(text)
            report = self._run("validate_package", _files({**sources, "tasks.py": code}, meta), package=PKG)
            sources["tasks.py"] = code
            if report["problems"]:
                raise StageError("`mcpworld world validate` found:\n" + "\n".join(
                    f"{p['field']}: {p['message']}" for p in report["problems"]))
            return report

        try:
            _, report, record = await self._stage("verifiers", scenario, context, verify_check)
        except SynthesisFailed as exc:
            record = exc.record
            report = self._drop_broken_tasks(sources, meta, exc)
        out.stages.append(record)
        out.dropped = list(meta["dropped"])
        meta["sandbox"] = self._run("describe", _files(sources, meta), module="sandboxed", path=PKG)
        path = _write(out_dir or Path(tempfile.mkdtemp(prefix="mcpworld-synth-")) / name, sources, meta)
        if install:
            path = install_package(path, name)
            out.registry = register_record(name, meta["title"], meta["description"], meta["version"], meta["tags"],
                                           len(report["tasks"]), report["tools"], "synth", registry).message
        out.path, out.ok = str(path), True
        out.tools, out.tasks = report["tools"], len(report["tasks"])

    def _drop_broken_tasks(self, sources: dict[str, str], meta: dict[str, Any],
                           failure: SynthesisFailed) -> dict[str, Any]:
        """Keep the tasks that validate: drop those with per-task problems, if nothing else is wrong."""
        if "tasks.py" not in sources:
            raise failure
        report = self._run("validate_package", _files(sources, meta), package=PKG)
        broken = {m.group(1) for p in report["problems"] if (m := TASK_FIELD.match(p["field"]))}
        if not broken or any(not TASK_FIELD.match(p["field"]) for p in report["problems"]) or \
                broken >= set(report["tasks"]):
            raise failure
        meta["dropped"] = sorted(broken)
        report = self._run("validate_package", _files(sources, meta), package=PKG)
        if report["problems"]:
            raise failure
        return report


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 100 else line[:97].rsplit(" ", 1)[0] + "..."


def _write(dest: Path, sources: dict[str, str], meta: dict[str, Any]) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in SOURCES:
        (dest / name).write_text(sources[name], encoding="utf-8")
    (dest / "__init__.py").write_text(PACKAGE_INIT.format(title=meta["title"].replace('"', "'")), encoding="utf-8")
    (dest / MANIFEST).write_text(json.dumps(meta, indent=1, ensure_ascii=False), encoding="utf-8")
    return dest


def existing_world_ok(name: str) -> bool:
    """Resume support: the world is installed and still validates (generated code checked in workers)."""
    from mcpworld.servers.envs.validate import validate

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
