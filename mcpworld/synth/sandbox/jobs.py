"""Job entry points that run inside a worker child (`worker.Worker.run("...jobs:NAME", args)`).

This is the trusted harness around untrusted code: it writes nothing outside the child's temporary
directory, and returns plain JSON. Nothing here is called in the server's own interpreter.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import json
import os
import random
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

BUG_RE = re.compile(r"failed: (NameError|AttributeError|TypeError|UnboundLocalError|ImportError|ModuleNotFoundError|"
                    r"SyntaxError|IndexError|KeyError|ZeroDivisionError|AssertionError|RecursionError)")


# -- plain functions -----------------------------------------------------------------------------------

def call_function(source: str, name: str, args: dict[str, Any]) -> Any:
    """Exec `source` and call its function `name` with `args` (for ad-hoc snippets and tests)."""
    namespace: dict[str, Any] = {"__name__": "snippet"}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace[name](**args)


_REAL_DATETIME, _REAL_DATE = _dt.datetime, _dt.date


def freeze_time(now_iso: str, seed: int) -> None:
    """One clock and one seeded generator per call, so replays of an imported tool agree. Called again (a worker
    session's next call), it replaces the last call's clock rather than wrapping it."""
    frozen = _REAL_DATETIME.fromisoformat(now_iso)
    if frozen.tzinfo is None:
        frozen = frozen.replace(tzinfo=_dt.timezone.utc)
    base = _REAL_DATETIME

    class FrozenDatetime(base):  # type: ignore[misc, valid-type]
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            value = frozen if tz is not None else frozen.replace(tzinfo=None)
            return cls.fromisoformat(value.astimezone(tz).isoformat() if tz is not None else value.isoformat())

        @classmethod
        def utcnow(cls) -> Any:
            return cls.fromisoformat(frozen.astimezone(_dt.timezone.utc).replace(tzinfo=None).isoformat())

        @classmethod
        def today(cls) -> Any:
            return cls.now()

    class FrozenDate(_REAL_DATE):  # type: ignore[misc, valid-type]
        @classmethod
        def today(cls) -> Any:
            return cls.fromisoformat(frozen.date().isoformat())

    _dt.datetime = FrozenDatetime  # type: ignore[misc]
    _dt.date = FrozenDate  # type: ignore[misc]
    stamp = frozen.timestamp()
    time.time = lambda: stamp  # type: ignore[assignment]
    time.time_ns = lambda: int(stamp * 1e9)  # type: ignore[assignment]
    random.seed(seed)
    uuid.uuid4 = lambda: uuid.UUID(int=random.getrandbits(128), version=4)  # type: ignore[assignment]


def agent_world_call(source: str, name: str, args: dict[str, Any], tables: dict[str, str], now: str,
                     seed: int) -> dict[str, Any]:
    """Run one Agent-World tool implementation on this episode's tables (JSON texts, as files in MCP_DB_DIR).

    Returns the tool's result and the tables it changed (by file name), which the caller writes back
    into the episode's database.
    """
    db = Path("db").resolve()
    db.mkdir()
    for file, text in tables.items():
        (db / file).write_text(text, encoding="utf-8")
    os.environ["MCP_DB_DIR"] = str(db)
    freeze_time(now, seed)
    result = call_function(source, name, args)
    changed: dict[str, Any] = {}
    for path in sorted(db.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        if text == tables.get(path.name):
            continue
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if path.name not in tables or value != json.loads(tables[path.name]):
            changed[path.name] = value
    return {"result": result, "changed": changed}


def run_computation(script: str, data: Any) -> dict[str, Any]:
    """Run a generated computation script's `compute(data)`; it returns {"expected": value} (or the value)."""
    namespace: dict[str, Any] = {"__name__": "computation", "re": re}
    exec(compile(script, "<computation>", "exec"), namespace)
    raw = namespace["compute"](data)
    value = raw.get("expected") if isinstance(raw, dict) else raw
    return {"expected": value if isinstance(value, (int, float, str, type(None))) else repr(value)}


# -- checks for synthesized world packages -------------------------------------------------------------

def _import(package: str, module: str) -> Any:
    root = str(Path.cwd())
    if root not in sys.path:
        sys.path.insert(0, root)
    return importlib.import_module(f"{package}.{module}")


def _tools_of(module: Any) -> list[Any]:
    return [f for f in vars(module).values()
            if callable(f) and hasattr(f, "__mcpworld_tool__") and getattr(f, "__module__", None) == module.__name__]


def _runtime(package: str, with_tools: bool) -> Any:
    from mcpworld.worlds.runtime import WorldRuntime
    from mcpworld.worlds.world import World

    models = _import(package, "models")
    data = _import(package, "data")
    tools = _tools_of(_import(package, "tools")) if with_tools else []
    world = World(name="check", title="check", description="check", scenario="check", base=models.Base,
                  seed=data.seed, tools=tools, tasks=[])
    return WorldRuntime(world)


def check_schema(package: str) -> dict[str, Any]:
    """Import models.py and create its tables in memory; report tables and columns."""
    from sqlalchemy import create_engine

    models = _import(package, "models")
    base = getattr(models, "Base", None)
    if base is None:
        raise ValueError("models.py must define Base = world_base() and derive every table from it")
    tables = base.metadata.tables
    if not tables:
        raise ValueError("models.py defines no tables (classes need `table=True`)")
    for name, table in tables.items():
        if not table.primary_key.columns:
            raise ValueError(f"table {name} has no primary key")
    base.metadata.create_all(create_engine("sqlite://"))
    return {"tables": {n: [f"{c.name} {c.type}" for c in t.columns] for n, t in tables.items()}}


def check_seed(package: str) -> dict[str, Any]:
    """Build the seeded template exactly as the runtime will (constraints checked at commit)."""
    runtime = _runtime(package, with_tools=False)
    try:
        runtime.template(None)
    except Exception as exc:
        raise ValueError(f"seed failed: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    episode = runtime.fork()
    counts = runtime.table_counts(episode)
    if not any(counts.values()):
        raise ValueError("seed adds no rows")
    samples = {t: runtime.table_rows(episode, t, 3) for t in counts}
    return {"rows": counts, "samples": samples}


def value_pool(runtime: Any, episode: Any) -> dict[str, list[Any]]:
    """Values a parameter may take, by name: every column of every seeded row, under its aliases."""
    from mcpworld.synth.tasks.names import aliases

    pool: dict[str, list[Any]] = {}
    for table in runtime.table_names:
        for row in runtime.table_rows(episode, table, 200):
            for column, value in row.items():
                if value is None or isinstance(value, (bytes, bytearray)):
                    continue
                for name in aliases(column, table):
                    bucket = pool.setdefault(name, [])
                    if value not in bucket and len(bucket) < 50:
                        bucket.append(value)
    return pool


def check_tools(package: str) -> dict[str, Any]:
    """Describe every tool, then call each once on a fork with plausible arguments to catch bugs.

    Business-rule refusals are fine; Python errors (NameError, AttributeError, ...) are reported.
    """
    from mcpworld.core.schemas import definitions, random_value

    runtime = _runtime(package, with_tools=True)
    if not runtime.tools:
        raise ValueError("tools.py defines no @tool functions")
    runtime.template(None)
    rng = random.Random(0)
    bugs, described = [], []
    for spec in runtime.tools.values():
        schema = spec.input_schema
        described.append({"name": spec.name, "description": spec.description.splitlines()[0],
                          "parameters": schema, "writes": spec.meta.writes})
        episode = runtime.fork()
        pool = value_pool(runtime, episode)
        args = {}
        for param in schema.get("required", []):
            options = pool.get(param)
            args[param] = options[0] if options else random_value(schema["properties"][param], rng, definitions(schema))
        result = runtime.call(episode, spec.name, args)
        if result.error and BUG_RE.search(result.error):
            bugs.append(f"{spec.name}({json.dumps(args, default=str)}): {result.error}")
        episode.close()
    if bugs:
        raise ValueError("tool bugs found when calling each tool once:\n" + "\n".join(bugs))
    return {"tools": described}


def validate_package(package: str, audit: bool = True) -> dict[str, Any]:
    """`mcpworld world validate` on the assembled package, inside the worker (it imports generated code).

    With `audit`, the reward-hacking audit (`mcpworld world audit`) is played on every task that validated:
    `audit` maps each task it finds a hole in to the reason (a wrong policy that passed, or a reference or
    paraphrase that failed).
    """
    from mcpworld.worlds.validate import validate

    world, problems = validate(Path(package))
    out: dict[str, Any] = {
        "problems": [{"file": Path(p.file).name, "field": p.field, "message": p.message} for p in problems],
        "name": world.name if world else None, "tools": len(world.tools) if world else 0,
        "tasks": [t.id for t in world.tasks] if world else [], "audit": {}}
    task_field = re.compile(r"^task (\S+?)(?::|$)")
    broken = {m.group(1) for p in problems if (m := task_field.match(p.field))}
    if audit and world is not None and world.tasks and all(task_field.match(p.field) for p in problems):
        from mcpworld.synth.tasks.taskspec import audit_problems
        from mcpworld.worlds.runtime import WorldRuntime

        ids = [t.id for t in world.tasks if t.id not in broken]
        if ids:
            out["audit"] = {tid: d.reason for tid, d in audit_problems(WorldRuntime(world), ids).items()}
    return out
