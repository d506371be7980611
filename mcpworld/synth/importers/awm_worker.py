"""Worker side of imported AWM scenarios: their FastAPI + SQLAlchemy server and verifiers, run contained.

Only a worker imports this module (jobs name it as `mcpworld.synth.importers.awm_worker:<function>`). The zygote
warms up once per world: it executes the scenario's generated server module (never its `uvicorn.run`),
with SQLAlchemy's `create_engine` replaced by one whose connections open whichever database file the
current job points at. Each job then runs in a forked child:

- `call`: in the episode's session (a process of its own, kept between its calls), on the episode's database: the
  endpoint behind the tool is requested through FastAPI's in-process test client (routing, validation and
  dependencies exactly as over HTTP), and the rows it changed are read back from the change-log triggers the
  template carries, for the server to apply in the call's transaction. The session then puts its database back as
  it was and applies those changes with the server's own statements, so both hold the same bytes; each call says
  the digest of the server's, and a session holding anything else answers `stale` and is sent the database. A
  generated server's module-level variables persist across one episode's calls, as in AWM's own server process;
  the episode's data is always the server's;
- `verify`: AWM's verification function receives the initial and final database paths (read-only copies,
  without mcpworld's change log) and, in code mode, the final answer;
- `describe`: the tools FastApiMCP would expose (one per operation id, path + query + body fields merged
  into one input schema), with the operation's summary, description and responses its descriptions are built from,
  and (`versions`) the Python and library versions the worker runs under.

The worker's Python is AWM's runtime for a package served as AWM's (`awm_runtime`: AWM's lock, in its own
virtualenv), so this module and what it imports of mcpworld use the standard library only.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import os
import re
import sqlite3
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

from mcpworld.core.schemas import resolve_ref
from mcpworld.synth.sandbox.changes import change_statements

SERVER_FILE = "server.py"
CHANGES_TABLE = "_mcpworld_changes"  # the runtime's change log (mcpworld.worlds.database.CHANGES_TABLE)
_state: dict[str, Any] = {}


# -- warm-up: the scenario's server, with its engine redirected ---------------------------------------

class _CurrentConnection:
    """The job's in-memory database, whichever engine of the generated code asks (its pool keeps this proxy)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_state["conn"], name)


def _redirect_engines() -> None:
    """Every engine the generated code creates uses the current job's database, whatever its URL says."""
    import sqlalchemy
    from sqlalchemy.pool import StaticPool

    real = sqlalchemy.create_engine
    proxy = _CurrentConnection()

    def create_engine(*args: Any, **kwargs: Any) -> Any:
        return real("sqlite://", creator=lambda: proxy, poolclass=StaticPool)

    sqlalchemy.create_engine = create_engine  # type: ignore[assignment]
    try:
        import sqlalchemy.engine as engine_module

        engine_module.create_engine = create_engine  # type: ignore[assignment]
        import sqlmodel

        sqlmodel.create_engine = create_engine  # type: ignore[assignment]
    except ImportError:
        pass


CLOCK_FUNCTIONS = ("datetime", "date", "time", "julianday", "strftime", "unixepoch")
_connect = sqlite3.connect  # the real one: a verifier's job replaces `sqlite3.connect` with a pinning one


def pin_sqlite_clock(conn: sqlite3.Connection, now: str) -> None:
    """SQLite's `'now'` on `conn` is the world's clock, as Python's `datetime` is in the server and verifiers: each
    date and time function is overridden, and evaluates its arguments with `'now'` (or no time value at all, which
    SQLite reads as now) replaced by the clock, on a connection of its own where the built-ins are intact. The
    `CURRENT_TIMESTAMP` keywords are SQLite's own and stay real (those columns are free in the comparison)."""
    reference = _connect(":memory:", check_same_thread=False)
    stamp = now.replace("T", " ")[:19]

    def pinned(name: str) -> Any:
        def fn(*args: Any) -> Any:
            values = [stamp if isinstance(a, str) and a.strip().lower() == "now" else a for a in args]
            if len(values) == (1 if name == "strftime" else 0):
                values.append(stamp)
            marks = ", ".join("?" * len(values))
            return reference.execute(f"SELECT {name}({marks})", values).fetchone()[0]
        return fn

    for name in CLOCK_FUNCTIONS:
        conn.create_function(name, -1, pinned(name), deterministic=True)


def _open(data: bytes | None = None) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    if data is not None:
        conn.deserialize(data)
    return conn


def warm(path: str) -> None:
    """Import the scenario's server module once (zygote start-up); children fork from it."""
    _state["conn"] = _open()
    os.environ["DATABASE_PATH"] = os.path.join(tempfile.mkdtemp(prefix="awm-warm-"), "unused.db")
    _redirect_engines()
    source = (Path(path) / SERVER_FILE).read_text(encoding="utf-8")
    module = types.ModuleType("awm_server")
    module.__file__ = str(Path(path) / SERVER_FILE)
    sys.modules["awm_server"] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    app = module.__dict__.get("app")
    if app is None or not hasattr(app, "openapi"):
        raise RuntimeError("the scenario's server defines no FastAPI `app`")
    _state["app"] = app
    _state["routes"] = {t["name"]: t for t in _tool_specs(app)}
    _prime(app, path)


def _prime(app: Any, path: str) -> None:
    """Do once here what every forked call would otherwise redo: configure the ORM, and request each GET route
    that needs no argument against the seeded rows (the first request of a route costs several times the next)."""
    import asyncio

    import httpx

    try:
        from sqlalchemy.orm import configure_mappers

        configure_mappers()
    except Exception:  # a broken mapper shows up, with its message, on the call that uses it
        pass
    manifest = Path(path) / "scenario.json"
    seeded = _open()
    if manifest.is_file():
        spec = json.loads(manifest.read_text(encoding="utf-8"))
        for statement in [*spec.get("ddl", []), *spec.get("inserts", [])]:
            try:
                seeded.execute(statement)
            except sqlite3.Error:
                pass
    _state["conn"] = seeded
    routes = ["/__mcpworld_warm_up__"] + [t["path"] for t in _state["routes"].values()
                                          if t["method"] == "get" and "{" not in t["path"]
                                          and not t["input_schema"].get("required")]

    async def probe() -> None:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://awm.local") as client:
            for route in routes:
                await client.get(route)

    try:
        asyncio.run(probe())
    except Exception:  # priming is an optimization: a route that breaks here breaks, with its message, on its call
        pass
    _state["conn"] = _open()


def _app(path: str) -> Any:
    if "app" not in _state:
        warm(path)
    return _state["app"]


# -- tools as FastApiMCP exposes them -----------------------------------------------------------------

def _refs_to_defs(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (v.replace("#/components/schemas/", "#/$defs/") if k == "$ref" and isinstance(v, str)
                    else _refs_to_defs(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_refs_to_defs(v) for v in value]
    return value


def _tool_specs(app: Any) -> list[dict[str, Any]]:
    """One tool per operation: its id as the name, path/query parameters and body fields as one schema."""
    spec = app.openapi()
    components = _refs_to_defs((spec.get("components") or {}).get("schemas") or {})
    out = []
    for route, operations in (spec.get("paths") or {}).items():
        for method, op in operations.items():
            if method not in ("get", "post", "put", "patch", "delete") or not isinstance(op, dict):
                continue
            name = op.get("operationId") or f"{method}_{re.sub(r'[^a-z0-9]+', '_', route.lower()).strip('_')}"
            props: dict[str, Any] = {}
            required: list[str] = []
            where: dict[str, str] = {}
            for param in op.get("parameters") or []:
                if param.get("in") not in ("path", "query"):
                    continue
                schema = _refs_to_defs(dict(param.get("schema") or {}))
                if param.get("description"):
                    schema.setdefault("description", param["description"])
                props[param["name"]] = schema
                where[param["name"]] = param["in"]
                if param.get("required"):
                    required.append(param["name"])
            body = ((op.get("requestBody") or {}).get("content") or {}).get("application/json", {}).get("schema")
            body_mode = None
            if body:
                body = _refs_to_defs(body)
                target = resolve_ref(body, components)
                if target.get("type") == "object" and target.get("properties"):
                    body_mode = "fields"
                    for field, schema in target["properties"].items():
                        props[field] = schema
                        where[field] = "body"
                    required += [f for f in target.get("required") or [] if f not in required]
                else:
                    body_mode = "whole"
                    props["body"] = body
                    where["body"] = "body"
                    if (op.get("requestBody") or {}).get("required"):
                        required.append("body")
            schema: dict[str, Any] = {"type": "object", "properties": props}
            if required:
                schema["required"] = required
            if components:
                schema["$defs"] = components
            text = " ".join(p for p in (op.get("summary"), op.get("description")) if p) or name
            operation = {"summary": op.get("summary") or "", "description": op.get("description") or "",
                         "responses": _refs_to_defs(op.get("responses") or {})}  # what FastApiMCP describes
            out.append({"name": name, "description": text, "input_schema": schema, "method": method,
                        "path": route, "where": where, "body_mode": body_mode, "operation": operation})
    return out


def describe(path: str) -> dict[str, Any]:
    """The tools of the scenario's server, for the package manifest, and the versions it runs under."""
    _app(path)
    return {"tools": [{k: v for k, v in t.items()} for t in _state["routes"].values()], "runtime": versions()}


def versions() -> dict[str, str]:
    """The Python and libraries this worker runs generated code under, as the loaded modules say (an import
    records them: AWM's scenarios run under AWM's lock, `awm_runtime`)."""
    import platform

    import fastapi
    import httpx
    import pydantic
    import sqlalchemy
    import starlette

    return {"python": platform.python_version(), "fastapi": fastapi.__version__, "starlette": starlette.__version__,
            "sqlalchemy": sqlalchemy.__version__, "pydantic": pydantic.VERSION, "httpx": httpx.__version__}


# -- one tool call --------------------------------------------------------------------------------------

def _pk_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    rows = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
    return [r[1] for r in sorted((r for r in rows if r[5]), key=lambda r: r[5])]


def _key_sql(pk: list[str]) -> str:
    return " || '|' || ".join(f'CAST("{c}" AS TEXT)' for c in pk)


def _row(conn: sqlite3.Connection, table: str, key: str) -> dict[str, Any] | None:
    cur = conn.execute(f'SELECT * FROM "{table}" WHERE {_key_sql(_pk_columns(conn, table))} = ?', (key,))
    values = cur.fetchone()
    return None if values is None else dict(zip([d[0] for d in cur.description], values))


def _changes(before: sqlite3.Connection, after: sqlite3.Connection) -> list[dict[str, Any]]:
    out = []
    for table, key in after.execute(f"SELECT tbl, pk FROM {CHANGES_TABLE}").fetchall():
        old, new = _row(before, table, key), _row(after, table, key)
        if old != new:
            out.append({"table": table, "before": old, "after": new})
    return out


def _request_mcpworld(spec: dict[str, Any], arguments: dict[str, Any]) -> tuple[str, dict[str, Any], Any]:
    """The request of a world served as mcpworld's own (a twin of a real MCP server): every argument where its route
    says, and a body of fields always sent (`{}` when none)."""
    url = spec["path"]
    query: dict[str, Any] = {}
    body: Any = None
    for name, value in arguments.items():
        where = spec["where"].get(name, "body" if spec["body_mode"] == "fields" else "query")
        if where == "path":
            url = url.replace("{" + name + "}", str(value))
        elif where == "query":
            query[name] = value
        elif spec["body_mode"] == "whole":
            body = value
        else:
            body = {**(body or {}), name: value}
    if spec["body_mode"] == "fields" and body is None:
        body = {}
    return url, query, body


def _error_text_mcpworld(tool: str, response: Any) -> str:
    """mcpworld's text for an HTTP error: the status and FastAPI's `detail`."""
    try:
        detail = response.json().get("detail", response.json())
    except (ValueError, AttributeError):
        detail = response.text
    return f"{tool}: HTTP {response.status_code}: {json.dumps(detail, default=str)[:1500]}"


def _request(spec: dict[str, Any], arguments: dict[str, Any]) -> tuple[str, dict[str, Any], Any]:
    """The request FastApiMCP makes: path and query parameters taken out, whatever is left is the body, sent only
    when something is left (`{}` sends no body, so a required body model answers 422) and only with POST, PUT or
    PATCH; an unknown argument travels in the body, where FastAPI ignores it."""
    url = spec["path"]
    query: dict[str, Any] = {}
    rest = dict(arguments)
    for name, where in spec["where"].items():
        if where == "path" and name in rest:
            url = url.replace("{" + name + "}", str(rest.pop(name)))
        elif where == "query" and name in rest:
            query[name] = rest.pop(name)
    if spec["body_mode"] == "whole":  # a body that is not an object of fields: the `body` argument (ours)
        rest = rest.get("body")
    body = rest if rest not in (None, {}) and spec["method"] in ("post", "put", "patch") else None
    return url, query, body


def _error_text(tool: str, response: Any) -> str:
    """FastApiMCP's text for an HTTP error (a server error is Starlette's plain "Internal Server Error")."""
    return f"Error calling {tool}. Status code: {response.status_code}. Response: {response.text[:1500]}"


def _freeze_server_clock(now: str, seed: int) -> None:
    """The world's clock for this call, also where the server module imported `datetime` by name."""
    import datetime as dt

    from mcpworld.synth.sandbox.jobs import freeze_time

    real = {id(dt.datetime): "datetime", id(dt.date): "date"}
    freeze_time(now, seed)
    module = sys.modules.get("awm_server")
    for name, value in list(vars(module).items()) if module is not None else []:
        if id(value) in real:
            setattr(module, name, getattr(dt, real[id(value)]))


def _episode(db: str | None, keys: dict[str, list[str]] | None, digest: str) -> tuple[bytes, dict[str, Any]] | None:
    """The episode's database as the server has it (`db` when sent, else this session's if its digest is the same)
    and its primary keys; None when this session holds another state."""
    if db is not None and keys is not None:
        _state["episode"] = {"data": base64.b64decode(db), "keys": {t: tuple(pk) for t, pk in keys.items()}}
    episode = _state.get("episode")
    if episode is None or hashlib.blake2b(episode["data"], digest_size=16).hexdigest() != digest:
        return None
    return episode["data"], episode["keys"]


def _keep(data: bytes, keys: dict[str, tuple[str, ...]], changes: list[dict[str, Any]]) -> None:
    """The session's database after the call: the one before, with the changes applied as the server applies them
    (`packages.apply_changes`, in a transaction of its own: `database._begin`), so the bytes are the server's."""
    conn = _open(data)
    conn.isolation_level = None
    conn.execute("PRAGMA foreign_keys=ON")
    try:
        conn.execute("BEGIN")
        conn.execute("PRAGMA defer_foreign_keys=ON")
        for sql, params in change_statements(changes, keys):
            conn.execute(sql, params)
        conn.execute("COMMIT")
        _state["episode"]["data"] = conn.serialize()
    except sqlite3.Error:  # the server's commit fails the same way: the next call sends its database
        _state.pop("episode", None)
    finally:
        conn.close()


def call(path: str, tool: str, arguments: dict[str, Any], seed: int, now: str, served_as: str = "mcpworld",
         digest: str = "", db: str | None = None, keys: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Run the endpoint behind `tool` on the episode's database (`_episode`); its result and row changes, or
    `{"stale": true}`. `served_as` (the package's, sent with each call: the worker warms before an import writes
    it) is "awm" for FastApiMCP's request and error text, else mcpworld's own (a twin of a real MCP server)."""
    import asyncio

    import httpx

    app = _app(path)
    spec = _state["routes"].get(tool)
    if spec is None:
        return {"error": f"unknown tool {tool!r}"}
    episode = _episode(db, keys, digest)
    if episode is None:
        return {"stale": True}
    data, primary_keys = episode
    conn = _state["conn"] = _open(data)
    conn.execute(f"DELETE FROM {CHANGES_TABLE}")
    conn.commit()
    pin_sqlite_clock(conn, now)
    _freeze_server_clock(now, seed)
    awm = served_as == "awm"
    url, query, body = (_request if awm else _request_mcpworld)(spec, arguments)

    async def send() -> Any:  # as FastApiMCP: an exception in the endpoint is Starlette's 500, not re-raised
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=not awm)
        async with httpx.AsyncClient(transport=transport, base_url="http://awm.local") as client:
            return await client.request(spec["method"].upper(), url, params=query or None, json=body)

    try:
        response = asyncio.run(send())
    except Exception as exc:  # mcpworld's own: the endpoint raised, a server error with what it said
        first = str(exc).splitlines()[0][:500] if str(exc) else ""
        return {"error": f"{tool}: internal server error: {type(exc).__name__}" + (f": {first}" if first else "")}
    if response.status_code >= 400:  # its writes are dropped
        return {"error": _error_text(tool, response) if awm else _error_text_mcpworld(tool, response)}
    try:
        value = response.json()
    except ValueError:
        value = response.text
    changes = _changes(_open(data), conn)
    _keep(data, primary_keys, changes)
    return {"value": value, "changes": changes}


# -- AWM verifiers ------------------------------------------------------------------------------------

def _plain_copy(data: bytes, name: str) -> str:
    """A read-only database file without mcpworld's change log (what AWM's verifiers were written against)."""
    file = Path(name).resolve()
    file.write_bytes(data)
    conn = sqlite3.connect(file)
    for (trigger,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE "
                                   "'_mcpworld%'").fetchall():
        conn.execute(f'DROP TRIGGER "{trigger}"')
    conn.execute(f"DROP TABLE IF EXISTS {CHANGES_TABLE}")
    conn.commit()
    conn.execute("VACUUM")
    conn.close()
    file.chmod(0o444)
    return str(file)


def function_name(code: str, default: str) -> str:
    """The verifier's function: the first `def verify_...` in the code (AWM's own rule), else `default`."""
    for line in code.splitlines():
        line = line.strip()
        if line.startswith("def verify_") and "(" in line:
            return line.split("(")[0].replace("def ", "").strip()
    return default


def _call_verifier(fn: Any, initial: str, final: str, answer: str | None, with_answer: bool) -> Any:
    params = inspect.signature(fn).parameters
    kwargs: dict[str, Any] = {}
    if "initial_db_path" in params:
        kwargs["initial_db_path"] = initial
    if "final_db_path" in params:
        kwargs["final_db_path"] = final
    if with_answer and "final_answer" in params:
        kwargs["final_answer"] = answer or ""
    if not kwargs and len(params) >= 2:
        return fn(*([initial, final, answer or ""][:3 if with_answer and len(params) >= 3 else 2]))
    return fn(**kwargs)


def verify(code: str, mode: str, initial: str, final: str, answer: str | None, now: str) -> dict[str, Any]:
    """Run one AWM verification function on the episode's initial and final databases.

    code mode returns {"result": "complete" | "others", "raw": ...}; sql mode returns the function's
    findings (a dict of what its queries saw), which are evidence for the judge.
    """
    from mcpworld.synth.sandbox.jobs import freeze_time

    first = _plain_copy(base64.b64decode(initial), "initial.db")
    last = _plain_copy(base64.b64decode(final), "final.db")
    freeze_time(now, 0)
    def pinned_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:  # this job's process only (a fork)
        conn = _connect(*args, **kwargs)
        pin_sqlite_clock(conn, now)
        return conn

    sqlite3.connect = pinned_connect  # type: ignore[assignment]
    namespace: dict[str, Any] = {"sqlite3": sqlite3, "json": json, "os": os, "re": re, "__name__": "awm_verifier"}
    exec(compile(code, "<awm verifier>", "exec"), namespace)
    name = function_name(code, "verify_task_completion" if mode == "code" else "verify_task")
    fn = namespace.get(name)
    if not callable(fn):
        raise ValueError(f"the verifier defines no function {name!r}")
    raw = _call_verifier(fn, first, last, answer, with_answer=mode == "code")
    raw = json.loads(json.dumps(raw, default=str))
    if mode != "code":
        return {"findings": raw}
    if not isinstance(raw, dict) or "result" not in raw:
        raise ValueError(f"a code verifier returns {{'result': 'complete' | 'others'}}, not {type(raw).__name__}")
    result = str(raw.get("result") or "").lower()
    return {"result": result if result in ("complete", "others") else "others", "raw": raw}
