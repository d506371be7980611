"""Twin a real MCP server: `mcpworld synth twin NAME|URL|server.json`.

The twin is a stateful world whose tools have the real server's names, descriptions and input schemas, with
a SQLite database behind them, plus tasks, so an agent can be trained on the twin (forked per episode,
verified, audited) and evaluated against the real server's read-only tools.

It is built as an AWM scenario and imported like one (`awm.import_scenario`), so the generated code runs
only in contained workers and every task is validated and audited:

1. the server is started (stdio command, or a Streamable HTTP URL, or a registry `server.json`) and its
   tools are listed;
2. a model writes the database (tables + sample rows), checked by building it;
3. a model writes a FastAPI + SQLAlchemy server with one route per tool (operation id = tool name), checked
   in a worker: it must import and expose exactly the real tool names;
4. a model writes tasks, each with a reference call sequence and an AWM code-mode verifier.

A stage whose output fails its check is asked again with the error, like the AWM pipeline.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mcpworld.core.errors import innermost
from mcpworld.core.llm import ChatClient, LLMError
from mcpworld.core.models import ToolCall
from mcpworld.synth.chat import extract_block, parse_json
from mcpworld.synth.importers.awm import (
    WORKER,
    Reference,
    ScenarioReport,
    import_scenario,
    package_worker,
    write_package,
)
from mcpworld.synth.importers.awm_format import AwmScenario, build_template_sql, normalize_scenario_name
from mcpworld.synth.sandbox.worker import WorkerError


class TwinError(RuntimeError):
    """The server could not be reached or listed, or a stage never produced a usable answer."""


@dataclass
class RealServer:
    name: str
    source: str
    tools: list[dict[str, Any]]
    instructions: str = ""


@dataclass
class TwinStage:
    stage: str
    attempts: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class TwinResult:
    server: RealServer
    stages: list[TwinStage]
    report: ScenarioReport | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.report is not None and self.report.ok

    def to_json(self) -> dict[str, Any]:
        return {"server": asdict(self.server), "stages": [asdict(s) for s in self.stages],
                "report": self.report.to_json() if self.report else None, "problems": self.problems, "ok": self.ok}


# -- reaching the real server --------------------------------------------------------------------------

def _target(spec: str) -> tuple[str, Any]:
    """What `spec` names: ("url", url), ("stdio", StdioServerParameters) from a command or a server.json."""
    from mcp import StdioServerParameters

    if re.match(r"^https?://", spec):
        return "url", spec
    path = Path(spec)
    if path.is_file() and path.suffix == ".json":
        doc = json.loads(path.read_text(encoding="utf-8"))
        for remote in doc.get("remotes") or []:
            if remote.get("url") and remote.get("type") in ("streamable-http", "http", None):
                return "url", remote["url"]
        for package in doc.get("packages") or []:
            if (package.get("transport") or {}).get("type", "stdio") != "stdio":
                continue
            from mcpworld.registry.connect import ConnectError, stdio_params

            try:  # the registry's launch rules: a server.json is data, and names a package, never a command
                return "stdio", stdio_params(package)
            except ConnectError as exc:
                raise TwinError(f"{path}: {exc}") from None
        raise TwinError(f"{path}: no stdio package or streamable-http remote to connect to")
    parts = shlex.split(spec)
    if not parts:
        raise TwinError("give a command (e.g. mcp-server-time), a URL, or a server.json")
    return "stdio", StdioServerParameters(command=parts[0], args=parts[1:])


@asynccontextmanager
async def connect(spec: str) -> AsyncIterator[Any]:
    """An MCP client session for `spec` (command, URL or server.json)."""
    from mcp import Client

    kind, target = _target(spec)
    try:
        async with Client(target) as client:
            yield client
    except (OSError, ConnectionError) as exc:
        raise TwinError(f"cannot reach the MCP server {spec!r} ({kind}): {exc}") from None


async def read_server(spec: str) -> RealServer:
    """Start or reach the server and list its tools: names, descriptions, input schemas."""
    try:
        async with connect(spec) as client:
            listed = await client.list_tools()
            info = getattr(client, "server_info", None) or getattr(getattr(client, "session", None), "server_info",
                                                                   None)
    except TwinError:
        raise
    except Exception as exc:  # the server exited, answered garbage, or is not an MCP server (groups included)
        leaf = innermost(exc)
        raise TwinError(f"cannot list the tools of the MCP server {spec!r}: {type(leaf).__name__}: {leaf}; check "
                        "that the command starts an MCP server on stdio (or that the URL is its MCP endpoint)"
                        ) from None
    tools = [{"name": t.name, "description": t.description or t.name, "input_schema": t.input_schema or {}}
             for t in listed.tools]
    if not tools:
        raise TwinError(f"{spec}: the server lists no tools: there is nothing to twin")
    name = getattr(info, "name", None) or (spec if re.match(r"^https?://", spec) else Path(shlex.split(spec)[0]).stem)
    return RealServer(name=str(name), source=spec, tools=tools)


# -- the stages ------------------------------------------------------------------------------------------

SCHEMA_PROMPT = """[twin:schema] You design the database behind a simulated copy of a real MCP server.

Server: {server}
Its tools (name, description, JSON Schema of the arguments):
{tools}

Write a SQLite schema whose rows let every tool answer as the real one would (every table has a primary key),
and sample rows. Reply with JSON only: {{"tables": [{{"name": "...", "ddl": "CREATE TABLE ..."}}],
"inserts": ["INSERT INTO ... (...) VALUES (...);", ...]}}"""

SERVER_PROMPT = """[twin:server] Write the simulated server: a FastAPI app over SQLAlchemy.

Server: {server}
Tools:
{tools}
Database:
{ddl}

Rules: read the database path from the DATABASE_PATH environment variable; one POST route per tool at
/tools/<name> with operation_id="<name>" and the tool's arguments as a JSON body (a pydantic model with the
same field names); read and write only the tables above; refuse bad input with HTTPException(400, detail=...).
Reply with the Python module only, in a ```python block."""

TASKS_PROMPT = """[twin:tasks] Write tasks an agent can do with these tools, each with its reference solution.

Server: {server}
Tools:
{tools}
Sample rows:
{rows}

For each task give: "task" (the user's request), "calls" (the reference tool calls: [{{"name", "arguments"}}]),
"answer" (the reference final answer, or null), and "verifier": Python source of
`def verify_task_completion(initial_db_path, final_db_path, final_answer=None)` returning
{{"result": "complete"}} only when the database and answer show the task done, else {{"result": "others"}}.
Reply with JSON only: [{{"task", "calls", "answer", "verifier"}}, ...]"""


def _tool_listing(tools: list[dict[str, Any]]) -> str:
    return "\n".join(f"- {t['name']}: {t['description']}\n  {json.dumps(t['input_schema'])}" for t in tools)


async def _stage(client: ChatClient, stage: TwinStage, prompt: str, check: Callable[[str], Any],
                 retries: int) -> Any:
    messages = [{"role": "user", "content": prompt}]
    for _ in range(1 + retries):
        stage.attempts += 1
        try:
            reply = await client.complete(messages, temperature=0.2)
        except LLMError as exc:
            raise TwinError(f"stage {stage.stage}: the model endpoint failed: {exc}") from None
        text = reply.message.get("content") or ""
        try:
            return check(text)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            stage.errors.append(str(exc)[:1000])
            messages += [{"role": "assistant", "content": text},
                         {"role": "user", "content": f"That did not work:\n{exc}\nFix it and reply again, in the "
                                                     "same format."}]
    raise TwinError(f"stage {stage.stage} failed after {stage.attempts} attempt(s): {stage.errors[-1]}")


def _check_server(code: str, scenario: AwmScenario, built: Any, names: list[str]) -> None:
    """Import the generated server in a contained worker; it must expose exactly the real tool names."""
    scratch = Path(tempfile.mkdtemp(prefix="mcpworld-twin-"))
    try:
        package = write_package(replace(scenario, full_code=code), built, scratch / "check",
                                "awm-twin-check")
        worker = package_worker(package)
        try:
            result = worker.run(f"{WORKER}:describe", {"path": str(package.resolve())})
        except WorkerError as exc:
            lines = [line for line in str(exc).splitlines() if line.strip()]
            raise ValueError(f"the server does not import: {lines[-1] if lines else exc}") from None
        finally:
            worker.close()
        if not result.ok:
            raise ValueError(f"the server does not start: {result.error}")
        routes = {t["name"] for t in result.value["tools"]}
        missing, extra = sorted(set(names) - routes), sorted(routes - set(names))
        if missing or extra:
            raise ValueError(f"operation ids must be exactly the tools: missing {missing or 'none'}, "
                             f"unexpected {extra or 'none'}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


async def synthesize_twin(spec: str, client: ChatClient, out_dir: Path, *, name: str | None = None,
                          retries: int = 2, audit: bool = True) -> TwinResult:
    """List the real server's tools, have the model write the twin, and import it as an audited world."""
    server = await read_server(spec)
    result = TwinResult(server=server, stages=[])
    key = normalize_scenario_name(name or f"twin {server.name}")
    tools = _tool_listing(server.tools)
    names = [t["name"] for t in server.tools]
    description = f"A simulated, stateful copy of the MCP server {server.name} ({', '.join(names)})."
    try:
        schema_stage = TwinStage("schema")
        result.stages.append(schema_stage)

        def check_schema(text: str) -> tuple[dict[str, Any], dict[str, Any], Any]:
            doc = parse_json(text)
            db_schema = {"tables": doc["tables"]}
            sample = {"tables": [{"table_name": "rows", "insert_statements": doc.get("inserts") or []}]}
            built = build_template_sql(db_schema, sample)
            if not built.inserts:
                raise ValueError("no sample row could be inserted: " + "; ".join(built.skipped[:5]))
            return db_schema, sample, built

        db_schema, sample, built = await _stage(client, schema_stage, SCHEMA_PROMPT.format(server=server.name,
                                                                                           tools=tools),
                                                check_schema, retries)
        base = AwmScenario(key=key, name=key, description=description, db_schema=db_schema,
                           sample_data=sample)  # its server is checked before it has tasks
        server_stage = TwinStage("server")
        result.stages.append(server_stage)

        def check_code(text: str) -> str:
            code = extract_block(text, "python")
            _check_server(code, base, built, names)
            return code

        code = await _stage(client, server_stage, SERVER_PROMPT.format(server=server.name, tools=tools,
                                                                       ddl="\n".join(built.ddl)),
                            check_code, retries)
        tasks_stage = TwinStage("tasks")
        result.stages.append(tasks_stage)

        def check_tasks(text: str) -> list[dict[str, Any]]:
            doc = parse_json(text)
            items = doc if isinstance(doc, list) else doc.get("tasks")
            if not isinstance(items, list) or not items:
                raise ValueError("expected a JSON list of tasks")
            for i, item in enumerate(items):
                if not item.get("task") or "def verify_" not in str(item.get("verifier") or ""):
                    raise ValueError(f"task {i} needs \"task\" and a \"verifier\" defining verify_task_completion")
                compile(item["verifier"], f"<verifier {i}>", "exec")
                for c in item.get("calls") or []:
                    if ToolCall.model_validate(c).name not in names:
                        raise ValueError(f"task {i} calls {c.get('name')!r}, which is not one of {names}")
            return items

        rows = "\n".join(built.inserts[:30])
        items = await _stage(client, tasks_stage, TASKS_PROMPT.format(server=server.name, tools=tools, rows=rows),
                             check_tasks, retries)
    except TwinError as exc:
        result.problems.append(str(exc))
        return result
    scenario = AwmScenario(key=key, name=key, description=description, tasks=[str(i["task"]) for i in items],
                           db_schema=db_schema, sample_data=sample, full_code=code,
                           code_verifiers={i: {"code": item["verifier"]} for i, item in enumerate(items)})
    references = {(key, i): Reference([ToolCall.model_validate(c) for c in item.get("calls") or []],
                                      item.get("answer"), "model") for i, item in enumerate(items)}
    result.report = await import_scenario(scenario, out_dir, references=references, audit=audit,
                                          name=f"twin-{key.removeprefix('twin_').replace('_', '-')}"[:60],
                                          keep_tools=server.tools, served_as="mcpworld")
    if result.report.ok:
        manifest_path = Path(result.report.path or "") / "scenario.json"
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        manifest["twin_of"] = {"source": spec, "server": server.name, "tools": names}
        manifest_path.write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
    return result
