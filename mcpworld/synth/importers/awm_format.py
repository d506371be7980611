"""AWM's published dataset layout (AgentWorldModel-1K): reading its JSONL files, and its schema and sample rows
as a template that holds together.

AWM publishes one JSONL file per pipeline stage, each record keyed by its scenario's name (normalized the way
AWM and OpenEnv do: lowercase, non-alphanumerics to `_`):

- gen_scenario.jsonl  {"name", "description"}
- gen_tasks.jsonl     {"scenario", "tasks": [instruction, ...]}
- gen_db.jsonl        {"scenario", "db_schema": {"tables": [{"name", "ddl", "indexes": [...]}]}}
- gen_sample.jsonl    {"scenario", "sample_data": {"tables": [{"table_name", "insert_statements": [...]}]}}
- gen_envs.jsonl      {"scenario", "full_code"}: a FastAPI + SQLAlchemy server, one operation id per tool
- gen_verifier.jsonl and gen_verifier.pure_code.jsonl {"scenario", "task_idx", "task",
  "verification": {"code", "raw_response"}}: SQL mode (`verify_task(initial_db_path, final_db_path)` returns
  findings for a judge; `raw_response` is JSON with reasoning, success and failure criteria) and code mode
  (`verify_task_completion(..., final_answer)` returns {"result": "complete" | "others"}).

Dataset SQL runs under an authorizer that refuses ATTACH, DETACH and PRAGMA (`guarded`).
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

DATA_FILES = ("gen_scenario.jsonl", "gen_tasks.jsonl", "gen_db.jsonl", "gen_sample.jsonl", "gen_envs.jsonl",
              "gen_verifier.jsonl", "gen_verifier.pure_code.jsonl")
CLOCK = datetime(2026, 6, 1, 12, 0, 0)
STAMP_COLUMN = re.compile(r"^(created|updated|modified|last_modified|last_updated|inserted|deleted)"
                          r"(_at|_on|_time|_date)?$|timestamp$")


class AwmFormatError(ValueError):
    """The folder is not in AWM's published layout; the message names the file and line."""


def normalize_scenario_name(name: str) -> str:
    """AWM's and OpenEnv's key for a scenario: lowercase, runs of other characters as one `_`."""
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9_]", "_", name.lower())).strip("_")


@dataclass
class AwmScenario:
    """Everything AWM published about one scenario (None where a stage's record is missing)."""

    key: str
    name: str
    description: str = ""
    tasks: list[str] = field(default_factory=list)
    db_schema: dict[str, Any] | None = None
    sample_data: Any = None
    full_code: str | None = None
    code_verifiers: dict[int, dict[str, Any]] = field(default_factory=dict)
    sql_verifiers: dict[int, dict[str, Any]] = field(default_factory=dict)
    broken: str | None = None  # "file:line: what was wrong" in one of its records: reported, not imported

    def input_hash(self) -> str:
        """Of every record the import reads: a resumed import redoes a scenario only when it changed."""
        doc = json.dumps([self.name, self.description, self.tasks, self.db_schema, self.sample_data, self.full_code,
                          sorted(self.code_verifiers.items()), sorted(self.sql_verifiers.items())],
                         sort_keys=True, default=str)
        return hashlib.sha256(doc.encode()).hexdigest()


def jsonl_records(path: Path, problems: list[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each line's JSON object. A line that is not one raises AwmFormatError, or with `problems` is noted there
    and skipped (one bad line among a thousand scenarios once aborted the whole import)."""
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            problem = None
            try:
                record = json.loads(line)
            except ValueError as exc:
                problem = f"{path}:{number}: not JSON ({exc})"
            except RecursionError:  # one line nested thousands deep once aborted the import with a traceback
                problem = f"{path}:{number}: JSON nested too deeply to read"
            else:
                if not isinstance(record, dict):
                    problem = f"{path}:{number}: expected a JSON object per line"
            if problem is None:
                yield number, record
            elif problems is None:
                raise AwmFormatError(problem)
            else:
                problems.append(problem)


def scenario_key(path: Path, number: int, record: dict[str, Any], field_name: str = "scenario") -> str:
    value = record.get(field_name)
    if not isinstance(value, str) or not value.strip():
        raise AwmFormatError(f"{path}:{number}: no {field_name!r} field")
    return normalize_scenario_name(value)


def read_dataset(root: str | Path, problems: list[str] | None = None) -> list[AwmScenario]:
    """The scenarios of an AWM data folder, in gen_scenario.jsonl's order.

    gen_scenario.jsonl is required; a scenario missing from another file is kept with that part None, and
    the import reports it. The first verifier entry for a (scenario, task_idx) wins, as in AWM's loader.
    With `problems`, bad data does not stop the read: a line that is no JSON object is noted there and skipped,
    and a scenario with a malformed record of its own is marked `broken` (its import reports why).
    """
    root = Path(root)
    if not (root / "gen_scenario.jsonl").is_file():
        found = ", ".join(sorted(p.name for p in root.glob("*.jsonl"))) or "no .jsonl files"
        raise AwmFormatError(f"{root}: no gen_scenario.jsonl (found {found}); point at a folder with AWM's "
                             f"files: {', '.join(DATA_FILES)}")
    scenarios: dict[str, AwmScenario] = {}
    for number, record in jsonl_records(root / "gen_scenario.jsonl", problems):
        try:
            key = scenario_key(root / "gen_scenario.jsonl", number, record, "name")
        except AwmFormatError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
            continue
        scenarios.setdefault(key, AwmScenario(key=key, name=str(record["name"]),
                                              description=str(record.get("description") or "")))

    def each(file: str) -> Iterator[tuple[AwmScenario, int, dict[str, Any]]]:
        path = root / file
        if not path.is_file():
            return
        for number, record in jsonl_records(path, problems):
            try:
                scenario = scenarios.get(scenario_key(path, number, record))
            except AwmFormatError as exc:
                if problems is None:
                    raise
                problems.append(str(exc))
                continue
            if scenario is not None:
                yield scenario, number, record

    for s, _, r in each("gen_tasks.jsonl"):
        s.tasks = [str(t) for t in r.get("tasks") or []]
    for s, _, r in each("gen_db.jsonl"):
        s.db_schema = r.get("db_schema")
    for s, _, r in each("gen_sample.jsonl"):
        s.sample_data = r.get("sample_data")
    for s, _, r in each("gen_envs.jsonl"):
        s.full_code = r.get("full_code")
    for file, attr in (("gen_verifier.pure_code.jsonl", "code_verifiers"), ("gen_verifier.jsonl", "sql_verifiers")):
        for s, number, r in each(file):
            idx = r.get("task_idx")
            if not isinstance(idx, int):
                if problems is None:
                    raise AwmFormatError(f"{root / file}:{number}: no integer 'task_idx'")
                s.broken = s.broken or f"{root / file}:{number}: no integer 'task_idx'"
                continue
            code = (r.get("verification") or {}).get("code")
            if isinstance(code, str) and len(code.strip()) >= 10:
                getattr(s, attr).setdefault(idx, r["verification"])
    return list(scenarios.values())


# -- the template: schema and sample rows ---------------------------------------------------------------

_REFUSED = {sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH, sqlite3.SQLITE_PRAGMA}


def _authorizer(action: int, *args: Any) -> int:
    """Dataset SQL may create, insert and read; it may not attach files or change connection settings."""
    return sqlite3.SQLITE_DENY if action in _REFUSED else sqlite3.SQLITE_OK


SQL_LIMIT_S = 30.0  # the dataset SQL one guarded block may run, all statements together


@contextmanager
def guarded(conn: sqlite3.Connection, limit_s: float = SQL_LIMIT_S) -> Iterator[sqlite3.Connection]:
    """Dataset SQL under the authorizer and a deadline: a recursive query in a sample row once never ended;
    past `limit_s` SQLite interrupts the statement (sqlite3.OperationalError: interrupted)."""
    deadline = time.monotonic() + limit_s
    conn.set_authorizer(_authorizer)
    conn.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)
    try:
        yield conn
    finally:
        conn.set_authorizer(None)
        conn.set_progress_handler(None, 0)


def _statements(db_schema: dict[str, Any]) -> tuple[list[str], list[str]]:
    tables = db_schema.get("tables") if isinstance(db_schema, dict) else None
    if not isinstance(tables, list) or not tables:
        raise ValueError("gen_db.jsonl: db_schema has no tables")
    ddl = [str(t.get("ddl") or "").strip() for t in tables if isinstance(t, dict) and str(t.get("ddl") or "").strip()]
    indexes = [str(i).strip() for t in tables if isinstance(t, dict) for i in t.get("indexes") or [] if str(i).strip()]
    return ddl, indexes


def _inserts(sample_data: Any) -> list[str]:
    items = sample_data.get("tables") if isinstance(sample_data, dict) else sample_data
    out: list[str] = []
    for item in items or []:
        if isinstance(item, dict):
            out += [str(s).strip() for s in item.get("insert_statements") or [] if str(s).strip()]
        elif isinstance(item, str) and item.strip():
            out.append(item.strip())
    return out


def _pin_clock(statement: str, clock: datetime) -> str:
    """`datetime('now', '-3 days')` in sample rows, pinned to the world's clock so the template never drifts."""
    return re.sub(r"'now'", f"'{clock:%Y-%m-%d %H:%M:%S}'", statement, flags=re.I)


@dataclass
class Built:
    ddl: list[str]
    indexes: list[str]
    inserts: list[str]
    skipped: list[str] = field(default_factory=list)  # "statement: why"


def build_template_sql(db_schema: dict[str, Any] | None, sample_data: Any, clock: datetime = CLOCK) -> Built:
    """Run the scenario's DDL and inserts once, keeping the statements that work together.

    A table whose DDL fails, or that has no primary key (rows must be addressable for diffs), fails the
    scenario; an insert that fails, or whose row breaks a foreign key, is left out and listed in `skipped`.
    """
    if not db_schema:
        raise ValueError("no gen_db.jsonl record (db_schema)")
    ddl, indexes = _statements(db_schema)
    conn = sqlite3.connect(":memory:", isolation_level=None)
    with guarded(conn):
        for statement in ddl:
            try:
                conn.execute(statement)
            except sqlite3.Error as exc:
                raise ValueError(f"gen_db.jsonl DDL failed: {exc}: {statement[:200]}") from None
        kept_indexes = []
        for statement in indexes:
            try:
                conn.execute(statement)
                kept_indexes.append(statement)
            except sqlite3.Error:
                pass
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                             "'sqlite_%'")]
    for table in tables:
        if not any(r[5] for r in conn.execute(f'PRAGMA table_info("{table}")')):
            raise ValueError(f"table {table} has no primary key: its rows cannot be told apart in a state diff")
    conn.close()
    built = Built(ddl=ddl, indexes=kept_indexes, inserts=[_pin_clock(s, clock) for s in _inserts(sample_data)])
    for _ in range(8):  # dropping a parent row can orphan its children: repeat until the rows hold together
        bad = _insert_problems([*ddl, *kept_indexes], built.inserts)
        if not bad:
            break
        built.skipped += [f"{built.inserts[i][:160]}: {why}" for i, why in sorted(bad.items())]
        built.inserts = [s for i, s in enumerate(built.inserts) if i not in bad]
    return built


def _insert_problems(ddl: list[str], inserts: list[str]) -> dict[int, str]:
    """Inserts that fail, or whose row breaks a foreign key once every row is in: index -> why."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    bad: dict[int, str] = {}
    rows: dict[tuple[str, int], int] = {}
    with guarded(conn):
        for statement in ddl:
            conn.execute(statement)
        for i, statement in enumerate(inserts):
            try:
                cur = conn.execute(statement)
            except sqlite3.Error as exc:
                bad[i] = str(exc)
                continue
            target = re.match(r"\s*INSERT\s+(?:OR\s+\w+\s+)?INTO\s+[\"'`\[]?(\w+)", statement, re.I)
            if target and cur.rowcount == 1:
                rows[(target.group(1).lower(), cur.lastrowid or 0)] = i
    for table, rowid, *_ in conn.execute("PRAGMA foreign_key_check").fetchall():
        i = rows.get((str(table).lower(), rowid))
        if i is not None:
            bad.setdefault(i, "FOREIGN KEY constraint failed")
    conn.close()
    return bad


_AFFINITY = (("INT", sa.Integer), ("BOOL", sa.Boolean), ("CHAR", sa.String), ("CLOB", sa.String),
             ("TEXT", sa.String), ("BLOB", sa.LargeBinary), ("REAL", sa.Float), ("FLOA", sa.Float),
             ("DOUB", sa.Float), ("DEC", sa.Numeric), ("NUM", sa.Numeric))


def _column_type(declared: str) -> Any:
    upper = (declared or "").upper()
    return next((kind() for needle, kind in _AFFINITY if needle in upper), sa.String())


def _pk_of(conn: sqlite3.Connection, table: str) -> str | None:
    pk = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")') if r[5]]
    return pk[0] if len(pk) == 1 else None


def describe_tables(conn: sqlite3.Connection, metadata: sa.MetaData) -> None:
    """Tables (columns, primary and foreign keys) as SQLite reports them: what the runtime needs of the schema,
    several times cheaper than SQLAlchemy's reflection (the seed recreates the tables from AWM's own DDL)."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                        "'sqlite_%' ORDER BY rowid")]
    for table in names:
        refs = {r[3]: f"{r[2]}.{r[4] or _pk_of(conn, r[2])}" for r in conn.execute(
            f'PRAGMA foreign_key_list("{table}")') if r[2] in names and (r[4] or _pk_of(conn, r[2]))}
        columns = [sa.Column(name, _column_type(kind), *([sa.ForeignKey(refs[name])] if name in refs else []),
                             primary_key=bool(pk), nullable=not notnull and not pk)
                   for _, name, kind, notnull, _, pk in conn.execute(f'PRAGMA table_info("{table}")')]
        sa.Table(table, metadata, *columns)


def free_columns(conn: sqlite3.Connection, table: str) -> tuple[str, ...]:
    """Time stamps the server writes from its own clock: free in the reference comparison."""
    out = []
    for _, name, _, _, default, pk in conn.execute(f'PRAGMA table_info("{table}")'):
        if pk:
            continue
        if STAMP_COLUMN.search(name.lower()) or (default and "CURRENT" in str(default).upper()):
            out.append(name)
    return tuple(out)
