"""Twin of a real third-party MCP server (mcp-server-time from PyPI, over stdio): the twin world keeps the
server's tool names and input schemas, has a database behind them, serves over MCP, and its tasks are
validated and audited; the model is a local HTTP server replaying recorded completions."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters

from mcpworld.core.llm_replay import ReplayLLM, serve
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.testing import free_port
from mcpworld.synth.cli import synth_group
from mcpworld.worlds.loader import load_world
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.server import WorldServer

TIME_SERVER = shutil.which("mcp-server-time") or str(Path(sys.executable).parent / "mcp-server-time")
needs_server = pytest.mark.skipif(not Path(TIME_SERVER).exists(), reason="mcp-server-time is not installed "
                                  "(pip install mcp-server-time; it is in the test extra)")
SERVER_CODE = (Path(__file__).parents[1] / "data" / "twin" / "time_server.py").read_text()
SCHEMA = {"tables": [{"name": "timezones", "ddl": "CREATE TABLE timezones (name TEXT PRIMARY KEY, "
                                                   "utc_offset_minutes INTEGER NOT NULL, is_dst INTEGER NOT NULL)"}],
          "inserts": ["INSERT INTO timezones VALUES ('UTC', 0, 0);",
                      "INSERT INTO timezones VALUES ('Europe/London', 60, 1);",
                      "INSERT INTO timezones VALUES ('Asia/Tokyo', 540, 0);",
                      "INSERT INTO timezones VALUES ('America/New_York', -240, 1);"]}
VERIFY = ("def verify_task_completion(initial_db_path, final_db_path, final_answer=None):\n"
          "    answer = (final_answer or '').strip()\n"
          "    return {'result': 'complete' if len(answer) < 80 and '{want}' in answer else 'others'}\n")
TASKS = [
    {"task": "What time is it in Tokyo right now?", "answer": "It is 21:00 in Tokyo.",
     "calls": [{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}],
     "verifier": VERIFY.replace("{want}", "21:00")},
    {"task": "My call is at 09:30 in New York. What time is that in London?", "answer": "14:30 in London.",
     "calls": [{"name": "convert_time", "arguments": {"source_timezone": "America/New_York", "time": "09:30",
                                                     "target_timezone": "Europe/London"}}],
     "verifier": VERIFY.replace("{want}", "14:30")},
]


def scripts() -> dict:
    broken = SERVER_CODE.replace('operation_id="convert_time"', 'operation_id="convert"')
    return {
        "[twin:schema]": [{"content": json.dumps(SCHEMA)}],
        # the first server names a route wrongly: the error goes back and the second answer is right
        "[twin:server]": [{"content": f"```python\n{broken}\n```"}, {"content": f"```python\n{SERVER_CODE}\n```"}],
        "[twin:tasks]": [{"content": json.dumps(TASKS)}],
    }


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def real_tools() -> dict:
    params = StdioServerParameters(command=TIME_SERVER, args=["--local-timezone", "UTC"])
    async with Client(params) as client:
        return {t.name: t for t in (await client.list_tools()).tools}


@needs_server
def test_twin_of_a_real_server_keeps_its_tools_and_is_audited(tmp_path: Path) -> None:
    llm = ReplayLLM(scripts())
    with serve(llm, free_port()) as base:
        result = CliRunner().invoke(synth_group, ["twin", f"{TIME_SERVER} --local-timezone UTC", "--model", "m",
                                                  "--base-url", base, "-o", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output[result.output.index("{"):result.output.rindex("}") + 1])
    assert [(s["stage"], s["attempts"]) for s in doc["stages"]] == [("schema", 1), ("server", 2), ("tasks", 1)]
    assert "missing ['convert_time']" in doc["stages"][1]["errors"][0]
    report = doc["report"]
    assert report["ok"] and report["kept"] == ["task-0", "task-1"], report
    real = anyio.run(real_tools)
    world = load_world(Path(report["path"]))
    server = WorldServer(WorldRuntime(world))

    async def main() -> None:
        async with Client(server.server) as client:
            twin = {t.name: t for t in (await client.list_tools()).tools}
            assert set(twin) - {"submit_answer", "decline"} == set(real) == {"get_current_time", "convert_time"}
            for name, tool in real.items():
                assert twin[name].input_schema["properties"] == tool.input_schema["properties"]
                assert twin[name].input_schema.get("required") == tool.input_schema.get("required")
                assert twin[name].description == tool.description
            ctl = EpisodeControl(client)
            episode = (await ctl.start("task-0")).episode
            now = await ctl.call(episode, "get_current_time", {"timezone": "Asia/Tokyo"})
            assert not now.is_error and "2026-06-01T21:00:00+09:00" in text(now)  # the world's clock, in the DB's zone
            bad = await ctl.call(episode, "get_current_time", {"timezone": "Mars/Olympus"})
            assert bad.is_error and "Invalid timezone" in text(bad)
            assert (await ctl.verify(episode, "It is 21:00 in Tokyo.")).verdict.passed
            other = (await ctl.start("task-0")).episode
            assert not (await ctl.verify(other, "It is 20:00 in Tokyo.")).verdict.passed

    anyio.run(main)
    manifest = json.loads((Path(report["path"]) / "scenario.json").read_text())
    assert manifest["twin_of"]["tools"] == ["get_current_time", "convert_time"]
    assert manifest["served_as"] == "mcpworld"  # the real server's tools, not FastApiMCP's (AWM imports: "awm")


def test_unreachable_server_is_reported(tmp_path: Path) -> None:
    result = CliRunner().invoke(synth_group, ["twin", "/nonexistent/mcp-server", "--model", "m", "--base-url",
                                              "http://127.0.0.1:9/v1", "-o", str(tmp_path)])
    assert result.exit_code != 0 and "/nonexistent/mcp-server" in result.output
    quits = f"{sys.executable} -c 'raise SystemExit(0)'"  # starts, then exits before answering
    result = CliRunner().invoke(synth_group, ["twin", quits, "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                                              "-o", str(tmp_path)])
    assert result.exit_code != 0 and "cannot list the tools" in result.output and "Traceback" not in result.output


def test_a_server_json_launches_only_what_the_registry_would(tmp_path: Path) -> None:
    """Issue 30: `synth twin server.json` ran whatever the file named (`/bin/sh -c ...`)."""
    from mcpworld.synth.synthesis.twin import TwinError, _target

    marker = tmp_path / "ran"
    evil = {"name": "io.example/evil", "description": "x", "version": "1.0.0", "packages": [
        {"registryType": "npm", "identifier": "-c", "runtimeHint": "/bin/sh", "transport": {"type": "stdio"},
         "packageArguments": [{"type": "positional", "value": f"touch {marker}"}]}]}
    path = tmp_path / "server.json"
    path.write_text(json.dumps(evil))
    with pytest.raises(TwinError, match="not allowed"):
        _target(str(path))
    assert not marker.exists()
