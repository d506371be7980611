"""Serve Agent-World environments as mcpworld worlds, with their own tool code run in limited workers.

An Agent-World environment is JSON tables (one file per collection) plus tools given as JSON Schema and a
Python implementation that reads and writes those files. Importing one writes a thin world package:

- each table becomes a SQLite table of (key, pos, data JSON), so the runtime's in-memory forks give every
  episode its own copy for free, and the change-log diff works row by row;
- each tool becomes a typed proxy whose schema comes from the environment's JSON Schema. A call reads the
  episode's tables, runs the implementation in a worker child (tables written to a private MCP_DB_DIR, clock
  frozen at the world's time, `random` seeded from the episode), and writes the tables it changed back, in
  the call's transaction. Implementations never run in the server's interpreter;
- tasks are tool-graph tasks generated at import (the environments ship none), with typed answers, kept
  only when they validate and survive the reward-hacking audit, saved as tasks.json.

Nothing read from the environment is pasted into code: the package's `__init__.py` is constant text, and the
title, tables, tools and tasks are JSON files it loads.
"""

from __future__ import annotations

import json
import re
import shutil
import types as pytypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlmodel import Field as SQLField
from sqlmodel import Session

from mcpworld.core.llm import ChatClient
from mcpworld.core.tools import to_jsonable
from mcpworld.synth.sandbox.signatures import proxy_tool
from mcpworld.synth.sandbox.worker import Limits, shared_worker
from mcpworld.synth.tasks.names import is_read_only_name, snake
from mcpworld.synth.tasks.taskspec import Dropped, SynthTask, load_tasks, save_tasks
from mcpworld.worlds.world import World, now, world_base

ENTRY = "mcpworld.synth.sandbox.jobs:agent_world_call"
PRELOAD = ("json", "datetime", "re", "random", "uuid", "mcpworld.synth.sandbox.jobs")
DEFAULT_LIMITS = Limits(cpu_s=5, wall_s=10, memory_mb=1024, file_mb=32, open_files=64)
PACKAGE_INIT = '''"""An Agent-World environment imported by `mcpworld synth import-agent-world` (see environment.json).

Its tools run the environment's own implementations in limited worker processes, never in this interpreter.
"""

from pathlib import Path

from mcpworld.synth.importers.agent_world import load_package

world = load_package(Path(__file__).parent)
'''


# -- reading Agent-World data --------------------------------------------------------------------------

@dataclass
class Environment:
    env_id: str
    name: str
    description: str
    tools: list[dict[str, Any]]
    tables: dict[str, Any]  # file name -> JSON value
    readme: str = ""
    taxonomy: dict[str, Any] = field(default_factory=dict)
    source: str = ""


ENV_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def find_environments(path: str | Path) -> list[Path]:
    """Checkpoint files under `path` (a checkpoint, an environment_mix folder, or the folder above it)."""
    path = Path(path)
    if path.is_file():
        return [path]
    found = sorted(path.glob("*_step4_checkpoint.json")) or sorted(path.glob("environment_mix/*_step4_checkpoint.json"))
    return found


def read_environment(checkpoint: str | Path) -> Environment:
    checkpoint = Path(checkpoint)
    doc = json.loads(checkpoint.read_text(encoding="utf-8"))
    meta = doc.get("metadata") or {}
    env_id = str(meta.get("env_id") or checkpoint.name.split("_")[0])
    if not ENV_ID_RE.fullmatch(env_id):  # a name from the data, never a path: the folder beside the checkpoint
        raise ValueError(f"{checkpoint}: metadata.env_id {env_id!r} is not an environment id (letters, digits, "
                         "'-', '_', '.'; no path): nothing outside the input folder is read")
    folder = checkpoint.parent / env_id
    tables = {f.name: json.loads(f.read_text(encoding="utf-8")) for f in sorted(folder.glob("*.json"))
              if f.is_file() and not f.is_symlink()}
    tools = (doc.get("data") or {}).get("ToolDesignAgent", {}).get("tool_schemas") or []
    if not tools:
        raise ValueError(f"{checkpoint}: no data.ToolDesignAgent.tool_schemas")
    readme_file = folder / "README.md"
    readme = readme_file.read_text(encoding="utf-8") if readme_file.is_file() and not readme_file.is_symlink() else ""
    return Environment(env_id=env_id, name=str(meta.get("name") or env_id),
                       description=str(meta.get("description") or ""), tools=tools, tables=tables, readme=readme,
                       taxonomy=meta.get("taxonomy") or {}, source=str(checkpoint))


def world_name(env: Environment) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", env.name.lower()).strip("-")[:40].strip("-") or env.env_id
    return f"aw-{slug}"


def _description(text: str, title: str) -> str:
    sentence = re.split(r"(?<=[.!?])\s", text.strip())[0] if text.strip() else title
    return sentence if len(sentence) <= 100 else sentence[:97].rsplit(" ", 1)[0] + "..."


def table_name(file: str) -> str:
    name = snake(Path(file).stem) or "table"
    return name if not name[0].isdigit() else f"t_{name}"


def shape_of(value: Any) -> str:
    """How a table file is laid out: a list keyed by its rows' ids, a list by position, a dict, or a value."""
    if isinstance(value, dict):
        return "dict"
    if isinstance(value, list):
        ids = [r.get("id") if isinstance(r, dict) else None for r in value]
        usable = all(isinstance(i, (str, int)) and not isinstance(i, bool) for i in ids)
        if usable and len(set(map(str, ids))) == len(ids):
            return "list-id"
        return "list"
    return "value"


# -- writing the package -------------------------------------------------------------------------------

def write_package(env: Environment, dest: Path, limits: Limits = DEFAULT_LIMITS, name: str | None = None) -> Path:
    """The thin world package: __init__.py, environment.json, tables/, README.md, and an empty tasks.json."""
    name = name or world_name(env)
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "tables").mkdir(parents=True)
    for file, value in env.tables.items():
        (dest / "tables" / file).write_text(json.dumps(value, ensure_ascii=False, indent=1), encoding="utf-8")
    manifest = {
        "name": name, "env_id": env.env_id, "title": env.name, "description": _description(env.description, env.name),
        "scenario": env.description.strip() or env.name, "source": env.source, "taxonomy": env.taxonomy,
        "tables": {file: {"table": table_name(file), "shape": shape_of(value)} for file, value in env.tables.items()},
        "tools": env.tools, "limits": limits.__dict__,
    }
    (dest / "environment.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
    (dest / "__init__.py").write_text(PACKAGE_INIT, encoding="utf-8")
    (dest / "README.md").write_text(env.readme or f"# {env.name}\n")
    save_tasks(dest / "tasks.json", [])
    return dest


# -- loading: tables, proxies, world -------------------------------------------------------------------

def _rows(value: Any, shape: str) -> list[tuple[str, int, str]]:
    """A table file as (key, position, JSON) rows."""
    dump = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
    if shape == "dict":
        return [(str(k), i, dump(v)) for i, (k, v) in enumerate(value.items())]
    if shape in ("list", "list-id"):
        out, seen = [], set()
        for i, item in enumerate(value):
            key = str(item.get("id")) if shape == "list-id" and isinstance(item, dict) and item.get("id") is not None \
                else f"#{i}"
            if key in seen:
                key = f"#{i}"
            seen.add(key)
            out.append((key, i, dump(item)))
        return out
    return [("value", 0, dump(value))]


def _compose_text(rows: list[tuple[str, int, str]], shape: str) -> str:
    """A table file's JSON text straight from its rows' JSON (no parsing: calls stay cheap)."""
    if shape == "dict":
        return "{" + ",".join(json.dumps(key, ensure_ascii=False) + ":" + data for key, _, data in rows) + "}"
    if shape in ("list", "list-id"):
        return "[" + ",".join(data for _, _, data in rows) + "]"
    return rows[0][2] if rows else "null"


def _fits_shape(value: Any, shape: str) -> bool:
    return isinstance(value, dict) if shape == "dict" else isinstance(value, list) if shape != "value" else True


LAYOUT = "aw_layout"  # file -> current shape: an implementation may turn a dict table into a list


def _make_models(base: type, tables: dict[str, dict[str, str]]) -> dict[str, type]:
    models = {}
    for file, info in tables.items():
        namespace = {
            "__tablename__": info["table"],
            "__table_args__": {"info": {"file": file}},
            "__annotations__": {"key": str, "pos": int, "data": str},
            "key": SQLField(primary_key=True),
            "pos": 0,
        }
        cls_name = "".join(p.title() for p in info["table"].split("_")) or "Table"
        models[file] = pytypes.new_class(cls_name, (base,), {"table": True}, lambda ns, n=namespace: ns.update(n))
    layout = {"__tablename__": LAYOUT, "__annotations__": {"file": str, "tbl": str, "shape": str},
              "file": SQLField(primary_key=True)}
    models[LAYOUT] = pytypes.new_class("AwLayout", (base,), {"table": True}, lambda ns: ns.update(layout))
    return models


def make_proxy(spec: dict[str, Any], tables: dict[str, dict[str, str]], limits: Limits) -> Any:
    """A typed @tool that runs the implementation in a worker on the episode's tables."""
    name, source = spec["name"], spec["implementation"]

    def call(db: Session, args: dict[str, Any]) -> Any:
        from mcpworld.worlds.world import ToolError

        conn = db.connection()
        shapes = dict(conn.exec_driver_sql(f"SELECT file, shape FROM {LAYOUT}").fetchall())
        current = {file: [tuple(r) for r in conn.exec_driver_sql(
            f'SELECT key, pos, data FROM "{info["table"]}" ORDER BY pos')] for file, info in tables.items()}
        texts = {file: _compose_text(rows, shapes[file]) for file, rows in current.items()}
        job = {"source": source, "name": name, "args": to_jsonable(args), "tables": texts,
               "now": now(db).isoformat(), "seed": db.info["rng"].getrandbits(31)}
        result = shared_worker(limits, PRELOAD).run(ENTRY, job)
        if not result.ok:
            raise ToolError(f"{name} failed in its worker: {result.error}")
        value = result.value["result"]
        if isinstance(value, dict) and set(value) == {"error"}:
            error = value["error"]
            raise ToolError(f"{error.get('code', 'ERROR')}: {error.get('message', error)}" if isinstance(error, dict)
                            else str(error))
        for file, new in result.value["changed"].items():
            if file in tables:
                _write_back(conn, file, tables[file]["table"], shapes[file], current[file], new)
        return value

    return proxy_tool(name, spec.get("description") or name, spec.get("parameters") or {}, call,
                      writes=not is_read_only_name(name))


def _write_back(conn: Any, file: str, table: str, shape: str, old: list[tuple[str, int, str]], new: Any) -> None:
    """Apply a table's new content as row deletes, updates and inserts (so the diff names each row)."""
    if not _fits_shape(new, shape):
        shape = shape_of(new)
        conn.exec_driver_sql(f"UPDATE {LAYOUT} SET shape = ? WHERE file = ?", (shape, file))
    existing = {key: (pos, data) for key, pos, data in old}
    fresh = {key: (pos, data) for key, pos, data in _rows(new, shape)}
    for key in existing.keys() - fresh.keys():
        conn.exec_driver_sql(f'DELETE FROM "{table}" WHERE key = ?', (key,))
    for key, (pos, data) in fresh.items():
        if key not in existing:
            conn.exec_driver_sql(f'INSERT INTO "{table}" (key, pos, data) VALUES (?, ?, ?)', (key, pos, data))
        elif existing[key] != (pos, data):
            conn.exec_driver_sql(f'UPDATE "{table}" SET pos = ?, data = ? WHERE key = ?', (pos, data, key))


def load_package(path: str | Path) -> World:
    """The World of an imported package directory (its __init__.py calls this)."""
    path = Path(path)
    manifest = json.loads((path / "environment.json").read_text(encoding="utf-8"))
    tables: dict[str, dict[str, str]] = manifest["tables"]
    limits = Limits(**manifest.get("limits", {}))
    base = world_base()
    models = _make_models(base, tables)
    data = {file: json.loads((path / "tables" / file).read_text(encoding="utf-8")) for file in tables}

    def seed(db: Session) -> None:
        for file, info in tables.items():
            db.add(models[LAYOUT](file=file, tbl=info["table"], shape=info["shape"]))
            db.add_all([models[file](key=k, pos=p, data=d) for k, p, d in _rows(data[file], info["shape"])])

    tasks_file = path / "tasks.json"
    tasks: list[SynthTask] = load_tasks(tasks_file) if tasks_file.is_file() else []
    taxonomy = manifest.get("taxonomy") or {}
    tags = ["agent-world", *[snake(str(taxonomy[k])).replace("_", "-") for k in ("L1_name", "L2_name")
                             if taxonomy.get(k)]]
    return World(
        name=manifest["name"], title=manifest["title"], description=manifest["description"],
        scenario=manifest["scenario"], base=base, seed=seed,
        tools=[make_proxy(spec, tables, limits) for spec in manifest["tools"]],
        tasks=[t.to_task() for t in tasks], tags=tags, source=f"agent-world {manifest['env_id']}",
    )


# -- the import ----------------------------------------------------------------------------------------

@dataclass
class Imported:
    name: str
    path: Path
    tools: int
    tasks: int
    problems: list[str]
    registration: str = ""
    dropped: list[Dropped] = field(default_factory=list)


async def import_environment(checkpoint: str | Path, out_dir: Path, *, n_tasks: int = 8, seed: int = 0,
                             client: ChatClient | None = None, limits: Limits = DEFAULT_LIMITS,
                             name: str | None = None) -> Imported:
    """Convert one environment, generate graph tasks for it, save them, and validate the package.

    Only tasks that validate and that no wrong policy of the audit passes are kept; `Imported.dropped` says
    which were dropped and why.
    """
    from mcpworld.synth.tasks.graph import graph_tasks
    from mcpworld.worlds.validate import validate

    env = read_environment(checkpoint)
    name = name or world_name(env)
    package = write_package(env, out_dir / name, limits, name)
    dropped: list[Dropped] = []
    tasks = await graph_tasks(load_package(package), n_tasks, seed, client=client, dropped=dropped)
    for i, task in enumerate(tasks):
        task.split = "test" if i % 4 == 3 else "train"
    save_tasks(package / "tasks.json", tasks)
    world, problems = validate(package)
    found = [str(p) for p in problems]
    if not tasks:
        found.insert(0, f"{name}: no honest task found: {len(dropped)} candidate(s) were dropped by validation or "
                        "the audit, and no other chain of its tools gave a question with a checkable answer")
    return Imported(name=name, path=package, tools=len(world.tools) if world else 0, tasks=len(tasks),
                    problems=found, dropped=dropped)
