"""Serve AWM (AgentWorldModel-1K) scenarios as mcpworld worlds: `mcpworld synth import-awm DIR`.

The published layout is read by `awm_format`.

Each scenario becomes a thin world package. The schema and sample rows are the template (built once in
memory, forked per episode like every world's; SQL runs under an authorizer that refuses ATTACH and
PRAGMA). The generated server and verifiers are data files here: they run only in a contained worker
(`awm_worker`), against a private copy of the episode's database. Tasks need a reference solution to be
judged the mcpworld way (the final database must match the reference's, then AWM's verifier runs on top);
references come from a JSONL file or are proposed by a model, and every task is validated and played
against the reward-hacking audit before it is kept (see `import_scenario`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import re
import secrets
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import ValidationError
from sqlmodel import Session

from mcpworld.core.llm import ChatClient, LLMError
from mcpworld.core.models import Check, ToolCall
from mcpworld.synth.importers.awm_format import (
    CLOCK,
    AwmFormatError,
    AwmScenario,
    Built,
    build_template_sql,
    describe_tables,
    free_columns,
    guarded,
    jsonl_records,
    scenario_key,
)
from mcpworld.synth.importers.awm_runtime import AwmRuntimeUnavailable, interpreter
from mcpworld.synth.sandbox.signatures import proxy_tool
from mcpworld.synth.sandbox.worker import Limits, Worker, WorkerError, shared_worker
from mcpworld.synth.tasks.taskspec import SynthTask, load_tasks, save_tasks
from mcpworld.worlds.world import Outcome, ToolError, World, on_close, raw_tool, world_base

MANIFEST = "scenario.json"
SERVER_FILE = "server.py"
VERIFIERS_FILE = "verifiers.json"
REPORT_FILE = "report.json"
SESSION = "awm_session"
LIMITS = Limits(cpu_s=10, wall_s=20, memory_mb=2048, file_mb=64, open_files=128)
PRELOAD = ("json", "sqlite3", "sqlalchemy", "sqlalchemy.orm", "pydantic", "fastapi", "fastapi.testclient",
           "mcpworld.synth.sandbox.jobs", "mcpworld.synth.importers.awm_worker")
WORKER = "mcpworld.synth.importers.awm_worker"
PACKAGE_INIT = '''"""An AWM scenario imported by `mcpworld synth import-awm` (see scenario.json).

server.py and verifiers.json are AWM's generated code: they run only in contained worker processes,
never in this interpreter.
"""

from pathlib import Path

from mcpworld.synth.importers.awm import load_package

world = load_package(Path(__file__).parent)
'''


def world_name(key: str) -> str:
    slug = re.sub(r"-+", "-", key.replace("_", "-")).strip("-")[:56].strip("-") or "scenario"
    return f"awm-{slug}"


# -- the package ---------------------------------------------------------------------------------------

def write_package(scenario: AwmScenario, built: Built, dest: Path, name: str, served_as: str = "awm") -> Path:
    """__init__.py (ours, constant), scenario.json (schema, rows, how it is served, tools later), server.py,
    verifiers.json. `served_as` is there from the start: it picks the Python the import's first call runs under."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    manifest = {
        "name": name, "scenario_key": scenario.key, "title": scenario.name.replace("_", " ").title()[:80],
        "description": _one_line(scenario.description or scenario.name),
        "scenario": scenario.description.strip() or scenario.name, "clock": CLOCK.isoformat(),
        "ddl": built.ddl, "indexes": built.indexes, "inserts": built.inserts, "tools": [],
        "input_hash": scenario.input_hash(), "served_as": served_as,
    }
    (dest / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
    (dest / SERVER_FILE).write_text(scenario.full_code or "", encoding="utf-8")
    verifiers = {str(i): {"task": t, "code": scenario.code_verifiers.get(i), "sql": scenario.sql_verifiers.get(i)}
                 for i, t in enumerate(scenario.tasks)}
    (dest / VERIFIERS_FILE).write_text(json.dumps(verifiers, ensure_ascii=False, indent=1), encoding="utf-8")
    (dest / "__init__.py").write_text(PACKAGE_INIT, encoding="utf-8")
    save_tasks(dest / "tasks.json", [])
    return dest


def _one_line(text: str) -> str:
    line = " ".join(text.split()) or "An AWM scenario"
    return line if len(line) <= 100 else line[:97].rsplit(" ", 1)[0] + "..."


@lru_cache(maxsize=4096)
def _served_as(manifest: Path, mtime_ns: int) -> str:
    return str(json.loads(manifest.read_text(encoding="utf-8")).get("served_as") or "mcpworld")


def served_as(path: Path) -> str:
    """How the package is served (its manifest's `served_as`, read again only when the file changes): "awm" (AWM's
    data) or "mcpworld" (a twin of a real MCP server, or a package from before the key)."""
    manifest = path / MANIFEST
    try:
        return _served_as(manifest, os.stat(manifest).st_mtime_ns)
    except (OSError, ValueError, AttributeError):
        return "mcpworld"


def package_worker(path: Path) -> Worker:
    """The scenario's warm worker: its server module imported once; started on the first call, not at load. A
    package served as AWM's runs under AWM's own library versions (`awm_runtime`), a twin under this Python's."""
    path = path.resolve()
    own = interpreter() if served_as(path) == "awm" else None
    return shared_worker(LIMITS, PRELOAD, binds=(str(path),), warm=((f"{WORKER}:warm", (("path", str(path)),)),),
                         interpreter=own)


def run_job(path: Path, entry: str, args: dict[str, Any], session: str | None = None) -> Any:
    try:
        worker = package_worker(path)
    except AwmRuntimeUnavailable as exc:
        raise ToolError(str(exc)) from None
    result = worker.run(f"{WORKER}:{entry}", args, session=session)
    if not result.ok:
        raise ToolError(f"the scenario's worker failed: {result.error}")
    return result.value


def _raw(db: Session) -> Any:
    return db.connection().connection.driver_connection


def digest(data: bytes) -> str:
    """What an episode's database is, byte for byte: its worker session serves it only when its own is the same."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _session(db: Session, path: Path) -> tuple[str, bool]:
    """The episode's session in the scenario's worker (and whether it is new): its database stays loaded there
    between calls, and the session ends when the episode closes."""
    known = db.info.get(SESSION)
    if known is not None:
        return known, False
    session = db.info[SESSION] = secrets.token_hex(8)
    on_close(db, lambda: package_worker(path).end(session))
    return session, True


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _clip(text: str, n: int = 1500) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def verifier_checks(path: Path, entry: dict[str, Any], initial: bytes, final: bytes, answer: str | None,
                    clock: str, modes: tuple[str, ...] = ("code", "sql")) -> list[Check]:
    """AWM's verifiers on one episode, as checks: code mode decides, SQL mode's findings are the judge's evidence."""
    checks = []
    for mode in modes:
        spec = entry.get(mode)
        if not spec:
            continue
        out = run_job(path, "verify", {"code": spec["code"], "mode": mode, "initial": _b64(initial),
                                       "final": _b64(final), "answer": answer, "now": clock})
        if mode == "code":
            checks.append(Check(name="AWM code verifier says complete", passed=out["result"] == "complete",
                                detail=_clip(json.dumps(out["raw"], default=str))))
        else:
            try:
                criteria = json.loads(spec.get("raw_response") or "{}")
            except (ValueError, TypeError):
                criteria = {}
            criteria = criteria if isinstance(criteria, dict) else {}
            evidence = {"findings": out["findings"], "success_criteria": criteria.get("success_criteria", ""),
                        "failure_criteria": criteria.get("failure_criteria", "")}
            checks.append(Check(name="AWM SQL verifier findings (evidence for the judge)", passed=True,
                                detail=_clip(json.dumps(evidence, default=str), 2500)))
    return checks


def _inline(schema: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    """`$ref`s replaced by what they name, as FastApiMCP resolves them (a recursive model stops at depth 16)."""
    if isinstance(schema, list):
        return [_inline(v, defs, depth) for v in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 16 and ref[8:] in defs:
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return _inline({**rest, **defs[ref[8:]]}, defs, depth + 1)  # the definition wins, as in FastApiMCP
    return {k: _inline(v, defs, depth) for k, v in schema.items()}


def _single_type(schema: dict[str, Any]) -> str:
    """FastApiMCP's `get_single_param_type_from_schema`: the first non-null type of an `anyOf`, else "string"."""
    kinds = [o.get("type") for o in schema.get("anyOf") or [] if isinstance(o, dict) and o.get("type")]
    kinds = [k for k in kinds if k != "null"]
    return kinds[0] if kinds else "string"


def mcp_input_schema(spec: dict[str, Any]) -> dict[str, Any]:
    """The input schema AWM's server shows (FastApiMCP 0.4): references inlined, each property titled with its name
    and given a `type` (an optional `anyOf[T, null]` gets `type: T`, so null is refused), no `additionalProperties`
    (an unknown argument is ignored). The MCP SDK validates calls against it, without coercion."""
    schema = spec["input_schema"]
    defs = schema.get("$defs") or {}
    properties = {}
    for name, prop in (schema.get("properties") or {}).items():
        prop = dict(_inline(prop, defs))
        prop["title"] = name
        if "type" not in prop:  # a path parameter without a type is a string there, whatever its anyOf
            prop["type"] = "string" if spec.get("where", {}).get(name) == "path" else _single_type(prop)
        properties[name] = prop
    shown: dict[str, Any] = {"type": "object", "properties": properties, "title": f"{spec['name']}Arguments"}
    if schema.get("required"):
        shown["required"] = list(schema["required"])
    if "$ref" in json.dumps(properties):
        shown["$defs"] = defs
    return shown


HIDDEN_IN_DISPLAY = ("allOf", "anyOf", "oneOf", "nullable", "discriminator", "readOnly", "writeOnly", "xml",
                     "externalDocs")


def _display(schema: dict[str, Any]) -> dict[str, Any]:
    """FastApiMCP's `clean_schema_for_display`: unions and internals dropped, from properties and items too."""
    schema = {k: v for k, v in schema.items() if k not in HIDDEN_IN_DISPLAY}
    if isinstance(schema.get("properties"), dict):
        schema["properties"] = {k: _display(v) if isinstance(v, dict) else v for k, v in schema["properties"].items()}
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        schema["items"] = _display(schema["items"])
    return schema


STRING_FORMATS = {"date-time": "2023-01-01T00:00:00Z", "date": "2023-01-01", "email": "user@example.com",
                  "uri": "https://example.com"}


def _example(schema: Any) -> Any:
    """FastApiMCP's `generate_example_from_schema`: one item per array, a string's title (or format's sample)."""
    if not schema or not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if kind == "object":
        values = {k: _example(v) for k, v in (schema.get("properties") or {}).items()}
        return {k: v for k, v in values.items() if v is not None}
    if kind == "array":
        item = _example(schema["items"]) if "items" in schema else None
        return [] if item is None else [item]
    if kind == "string":
        return STRING_FORMATS.get(str(schema.get("format")), schema.get("title", "string"))
    return {"integer": 1, "number": 1.0, "boolean": True}.get(str(kind))


def mcp_description(spec: dict[str, Any]) -> str:
    """The description AWM's server shows (FastApiMCP 0.4, its default options): the summary (else `METHOD path`),
    the description, then "### Responses:" with the first 2xx response (all of them when there is none), its
    content types, and its example or one generated from its schema. A package imported before this was recorded
    (no `operation`) keeps the description it stored."""
    op = spec.get("operation")
    if op is None:
        return spec["description"]
    text = op["summary"] or f"{spec['method'].upper()} {spec['path']}"
    if op["description"]:
        text += f"\n\n{op['description']}"
    responses = _inline(op["responses"], spec["input_schema"].get("$defs") or {})
    if not responses:
        return text
    text += "\n\n### Responses:\n"
    success = next((str(c) for c in range(200, 300) if str(c) in responses), None)
    for code, response in ({success: responses[success]} if success else responses).items():
        text += f"\n**{code}**: {response.get('description', '')}" + (" (Success Response)" if success else "")
        for content_type, content in (response.get("content") or {}).items():
            if "schema" not in content:
                continue
            text += f"\nContent-Type: {content_type}"
            if "examples" in content:
                example = next((e["value"] for e in content["examples"].values() if "value" in e), None)
            else:
                example = content.get("example")
            example = example or _example(_display(content["schema"]))
            if example:
                text += f"\n\n**Example Response:**\n```json\n{json.dumps(example, indent=2)}\n```"
    return text


def fastapi_mcp_text(value: Any) -> str:
    """A result as FastApiMCP writes it: the response's JSON indented by 2, non-ASCII kept (a plain-text response
    reads as a JSON string here: the worker's value does not tell them apart)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def awm_tool(spec: dict[str, Any], run: Callable[[Session, dict[str, Any]], Any]) -> Callable[..., Any]:
    """One tool of an AWM server as its MCP server serves it: FastApiMCP's description (`mcp_description`), arguments
    checked against the shown schema as the MCP SDK checks them (JSON Schema, no coercion: `"45"` is not an integer)
    and passed on as sent, and the result as FastApiMCP's text (`fastapi_mcp_text`, no structured content)."""
    from mcpworld.core.blocking import BLOCKING_ATTR, call_abandoned
    from mcpworld.core.episode_server import RESULT_TEXT_ATTR

    name = spec["name"]
    shown = mcp_input_schema(spec)
    validator = jsonschema.validators.validator_for(shown)(shown)

    def call(db: Session, arguments: dict[str, Any]) -> Any:
        try:
            validator.validate(arguments)
        except jsonschema.ValidationError as exc:
            raise ToolError(f"Input validation error: {exc.message}") from None
        value = run(db, arguments)
        if call_abandoned():  # the server already answered "timed out": the error rolls the late changes back
            raise ToolError(f"{name} answered after its call had timed out; its changes were discarded")
        return value

    fn = raw_tool(name, mcp_description(spec), shown, call, writes=spec["method"] != "get")
    setattr(fn, BLOCKING_ATTR, LIMITS.wall_s + 10)
    setattr(fn, RESULT_TEXT_ATTR, fastapi_mcp_text)
    return fn


def load_package(path: str | Path) -> World:
    """The World of an imported AWM package (its __init__.py calls this); no worker starts until a call."""
    path = Path(path)
    manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    base = world_base()
    raw = sqlite3.connect(":memory:")
    with guarded(raw):
        for statement in manifest["ddl"]:
            raw.execute(statement)
    describe_tables(raw, base.metadata)
    free = {t: cols for t in base.metadata.tables if (cols := free_columns(raw, t))}
    raw.close()
    primary_keys = {name: tuple(c.name for c in t.primary_key.columns) for name, t in base.metadata.tables.items()}
    order = [t.name for t in base.metadata.sorted_tables]

    def seed(db: Session) -> None:
        raw = _raw(db)
        with guarded(raw):  # AWM's own DDL (checks, defaults, AUTOINCREMENT), not SQLAlchemy's reading of it
            for table in reversed(order):
                raw.execute(f'DROP TABLE IF EXISTS "{table}"')
            for statement in [*manifest["ddl"], *manifest["indexes"], *manifest["inserts"]]:
                raw.execute(statement)

    def make_call(tool: str) -> Callable[[Session, dict[str, Any]], Any]:
        def call(db: Session, arguments: dict[str, Any]) -> Any:
            from mcpworld.core.tools import to_jsonable
            from mcpworld.synth.sandbox.packages import apply_changes

            session, new = _session(db, path)
            data = _raw(db).serialize()
            args = {"path": str(path.resolve()), "tool": tool, "arguments": to_jsonable(arguments),
                    "seed": db.info["rng"].getrandbits(31), "now": manifest["clock"],
                    "served_as": manifest.get("served_as", "mcpworld"), "digest": digest(data)}
            loaded = {"db": _b64(data), "keys": primary_keys}
            out = run_job(path, "call", {**args, **loaded} if new else args, session)
            if out.get("stale"):  # the session holds another state (or none): it gets the episode's
                out = run_job(path, "call", {**args, **loaded}, session)
            if "error" in out:
                raise ToolError(out["error"])
            apply_changes(db, out["changes"], primary_keys)
            return out["value"]
        return call

    verifiers = json.loads((path / VERIFIERS_FILE).read_text(encoding="utf-8"))

    def make_verify(idx: str, modes: tuple[str, ...]) -> Callable[[Outcome], list[Check]]:
        def verify(o: Outcome) -> list[Check]:
            return verifier_checks(path, verifiers[idx], _raw(o.initial).serialize(), _raw(o.final).serialize(),
                                   o.answer, manifest["clock"], modes)
        return verify

    if manifest.get("served_as") == "awm":  # as AWM's own server shows and answers (a package from before: ours)
        tools = [awm_tool(t, make_call(t["name"])) for t in manifest["tools"]]
    else:
        tools = [proxy_tool(t["name"], t["description"], t["input_schema"], make_call(t["name"]),
                            writes=t["method"] != "get", timeout_s=LIMITS.wall_s + 10) for t in manifest["tools"]]
    tasks = []
    for spec in load_tasks(path / "tasks.json") if (path / "tasks.json").is_file() else []:
        task = spec.to_task()
        task.provisional = bool(spec.meta.get("provisional"))
        idx = str(spec.meta.get("awm_task_idx"))
        modes = tuple(spec.meta.get("verifiers") or ("code", "sql"))
        if idx in verifiers and any(verifiers[idx].get(m) for m in modes):
            task.verify = make_verify(idx, modes)
        tasks.append(task)
    return World(name=manifest["name"], title=manifest["title"], description=manifest["description"],
                 scenario=manifest["scenario"], base=base, seed=seed, tools=tools, tasks=tasks, tags=["awm"],
                 source=f"awm {manifest['scenario_key']}", clock=datetime.fromisoformat(manifest["clock"]),
                 free_fields=free)


# -- references: how each task's reference solution is found ---------------------------------------------

@dataclass
class Reference:
    calls: list[ToolCall]
    answer: str | None = None
    source: str = "file"


def read_references(path: str | Path) -> dict[tuple[str, int], Reference]:
    """A references JSONL: {"scenario", "task_idx", "calls": [{"name", "arguments"}], "answer"?} per line.

    What an agent's verified trajectories (or a person) did on the task; mcpworld checks each one anyway.
    """
    path = Path(path)
    out: dict[tuple[str, int], Reference] = {}
    for number, record in jsonl_records(path):
        key = scenario_key(path, number, record)
        idx = record.get("task_idx")
        if not isinstance(idx, int):
            raise AwmFormatError(f"{path}:{number}: no integer 'task_idx'")
        try:
            calls = [ToolCall.model_validate(c) for c in record.get("calls") or []]
        except ValidationError as exc:
            raise AwmFormatError(f"{path}:{number}: calls must be [{{'name', 'arguments'}}]: {exc}") from None
        out[(key, idx)] = Reference(calls, record.get("answer"), "file")
    return out


REFERENCE_PROMPT = """You write the reference solution of a task in a simulated application.

Scenario: {scenario}
Task given to the agent: {task}

Tools (name, description, JSON Schema of the arguments):
{tools}

A few rows of the starting database:
{rows}

Reply with JSON only: {{"calls": [{{"name": "<tool>", "arguments": {{...}}}}, ...], "answer": "<final answer for \
the user, or null>"}}. Use only the tools above, with arguments taken from the task and the rows."""


async def propose_reference(client: ChatClient, scenario: str, task: str, tools: list[dict[str, Any]],
                            rows: dict[str, list[dict[str, Any]]]) -> Reference | None:
    """Ask the model for the task's calls; None when its reply is not a usable plan."""
    from mcpworld.synth.chat import parse_json

    listing = "\n".join(f"- {t['name']}: {t['description']} {json.dumps(t['input_schema'].get('properties', {}))}"
                        for t in tools)
    prompt = REFERENCE_PROMPT.format(scenario=scenario, task=task, tools=listing,
                                     rows=_clip(json.dumps(rows, default=str), 6000))
    try:
        reply = await client.complete([{"role": "user", "content": prompt}], temperature=0.0)
        plan = parse_json(reply.message.get("content") or "")
        calls = [ToolCall.model_validate(c) for c in plan.get("calls") or []]
    except (LLMError, ValueError, AttributeError):
        return None
    answer = plan.get("answer")
    return Reference(calls, str(answer) if answer not in (None, "") else None, "model")


# -- the import --------------------------------------------------------------------------------------

@dataclass
class ScenarioReport:
    """What importing one scenario did: its world, the tasks kept (with a checked reference), provisional (no
    reference: judged by AWM's verifier alone), dropped (why), and why each was kept (`kept_reasons`)."""

    scenario: str
    name: str
    ok: bool = False
    path: str | None = None
    tools: int = 0
    tasks_total: int = 0
    kept: list[str] = field(default_factory=list)
    provisional: list[str] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)
    kept_reasons: dict[str, str] = field(default_factory=dict)  # task -> why it is kept (audited or provisional)
    promoted: list[str] = field(default_factory=list)
    skipped_inserts: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    input_hash: str = ""
    resumed: bool = False
    runtime: dict[str, str] = field(default_factory=dict)  # the Python and libraries its generated code ran under

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ScenarioReport:
        """A saved report, from this version or an older one (fields it no longer has are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in names})


def _drop(report: ScenarioReport, task: str, reason: str, policy: str | None = None) -> None:
    report.dropped.append({"task": task, "reason": reason, "policy": policy})


async def import_scenario(scenario: AwmScenario, out_dir: Path, *, references: dict[tuple[str, int], Reference]
                          | None = None, client: ChatClient | None = None, audit: bool = True,
                          name: str | None = None, keep_tools: list[dict[str, Any]] | None = None,
                          served_as: str = "awm") -> ScenarioReport:
    """Convert one scenario, check every task, keep the honest ones. Never raises for bad data.

    A task is kept when it has a reference solution whose calls succeed, AWM's code verifier accepts the
    reference's final state, `mcpworld world validate` passes it (its no-op fails) and no wrong policy of
    the reward-hacking audit passes it. A task without a reference is kept *provisional* (judged by AWM's code
    verifier alone; `awm_provisional`) when that verifier runs on the initial database, fails it, and rejects
    every reference-free wrong policy. A task whose AWM verifier already passes on the initial database (the
    target already holds, AWM issue #16) is dropped with that reason.

    `keep_tools` ({name, description, input_schema}, e.g. a real MCP server's) replaces what the generated
    server's routes say about the tools of those names: their arguments all travel as the JSON body.
    `served_as`: "awm" (AWM's data) shows and answers as AWM's FastApiMCP server does (`awm_tool`), its generated
    code run under AWM's library versions (`awm_runtime`; `AwmRuntimeUnavailable` when they cannot be had here);
    "mcpworld" (a twin of a real MCP server, whose tools are not FastApiMCP's) keeps mcpworld's own argument
    handling and this Python's libraries.
    """
    from mcpworld.worlds.validate import validate

    if served_as == "awm":
        interpreter()  # AWM's runtime first (built on first need): without it nothing of AWM's may run
    name = name or world_name(scenario.key)
    report = ScenarioReport(scenario=scenario.key, name=name, tasks_total=len(scenario.tasks),
                            input_hash=scenario.input_hash())
    dest = out_dir / name
    try:
        if scenario.broken:
            raise ValueError(f"malformed record: {scenario.broken}")
        if not scenario.full_code:
            raise ValueError("no gen_envs.jsonl record (full_code)")
        if not scenario.tasks:
            raise ValueError("no tasks in gen_tasks.jsonl")
        built = build_template_sql(scenario.db_schema, scenario.sample_data)
        report.skipped_inserts = built.skipped
        write_package(scenario, built, dest, name, served_as)
        try:
            described = package_worker(dest).run(f"{WORKER}:describe", {"path": str(dest.resolve())})
        except WorkerError as exc:  # the zygote imports the server first: a broken one stops it there
            lines = [line for line in str(exc).splitlines() if line.strip()]
            raise ValueError(f"the generated server does not start: {lines[-1].strip() if lines else exc}") from None
        if not described.ok:
            raise ValueError(f"the generated server does not start: {described.error}")
        manifest = json.loads((dest / MANIFEST).read_text(encoding="utf-8"))
        manifest["tools"] = _kept(described.value["tools"], keep_tools) if keep_tools else described.value["tools"]
        manifest["runtime"] = report.runtime = described.value.get("runtime", {})
        (dest / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
        report.tools = len(manifest["tools"])
        candidates = await _candidates(scenario, dest, manifest, report, references or {}, client)
        save_tasks(dest / "tasks.json", candidates)
        candidates = _already_holds(dest, candidates, report)
        save_tasks(dest / "tasks.json", candidates)
        world, problems = validate(dest)
        field_re = re.compile(r"^task (\S+?)(?::|$)")
        broken: dict[str, str] = {}
        for p in problems:
            m = field_re.match(p.field)
            if m is None and p.field != "tasks":
                raise ValueError(f"{p.field}: {p.message}")
            if m is not None:
                broken.setdefault(m.group(1), f"{p.field}: {p.message}")
        keep = [t for t in candidates if t.id not in broken]
        for tid, why in broken.items():
            _drop(report, tid, why)
        if keep and world is not None:
            from mcpworld.synth.importers.awm_provisional import reference_free_problems
            from mcpworld.synth.tasks.taskspec import audit_problems
            from mcpworld.worlds.runtime import WorldRuntime

            ids = {t.id for t in keep}  # the loaded tasks: with AWM's verifiers attached
            runtime = WorldRuntime(dataclasses.replace(world, tasks=[t for t in world.tasks if t.id in ids]))
            provisional = sorted(t.id for t in keep if t.meta.get("provisional"))
            referenced = sorted(ids - set(provisional))
            # a provisional task is always checked against the reference-free wrong policies: nothing else guards it
            for tid, (policy, why) in reference_free_problems(runtime, provisional).items():
                _drop(report, tid, why, policy)
            if audit and referenced:
                for tid, d in audit_problems(runtime, referenced).items():
                    _drop(report, tid, d.reason, d.policy)
            dropped = {d["task"] for d in report.dropped}
            keep = [t for t in keep if t.id not in dropped]
        save_tasks(dest / "tasks.json", keep)
        report.kept = [t.id for t in keep if not t.meta.get("provisional")]
        report.provisional = [t.id for t in keep if t.meta.get("provisional")]
        report.kept_reasons = {t.id: _kept_reason(t, audit) for t in keep}
        if not keep:
            raise ValueError(f"no honest task: all {len(scenario.tasks)} were dropped (see `dropped`)")
        report.ok, report.path = True, str(dest)
    except (ValueError, ToolError, OSError, sqlite3.Error) as exc:
        report.problems.append(str(exc))
    finally:
        if dest.is_dir():  # a batch of a thousand scenarios must not leave a thousand zygotes
            package_worker(dest).close()
    if report.ok:
        (dest / REPORT_FILE).write_text(json.dumps(report.to_json(), indent=1, default=str), encoding="utf-8")
    elif dest.is_dir():  # nothing half-imported is left behind: the report says why
        shutil.rmtree(dest, ignore_errors=True)
    return report


def _kept(described: list[dict[str, Any]], real: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The generated routes under the real tools' names, descriptions and schemas (a twin's contract)."""
    routes = {t["name"]: t for t in described}
    missing = [t["name"] for t in real if t["name"] not in routes]
    if missing:
        raise ValueError(f"the generated server has no route for {', '.join(missing)}")
    out = []
    for tool in real:
        route = dict(routes[tool["name"]])
        route.pop("operation", None)  # the real tool's description, not the generated route's
        schema = tool.get("input_schema") or {"type": "object", "properties": {}}
        where = {p: route["where"].get(p, "body") for p in schema.get("properties") or {}}
        route.update(description=tool.get("description") or tool["name"], input_schema=schema, where=where,
                     body_mode=route["body_mode"] or ("fields" if "body" in where.values() else None))
        out.append(route)
    return out


async def _candidates(scenario: AwmScenario, dest: Path, manifest: dict[str, Any], report: ScenarioReport,
                      references: dict[tuple[str, int], Reference], client: ChatClient | None) -> list[SynthTask]:
    """One task per AWM task that has a verifier: with its reference, else provisional (a code verifier alone);
    the others are dropped here, with why."""
    rows: dict[str, list[dict[str, Any]]] = {}
    if client is not None:
        rows = _sample_rows(dest)
    known = {t["name"] for t in manifest["tools"]}
    out = []
    for idx, instruction in enumerate(scenario.tasks):
        tid = f"task-{idx}"
        modes = [m for m, table in (("code", scenario.code_verifiers), ("sql", scenario.sql_verifiers)) if idx in table]
        if not modes:
            _drop(report, tid, "no verifier in gen_verifier.pure_code.jsonl or gen_verifier.jsonl")
            continue
        ref = references.get((scenario.key, idx))
        if ref is None and client is not None:
            ref = await propose_reference(client, scenario.description or scenario.name, instruction,
                                          manifest["tools"], rows)
        if ref is None:
            if "code" not in modes:  # SQL mode only reports findings: without a reference nothing would decide
                _drop(report, tid, "no reference solution and no code verifier (SQL mode only gathers evidence for a "
                                   "judge): give --references FILE, or --model to have one proposed and checked")
                continue
            out.append(SynthTask(id=tid, instruction=instruction, kind="state", source="awm", world=manifest["name"],
                                 split="test" if idx % 4 == 3 else "train",
                                 meta={"awm_task_idx": idx, "verifiers": ["code"], "reference": None,
                                       "provisional": True}))
            continue
        unknown = [c.name for c in ref.calls if c.name not in known]
        if unknown:
            _drop(report, tid, f"the reference ({ref.source}) calls unknown tools: {', '.join(unknown)}")
            continue
        out.append(SynthTask(id=tid, instruction=instruction, kind="state", solution=ref.calls, answer=ref.answer,
                             source="awm", world=manifest["name"],
                             split="test" if idx % 4 == 3 else "train",
                             meta={"awm_task_idx": idx, "verifiers": modes, "reference": ref.source}))
    return out


def _sample_rows(dest: Path, per_table: int = 3) -> dict[str, list[dict[str, Any]]]:
    manifest = json.loads((dest / MANIFEST).read_text(encoding="utf-8"))
    conn = sqlite3.connect(":memory:")
    with guarded(conn):
        for statement in [*manifest["ddl"], *manifest["inserts"]]:
            conn.execute(statement)
    out = {}
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"):
        cur = conn.execute(f'SELECT * FROM "{table}" LIMIT ?', (per_table,))
        out[table] = [dict(zip([d[0] for d in cur.description], r)) for r in cur]
    conn.close()
    return out


def _already_holds(dest: Path, candidates: list[SynthTask], report: ScenarioReport) -> list[SynthTask]:
    """Drop the tasks whose AWM code verifier already passes on the initial database (AWM issue #16: the target
    holds before the agent does anything), and the provisional ones whose verifier does not run there."""
    from mcpworld.synth.importers.awm_provisional import ALREADY_HOLDS
    from mcpworld.worlds.runtime import WorldRuntime

    runtime = WorldRuntime(load_package(dest))  # not the loader's: it caches the package with its old tasks.json
    verifiers = json.loads((dest / VERIFIERS_FILE).read_text(encoding="utf-8"))
    clock = json.loads((dest / MANIFEST).read_text(encoding="utf-8"))["clock"]
    initial = runtime.template(None).data
    out = []
    for task in candidates:
        entry = verifiers[str(task.meta["awm_task_idx"])]
        if entry.get("code"):
            try:
                checks = verifier_checks(dest, entry, initial, initial, None, clock, ("code",))
            except ToolError as exc:
                if task.meta.get("provisional"):  # nothing else could judge it
                    _drop(report, task.id, f"AWM's code verifier does not run on the initial database: {exc}")
                    continue
                checks = []  # a referenced task: validation drops it, with the error
            if checks and checks[0].passed:
                _drop(report, task.id, ALREADY_HOLDS)
                continue
        out.append(task)
    return out


def _kept_reason(task: SynthTask, audited: bool) -> str:
    if task.meta.get("provisional"):
        return "provisional: no reference; AWM's code verifier fails the initial database and every reference-free " \
               "wrong policy"
    source = task.meta.get("reference") or "file"
    return f"reference ({source}) passes AWM's verifier" + (" and the audit" if audited else " (not audited)")


def summarize(reports: list[ScenarioReport]) -> dict[str, Any]:
    """Totals for the import report: worlds; tasks kept, provisional and dropped, each by reason."""
    reasons: dict[str, int] = {}
    kept: dict[str, int] = {}
    provisional: dict[str, int] = {}
    for r in reports:
        for d in r.dropped:
            key = f"wrong policy {d['policy']} passed" if d.get("policy") else _reason_kind(d["reason"])
            reasons[key] = reasons.get(key, 0) + 1
        for tid in r.kept:
            why = r.kept_reasons.get(tid, "reference passes AWM's verifier")
            kept[why] = kept.get(why, 0) + 1
        for tid in r.provisional:
            why = r.kept_reasons.get(tid, "provisional")
            provisional[why] = provisional.get(why, 0) + 1

    def ordered(counts: dict[str, int]) -> dict[str, int]:
        return dict(sorted(counts.items(), key=lambda kv: -kv[1]))

    return {"scenarios": len(reports), "imported": sum(r.ok for r in reports),
            "failed": [f"{r.scenario}: {'; '.join(r.problems)}" for r in reports if not r.ok],
            "resumed": sum(r.resumed for r in reports), "tasks": sum(r.tasks_total for r in reports),
            "kept": sum(len(r.kept) for r in reports), "provisional": sum(len(r.provisional) for r in reports),
            "dropped": sum(len(r.dropped) for r in reports),
            "kept_by_reason": ordered(kept), "provisional_by_reason": ordered(provisional),
            "dropped_by_reason": ordered(reasons)}


def _reason_kind(reason: str) -> str:
    for needle, label in (("target already holds", "the target already holds at the start (AWM issue #16)"),
                          ("no code verifier", "no reference, and only a SQL verifier (nothing decides)"),
                          ("no reference", "no reference solution"), ("no verifier", "no verifier"),
                          ("does not run on the initial", "AWM's verifier does not run"),
                          ("no-op episode passes", "a no-op passes"), ("reference solution fails", "the reference "
                          "fails AWM's verifier"), ("unknown tools", "reference calls unknown tools"),
                          ("failed:", "a reference call failed")):
        if needle in reason:
            return label
    return reason.split(":")[0][:60]


__all__ = ["Reference", "ScenarioReport", "import_scenario", "load_package", "read_references", "summarize"]
