"""Faults a security/fault probe found, each reproduced against the real thing and shown fixed:

1. stdio servers answer every malformed line with a JSON-RPC error and keep serving;
2. the SWE episode cap holds under concurrent starts;
3. a package that fails validation is never left installed;
4. a hung proxied (worker) tool does not freeze the other worlds in the process.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from click.testing import CliRunner
from mcp import Client

from mcpworld.core.blocking import BLOCKING_ATTR
from mcpworld.core.paths import user_worlds_dir
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.stdio import MAX_JSON_DEPTH, check_jsonrpc_line
from mcpworld.core.testing import mcpworld_cmd

# -- 1. stdio: malformed JSON-RPC gets an error, and the next line is served ------------------------------------


class StdioProcess:
    """A server process spoken to line by line; every read has a deadline (no sleeps)."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen(mcpworld_cmd(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=dict(os.environ))
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.put(line)

    def send(self, line: str | bytes) -> None:
        data = line if isinstance(line, bytes) else line.encode("utf-8")
        self.proc.stdin.write(data.rstrip(b"\n") + b"\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def reply(self, timeout: float = 20.0) -> dict:
        try:
            return json.loads(self.lines.get(timeout=timeout))
        except queue.Empty:
            raise AssertionError(f"no reply within {timeout:g}s (the client would hang)") from None

    def request(self, rid: int, method: str, params: dict | None = None) -> dict:
        self.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, **({"params": params} if params else {})}))
        return self.reply()

    def close(self) -> int | None:
        """Hang up; the exit status, or None when the server did not exit by itself within 15 s."""
        self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            return None


INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fault-probe", "version": "0"}}
CALL = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "find_customer", "arguments": {"email": "x"}}}
BAD_LINES = [  # (label, line, expected code, expected id)
    ("truncated JSON", '{"jsonrpc": "2.0", "id": 2, "method"', types.PARSE_ERROR, None),
    ("not JSON at all", "hello", types.PARSE_ERROR, None),
    ("invalid UTF-8", b'{"jsonrpc": "2.0", "id": 3, "method": \xff\xfe}', types.PARSE_ERROR, None),
    ("nesting 1,000 deep", "[" * 1000 + "]" * 1000, types.PARSE_ERROR, None),
    ("nesting 100,000 deep", "[" * 100_000 + "]" * 100_000, types.PARSE_ERROR, None),
    ("deep arguments", '{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "find_customer", '
     '"arguments": {"email": ' + "[" * 300 + "]" * 300 + "}}}", types.INVALID_REQUEST, 4),
    ("batch", json.dumps([{"jsonrpc": "2.0", "id": 5, "method": "tools/list"}]), types.INVALID_REQUEST, None),
    ("empty batch", "[]", types.INVALID_REQUEST, None),
    ("lone surrogate", json.dumps({**CALL, "id": 6, "params": {"name": "find_customer",
                                                                "arguments": {"email": "\ud800"}}}),
     types.INVALID_REQUEST, 6),
    ("a number", "42", types.INVALID_REQUEST, None),
    ("no jsonrpc member", json.dumps({"id": 7, "method": "tools/list"}), types.INVALID_REQUEST, 7),
    ("wrong jsonrpc version", json.dumps({"jsonrpc": "1.0", "id": 8, "method": "tools/list"}),
     types.INVALID_REQUEST, 8),
]


@pytest.mark.parametrize(("label", "line", "code", "rid"), BAD_LINES, ids=[b[0] for b in BAD_LINES])
def test_check_refuses_each_malformed_line(label: str, line: str | bytes, code: int, rid: int | None) -> None:
    text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
    problem = check_jsonrpc_line(text)
    assert problem is not None and problem[0] == code and problem[2] == rid, problem


def test_check_passes_ordinary_messages() -> None:
    deep_but_fine = {"a": [[[[{"b": [1, 2, {"c": "\ud83d\ude00 ok"}]}]]]]}  # a surrogate *pair* is valid Unicode
    for message in ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                    {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {**CALL, "id": "abc", "params": {"name": "t", "arguments": deep_but_fine}},
                    {"jsonrpc": "2.0", "id": 9, "result": {}}):
        assert check_jsonrpc_line(json.dumps(message)) is None, message
    assert check_jsonrpc_line("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None  # batch, not depth
    assert check_jsonrpc_line('{"x": "' + "[" * 5000 + '"}')[0] == types.INVALID_REQUEST  # brackets in a string


def test_world_stdio_answers_every_malformed_line_and_keeps_serving() -> None:
    server = StdioProcess("serve", "world", "airline", "--stdio")
    try:
        assert server.request(1, "initialize", INIT)["result"]["serverInfo"]["name"] == "io.mcpworld/airline"
        server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        for label, line, code, rid in BAD_LINES:
            server.send(line)
            reply = server.reply()
            assert reply["jsonrpc"] == "2.0" and reply["error"]["code"] == code, (label, reply)
            assert reply["id"] == rid, (label, reply)
            server.send("")  # blank lines are framing: no reply, and nothing breaks
            listed = server.request(100, "tools/list")  # ...and the server still serves the next line
            assert listed["id"] == 100 and any(t["name"] == "find_customer" for t in listed["result"]["tools"]), label
        called = server.request(101, "tools/call", {"name": "find_customer", "arguments": {"email": "nobody@x.org"}})
        assert called["id"] == 101 and "result" in called
        assert server.close() == 0  # and it still exits cleanly when the client hangs up
    finally:
        server.close()


def test_swe_stdio_answers_malformed_lines(tmp_path: Path) -> None:
    from mcpworld.swe.builder import build_instances

    instances = build_instances(tmp_path / "swe")
    server = StdioProcess("serve", "swe", "--stdio", "--instances", str(instances), "--warm", "0")
    try:
        server.send("[" * 5000 + "]" * 5000)
        assert server.reply()["error"]["code"] == types.PARSE_ERROR
        server.send(json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}]))
        assert server.reply()["error"]["code"] == types.INVALID_REQUEST
        assert server.request(2, "initialize", INIT)["result"]["serverInfo"]["name"] == "io.mcpworld/swe"
    finally:
        server.close()


# -- 2. the SWE episode cap holds under concurrent starts ----------------------------------------------------------


@pytest.fixture(scope="module")
def swe_instances(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mcpworld.swe.builder import build_instances

    return build_instances(tmp_path_factory.mktemp("swe-faults"))


def test_swe_cap_is_never_exceeded_by_concurrent_starts(swe_instances: Path) -> None:
    from mcpworld.swe.instances import load_instances
    from mcpworld.swe.server import SWEOptions, SWEServer

    sw = SWEServer(load_instances(swe_instances), options=SWEOptions(warm=0, max_episodes=2))
    acquire, peak, inside = sw.pool.acquire, [0], threading.Lock()
    checking_out = [0]

    def slow_acquire(*args, **kwargs):  # a slow checkout widens the window every start races through
        with inside:
            checking_out[0] += 1
            peak[0] = max(peak[0], checking_out[0] + len(sw))
        try:
            time.sleep(0.3)
            return acquire(*args, **kwargs)
        finally:
            with inside:
                checking_out[0] -= 1

    sw.pool.acquire = slow_acquire  # type: ignore[method-assign]
    started: list[str] = []
    refused: list[str] = []

    async def main() -> None:
        async with Client(sw.server) as client:
            ctl = EpisodeControl(client)

            async def start() -> None:
                try:
                    started.append((await ctl.start("mcpworld__textkit-2")).episode)
                except Exception as exc:  # the SDK raises the JSON-RPC error
                    refused.append(str(exc))

            async with anyio.create_task_group() as tg:
                for _ in range(12):
                    tg.start_soon(start)
            assert len(sw) == 2
            for episode in started:  # a closed slot is free again
                await ctl.close(episode)
            started.append((await ctl.start("mcpworld__textkit-2")).episode)

    try:
        anyio.run(main)
    finally:
        sw.close_all()
    assert peak[0] <= 2, f"{peak[0]} episodes live or checking out under a cap of 2"
    assert len(started) == 3 and len(refused) == 10, (started, refused)
    assert all("too many live episodes" in r and "max 2" in r for r in refused), refused


# -- 3. a failed --install leaves nothing installed ---------------------------------------------------------------


def _checkpoint(root: Path, env_id: str, name: str, tools: list[dict]) -> Path:
    folder = root / "environment_mix"
    (folder / env_id).mkdir(parents=True)
    (folder / env_id / "counters.json").write_text(json.dumps([{"id": "c1", "n": 0}]))
    checkpoint = folder / f"{env_id}_step4_checkpoint.json"
    checkpoint.write_text(json.dumps({"metadata": {"env_id": env_id, "name": name, "description": f"{name}."},
                                      "data": {"ToolDesignAgent": {"tool_schemas": tools}}}))
    return checkpoint


BROKEN_TOOLS = [{"name": "get_nothing", "description": "Always fails.", "parameters": {"type": "object",
                                                                                       "properties": {}},
                 "implementation": "def get_nothing(**_extra):\n    raise RuntimeError('broken')\n"}]


def test_failed_agent_world_install_leaves_nothing_installed(tmp_path: Path) -> None:
    from mcpworld.synth.cli import synth_group

    _checkpoint(tmp_path, "9990001", "Broken Lab", BROKEN_TOOLS)
    worlds = user_worlds_dir()
    (worlds / "aw-broken-lab").mkdir(parents=True)  # an older installed copy: it must survive a failed re-install
    (worlds / "aw-broken-lab" / "marker").write_text("old")
    result = CliRunner().invoke(synth_group, ["import-agent-world", str(tmp_path), "--install", "--tasks", "1",
                                              "--registry", "http://127.0.0.1:9"])
    assert result.exit_code == 1, result.output
    assert sorted(p.name for p in worlds.iterdir()) == ["aw-broken-lab"]  # no staging folder left behind
    assert sorted(p.name for p in (worlds / "aw-broken-lab").iterdir()) == ["marker"]  # the old copy, untouched
    assert "fail aw-broken-lab" in result.output and "not installed" in result.output, result.output
    assert "no honest task found" in result.output, result.output

    from mcpworld.worlds.loader import discover

    assert "aw-broken-lab" not in {r.name for r in discover() if (r.path / "environment.json").exists()}


def test_install_package_refuses_a_package_that_fails_validation(tmp_path: Path) -> None:
    from mcpworld.synth.importers.install import InstallError, install_package

    bad = tmp_path / "bad-world"
    bad.mkdir()
    (bad / "__init__.py").write_text("raise ImportError('generated code is broken')\n")
    with pytest.raises(InstallError, match="bad-world was not installed: it fails validation"):
        install_package(bad, "bad-world")
    worlds = user_worlds_dir()
    assert not (worlds / "bad-world").exists() and list(worlds.iterdir()) == []

    good = install_package(Path(__file__).resolve().parents[2] / "mcpworld/worlds/catalog/airline", "my-airline")
    assert good == worlds / "my-airline" and (good / "__init__.py").is_file()
    assert sorted(p.name for p in worlds.iterdir()) == ["my-airline"]


# -- 4. a hung worker tool does not freeze the other worlds --------------------------------------------------------


HANG_TOOLS = [
    {"name": "wait_forever", "description": "Never returns.", "parameters": {"type": "object", "properties": {}},
     "implementation": "def wait_forever(**_extra):\n    import time\n    time.sleep(3600)\n"},
    {"name": "bump_slowly", "description": "Add one, slowly.", "parameters": {"type": "object", "properties": {}},
     "implementation": "def bump_slowly(**_extra):\n    import json, os, time\n"
                       "    path = os.path.join(os.environ['MCP_DB_DIR'], 'counters.json')\n"
                       "    rows = json.load(open(path))\n    time.sleep(2.5)\n    rows[0]['n'] += 1\n"
                       "    json.dump(rows, open(path, 'w'))\n    return rows[0]\n"},
    {"name": "get_counter", "description": "The counter.", "parameters": {"type": "object", "properties": {}},
     "implementation": "def get_counter(**_extra):\n    import json, os\n"
                       "    return json.load(open(os.path.join(os.environ['MCP_DB_DIR'], 'counters.json')))[0]\n"},
]


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def test_hung_worker_tool_does_not_freeze_another_world(tmp_path: Path) -> None:
    from mcpworld.synth.importers.agent_world import Limits, import_environment
    from mcpworld.worlds.host import load_runtime
    from mcpworld.worlds.loader import load_world
    from mcpworld.worlds.runtime import WorldRuntime
    from mcpworld.worlds.server import WorldServer

    checkpoint = _checkpoint(tmp_path, "9990002", "Hang Lab", HANG_TOOLS)
    imported = anyio.run(lambda: import_environment(checkpoint, tmp_path / "out", n_tasks=1,
                                                    limits=Limits(cpu_s=3, wall_s=3)))
    manifest = imported.path / "environment.json"  # serve it with a worker wall limit above the call timeout
    meta = json.loads(manifest.read_text())
    meta["limits"].update(cpu_s=10, wall_s=10)
    manifest.write_text(json.dumps(meta))
    hang = WorldServer(WorldRuntime(load_world(imported.path)))
    for name in ("wait_forever", "bump_slowly"):
        assert getattr(hang.runtime.tools[name].fn, BLOCKING_ATTR) > 0  # proxies are marked as blocking
        setattr(hang.runtime.tools[name].fn, BLOCKING_ATTR, 1.5)  # a short per-call timeout for the test
    airline = WorldServer(load_runtime("airline"))
    assert not hasattr(airline.runtime.tools["find_customer"].fn, BLOCKING_ATTR)  # native tools: the direct path

    async def main() -> None:
        async with Client(hang.server) as hc, Client(airline.server) as ac:
            hctl, actl = EpisodeControl(hc), EpisodeControl(ac)
            ep, other, plain = (await hctl.start(None)).episode, (await hctl.start(None)).episode, \
                (await actl.start(None)).episode
            results: dict[str, object] = {}

            async def hung() -> None:
                began = time.monotonic()
                results["hung"] = await hctl.call(ep, "wait_forever")
                results["hung_s"] = time.monotonic() - began

            sent = time.monotonic()
            async with anyio.create_task_group() as tg:
                tg.start_soon(hung)
                await anyio.sleep(0.2)  # the hung call is in flight
                latencies = []
                for _ in range(5):
                    began = time.monotonic()
                    answered = await actl.call(plain, "find_customer", {"email": "nobody@example.org"})
                    latencies.append(time.monotonic() - began)
                    assert answered.content
                answered_after = time.monotonic() - sent
                assert "hung" not in results and answered_after < 1.0, (answered_after, latencies)  # while A hangs
                counter = await hctl.call(other, "get_counter")  # and another episode of the hung world too
                assert not counter.is_error and json.loads(_text(counter))["n"] == 0
            hung_result = results["hung"]
            assert hung_result.is_error and "timed out" in _text(hung_result), _text(hung_result)
            assert "changes were discarded" in _text(hung_result) and results["hung_s"] < 2.8, results

            slow = await hctl.call(other, "bump_slowly")  # times out; its late result must not land
            assert slow.is_error and "timed out" in _text(slow), _text(slow)
            after = await hctl.call(other, "get_counter")  # waits for the abandoned call, then reads
            assert not after.is_error and json.loads(_text(after))["n"] == 0, _text(after)

    anyio.run(main)
