"""Synthesized world packages: generated code runs only in workers, whoever loads the package.

A synthesized package is in the ordinary world format (models.py, data.py, tools.py, tasks.py written by a
model), but its `__init__.py` is ours and calls `load_package`:

- inside a worker (MCPWORLD_IN_WORKER=1) it imports the generated modules and returns the real World;
- anywhere else (a server, `world validate`, the CLI) it returns a proxy World built from `world.json`:
  tables re-created from the generated DDL (SQL text, no Python), the seed as recorded rows, tools whose
  typed signatures come from the real tools' JSON Schemas, tasks whose verifiers are proxies too. A tool
  call ships the episode's database (serialized bytes) to a warm worker that has the package imported,
  runs the real tool there on a private copy, and returns the changed rows, which are applied here in the
  call's transaction, so the change log, diff and rollback behave exactly as for a native world.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import random
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import create_engine
from sqlmodel import Session

from mcpworld.core.models import ToolCall, Verdict
from mcpworld.synth.sandbox.changes import change_statements, insert_sql
from mcpworld.synth.sandbox.signatures import proxy_tool
from mcpworld.synth.sandbox.worker import Limits, Worker, in_worker, shared_worker
from mcpworld.worlds.answers import AnswerPart
from mcpworld.worlds.world import Outcome, Rule, Task, ToolError, World, world_base

MANIFEST = "world.json"
SOURCES = ("models.py", "data.py", "tools.py", "tasks.py")
LIMITS = Limits(cpu_s=10, wall_s=20, memory_mb=1024, file_mb=16, open_files=64)
PACKAGE_INIT = '''"""{title}: synthesized by `mcpworld synth world` from a scenario.

models.py, data.py, tools.py and tasks.py were written by a model. This file is not: inside a worker
process it imports them; anywhere else it serves them through resource-limited workers.
"""

from pathlib import Path

from mcpworld.synth.sandbox.packages import load_package

world = load_package(Path(__file__).parent, __name__)
'''


def source_hash(path: Path) -> str:
    digest = hashlib.sha256()
    for name in SOURCES:
        file = path / name
        digest.update(name.encode() + b"\0" + (file.read_bytes() if file.is_file() else b"") + b"\0")
    return digest.hexdigest()


def load_package(path: Path, module_name: str) -> World:
    """The package's World: the real one inside a worker, a proxy everywhere else."""
    meta = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    if in_worker():
        return _direct(meta, module_name)
    return _proxied(path, meta)


def _direct(meta: dict[str, Any], module_name: str) -> World:
    import importlib

    models = importlib.import_module(f"{module_name}.models")
    data = importlib.import_module(f"{module_name}.data")
    tools = importlib.import_module(f"{module_name}.tools")
    tasks = importlib.import_module(f"{module_name}.tasks")
    dropped = set(meta.get("dropped", []))
    functions = [f for f in vars(tools).values() if callable(f) and hasattr(f, "__mcpworld_tool__")
                 and getattr(f, "__module__", None) == tools.__name__]
    task_list = getattr(tasks, "tasks", None) or getattr(tasks, "TASKS", [])
    return World(name=meta["name"], title=meta["title"], description=meta["description"], scenario=meta["scenario"],
                 base=models.Base, seed=data.seed, tools=functions,
                 tasks=[t for t in task_list if t.id not in dropped], version=meta.get("version", "1.0.0"),
                 tags=meta.get("tags", []), source=meta.get("source", ""))


# -- the proxy World (server side) ---------------------------------------------------------------------

def package_worker(path: Path) -> Worker:
    """A warm worker with this package imported and its template built (children fork from it)."""
    path = path.resolve()
    return shared_worker(LIMITS, ("mcpworld.synth.sandbox.jobs", "mcpworld.synth.sandbox.packages"),
                         binds=(str(path),), warm=((f"{__name__}:warm", (("path", str(path)),)),))


def describe_in_worker(path: Path) -> dict[str, Any]:
    result = package_worker(path).run(f"{__name__}:describe", {"path": str(path.resolve())})
    if not result.ok:
        raise ToolError(f"cannot describe synthesized world {path.name}: {result.error}")
    return result.value


def _raw(db: Session) -> Any:
    return db.connection().connection.driver_connection


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def apply_changes(db: Session, changes: list[dict[str, Any]], primary_keys: dict[str, tuple[str, ...]]) -> None:
    """Replay a worker's row changes on the episode, in the current transaction."""
    conn = db.connection()
    for sql, params in change_statements(changes, primary_keys):
        conn.exec_driver_sql(sql, params)


def _proxied(path: Path, meta: dict[str, Any]) -> World:
    desc = meta.get("sandbox")
    if not desc or desc.get("hash") != source_hash(path):
        desc = describe_in_worker(path)
    base = world_base()
    engine = create_engine("sqlite://")
    with engine.begin() as conn:
        for statement in desc["ddl"]:
            conn.exec_driver_sql(statement)
    base.metadata.reflect(bind=engine)
    engine.dispose()
    primary_keys = {name: tuple(c.name for c in t.primary_key.columns) for name, t in base.metadata.tables.items()}

    def seed(db: Session) -> None:
        conn = db.connection()
        for table, rows in desc["rows"].items():
            for row in rows:
                cols = list(row)
                conn.exec_driver_sql(insert_sql(table, cols), tuple(row[c] for c in cols))

    def run(entry: str, args: dict[str, Any]) -> Any:
        result = package_worker(path).run(f"{__name__}:{entry}", {"path": str(path.resolve()), **args})
        if not result.ok:
            raise ToolError(f"the world's worker failed: {result.error}")
        return result.value

    def make_call(name: str) -> Any:
        def call(db: Session, arguments: dict[str, Any]) -> Any:
            from mcpworld.core.tools import to_jsonable

            out = run("call", {"tool": name, "arguments": to_jsonable(arguments), "db": _b64(_raw(db).serialize()),
                               "seed": db.info["rng"].getrandbits(31)})
            if "error" in out:
                raise ToolError(out["error"])
            apply_changes(db, out["changes"], primary_keys)
            return out["value"]
        return call

    def make_setup(task_id: str) -> Any:
        def setup(db: Session) -> None:
            changes = run("setup", {"task": task_id, "db": _b64(_raw(db).serialize())})["changes"]
            apply_changes(db, changes, primary_keys)
        return setup

    def make_verify(task_id: str) -> Any:
        def verify(o: Outcome) -> Verdict:
            out = run("verify", {"task": task_id, "initial": _b64(_raw(o.initial).serialize()),
                                 "final": _b64(_raw(o.final).serialize()), "answer": o.answer})
            return Verdict.model_validate(out)
        return verify

    tools = [proxy_tool(t["name"], t["description"], t["input_schema"], make_call(t["name"]), writes=t["writes"],
                        destructive=t["destructive"], idempotent=t["idempotent"], title=t.get("title"),
                        timeout_s=LIMITS.wall_s + 10)
             for t in desc["tools"]]
    parts = TypeAdapter(list[AnswerPart])
    tasks = [Task(id=t["id"], instruction=t["instruction"],
                  verify=make_verify(t["id"]) if t.get("has_verify", True) else None,
                  solution=[ToolCall.model_validate(c) for c in t["solution"]], answer=t["answer"], kind=t["kind"],
                  setup=make_setup(t["id"]) if t["has_setup"] else None, rubric=t["rubric"], split=t["split"],
                  difficulty=t["difficulty"], expect=parts.validate_python(t.get("expect", [])),
                  reason=t.get("reason"),
                  alternatives=[[ToolCall.model_validate(c) for c in alt] for alt in t.get("alternatives", [])])
             for t in desc["tasks"]]
    return World(name=meta["name"], title=meta["title"], description=meta["description"], scenario=meta["scenario"],
                 base=base, seed=seed, tools=tools, tasks=tasks, version=meta.get("version", "1.0.0"),
                 tags=meta.get("tags", []), clock=datetime.fromisoformat(desc["clock"]), source=meta.get("source", ""),
                 rules=[Rule(r["id"], r["text"], tuple(r["cues"]), r.get("enforced", True))
                        for r in desc.get("rules", [])],
                 free_fields={k: tuple(v) for k, v in desc.get("free_fields", {}).items()},
                 max_answer_chars=desc.get("max_answer_chars", 400))


# -- worker side: these run inside the package's worker ------------------------------------------------

_runtimes: dict[str, Any] = {}


def _runtime(path: str) -> Any:
    if path not in _runtimes:
        from mcpworld.worlds.loader import load_world
        from mcpworld.worlds.runtime import WorldRuntime

        runtime = WorldRuntime(load_world(Path(path)))
        runtime.template(None)
        _runtimes[path] = runtime
    return _runtimes[path]


def warm(path: str) -> None:
    """Zygote start-up: import the generated package and build its template once, before any fork."""
    _runtime(path)


def _episode(runtime: Any, data: bytes, seed: int, task: Any = None, template: bytes = b"") -> Any:
    from mcpworld.worlds.database import engine_for
    from mcpworld.worlds.runtime import Episode, Template

    conn = runtime.open_connection(data)
    return Episode(id="worker", task=task, seed=seed, template=Template(template), conn=conn,
                   engine=engine_for(conn), rng=random.Random(seed))


def _changes(runtime: Any, before: Any, after: Any) -> list[dict[str, Any]]:
    from mcpworld.worlds.database import CHANGES_TABLE

    out = []
    for table, key in after.execute(f"SELECT tbl, pk FROM {CHANGES_TABLE}").fetchall():
        old = runtime.read_rows(before, table, [key]).get(key)
        new = runtime.read_rows(after, table, [key]).get(key)
        if old != new:
            out.append({"table": table, "before": old, "after": new})
    return out


def call(path: str, tool: str, arguments: dict[str, Any], db: str, seed: int) -> dict[str, Any]:
    """Run one real tool on a private copy of the episode's database; return its value and row changes."""
    from mcpworld.worlds.database import CHANGES_TABLE

    runtime = _runtime(path)
    data = base64.b64decode(db)
    episode = _episode(runtime, data, seed)
    episode.conn.execute(f"DELETE FROM {CHANGES_TABLE}")
    result = runtime.call(episode, tool, arguments)
    if result.error is not None:
        return {"error": result.error}
    return {"value": result.value, "changes": _changes(runtime, runtime.open_connection(data), episode.conn)}


def setup(path: str, task: str, db: str) -> dict[str, Any]:
    from mcpworld.worlds.database import CHANGES_TABLE

    runtime = _runtime(path)
    data = base64.b64decode(db)
    episode = _episode(runtime, data, 0)
    episode.conn.execute(f"DELETE FROM {CHANGES_TABLE}")
    with runtime.new_session(episode.engine, random.Random(0)) as session:
        runtime.tasks[task].setup(session)
        session.commit()
    return {"changes": _changes(runtime, runtime.open_connection(data), episode.conn)}


def verify(path: str, task: str, initial: str, final: str, answer: str | None) -> dict[str, Any]:
    """The task's own checks, run on the package's code; the reference and typed answers are judged outside."""
    from mcpworld.worlds.verify import normalize_verdict

    runtime = _runtime(path)
    episode = _episode(runtime, base64.b64decode(final), 0, runtime.tasks[task], base64.b64decode(initial))
    return normalize_verdict(runtime.judge.task_checks(episode, answer)).model_dump(mode="json")


def describe(path: str) -> dict[str, Any]:
    """What the proxy World needs: DDL, seeded rows, tool schemas and annotations, tasks without verifiers."""
    runtime = _runtime(path)
    conn = runtime.open_connection(runtime.template(None).data)
    ddl = [sql for (sql,) in conn.execute(
        "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE '_mcpworld%' AND name NOT LIKE "
        "'sqlite_%' AND type IN ('table', 'index') ORDER BY type = 'index', rowid")]
    rows = {t: list(runtime.read_rows(conn, t).values()) for t in runtime.table_names}
    tools = [{"name": s.name, "description": s.description, "input_schema": s.input_schema, "writes": s.meta.writes,
              "destructive": s.meta.destructive, "idempotent": s.meta.idempotent, "title": s.meta.title}
             for s in runtime.tools.values()]
    tasks = [{"id": t.id, "instruction": t.instruction, "solution": [c.model_dump() for c in t.solution],
              "answer": t.answer, "kind": t.kind, "rubric": t.rubric, "split": t.split, "difficulty": t.difficulty,
              "has_setup": t.setup is not None, "has_verify": t.verify is not None,
              "expect": [p.model_dump(mode="json") for p in t.expect], "reason": t.reason,
              "alternatives": [[c.model_dump() for c in alt] for alt in t.alternatives]}
             for t in runtime.tasks.values()]
    world = runtime.world
    return {"ddl": ddl, "rows": rows, "tools": tools, "tasks": tasks, "clock": world.clock.isoformat(),
            "rules": [dataclasses.asdict(r) for r in world.rules], "free_fields": world.free_fields,
            "max_answer_chars": world.max_answer_chars, "hash": source_hash(Path(path))}
