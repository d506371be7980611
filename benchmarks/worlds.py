"""World runtime benchmarks: fork latency, tool calls per transport, memory of 1,024 episodes, verify at 10k rows."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta

import anyio
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer

from benchmarks.common import Row, p50, pct, timed
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http
from mcpworld.worlds.host import load_runtime
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.server import WorldServer

ECHO_SCRIPT = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("echo", log_level="WARNING")
@server.tool()
def echo(text: str) -> str:
    return text
if __name__ == "__main__":
    import sys
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        import uvicorn
        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


def echo_server() -> MCPServer:
    server = MCPServer("echo", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        return text

    return server


def bench_fork(quick: bool) -> list[Row]:
    runtime = load_runtime("airline")
    runtime.fork("cancel-within-24h").close()
    samples = timed(lambda: runtime.fork("cancel-within-24h").close(), 200 if quick else 2000)
    spawns = []
    for _ in range(2 if quick else 5):
        t = time.perf_counter()
        anyio.run(_spawn_and_init)
        spawns.append(time.perf_counter() - t)
    fork_ms, spawn_ms = p50(samples) * 1000, p50(spawns) * 1000
    return [
        Row("episode fork p50", fork_ms, "ms", "server process per episode p50", spawn_ms,
            "<= 1 ms and >= 1000x", fork_ms <= 1.0 and spawn_ms / fork_ms >= 1000),
        Row("episode fork p99", pct(samples, 0.99) * 1000, "ms", "server process per episode p50", spawn_ms,
            "reported", True),
    ]


async def _spawn_and_init() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcpworld", "serve", "world", "airline",
                                                                 "--stdio"])
    async with Client(params, mode="legacy") as client:
        await client.list_tools()


async def _rate(client: Client, call, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        result = await call(client)
        out.append(time.perf_counter() - t)
        assert not result.is_error, result
    return out


async def _world_call(client: Client):
    return await client.call_tool("get_reservation", {"reservation_id": "ZFA04Y"})


async def _echo_call(client: Client):
    return await client.call_tool("echo", {"text": "ZFA04Y"})


def _transport_rows(label: str, world: list[float], echo: list[float]) -> list[Row]:
    w_rate, e_rate = len(world) / sum(world), len(echo) / sum(echo)
    return [
        Row(f"{label}: world tool calls/s", w_rate, "calls/s", "SDK echo tool", e_rate, ">= 0.8x",
            w_rate >= 0.8 * e_rate),
        Row(f"{label}: world tool p50", p50(world) * 1000, "ms", "SDK echo tool p50", p50(echo) * 1000,
            "reported", True),
        Row(f"{label}: world tool p99", pct(world, 0.99) * 1000, "ms", "SDK echo tool p99", pct(echo, 0.99) * 1000,
            "reported", True),
    ]


def bench_calls(quick: bool, tmpdir: str) -> list[Row]:
    n = 200 if quick else 1000
    rows: list[Row] = []

    async def inmemory() -> tuple[list[float], list[float]]:
        async with Client(WorldServer(load_runtime("airline")).server, mode="legacy") as c:
            await _rate(c, _world_call, 50)
            world = await _rate(c, _world_call, n)
        async with Client(echo_server(), mode="legacy") as c:
            await _rate(c, _echo_call, 50)
            echo = await _rate(c, _echo_call, n)
        return world, echo

    rows += _transport_rows("in-memory", *anyio.run(inmemory))

    script = os.path.join(tmpdir, "echo_server.py")
    with open(script, "w") as f:
        f.write(ECHO_SCRIPT)

    async def stdio() -> tuple[list[float], list[float]]:
        world_params = StdioServerParameters(command=sys.executable,
                                             args=["-m", "mcpworld", "serve", "world", "airline", "--stdio"])
        async with Client(world_params, mode="legacy") as c:
            await _rate(c, _world_call, 50)
            world = await _rate(c, _world_call, n)
        async with Client(StdioServerParameters(command=sys.executable, args=[script, "stdio"]), mode="legacy") as c:
            await _rate(c, _echo_call, 50)
            echo = await _rate(c, _echo_call, n)
        return world, echo

    rows += _transport_rows("stdio", *anyio.run(stdio))

    world_port, echo_port = free_port(), free_port()
    procs = [
        subprocess.Popen(mcpworld_cmd("serve", "worlds", "--only", "airline", "--port", str(world_port)),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
        subprocess.Popen([sys.executable, script, "http", str(echo_port)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True),
    ]
    try:
        wait_http(f"http://127.0.0.1:{world_port}/healthz", procs[0])
        wait_http(f"http://127.0.0.1:{echo_port}/mcp", procs[1])

        async def http() -> tuple[list[float], list[float]]:
            n_http = max(100, n // 4)
            async with Client(f"http://127.0.0.1:{world_port}/worlds/airline/mcp", mode="legacy") as c:
                await _rate(c, _world_call, 20)
                world = await _rate(c, _world_call, n_http)
            async with Client(f"http://127.0.0.1:{echo_port}/mcp", mode="legacy") as c:
                await _rate(c, _echo_call, 20)
                echo = await _rate(c, _echo_call, n_http)
            return world, echo

        rows += _transport_rows("streamable HTTP", *anyio.run(http))
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
    return rows


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def bench_rss(quick: bool) -> list[Row]:
    port = free_port()
    proc = subprocess.Popen(mcpworld_cmd("serve", "worlds", "--only", "airline", "--port", str(port)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc)

        async def fill() -> tuple[float, float]:
            async with Client(f"http://127.0.0.1:{port}/worlds/airline/mcp", mode="legacy") as c:
                ctl = EpisodeControl(c)
                await ctl.tasks()
                idle = _rss_mib(proc.pid)
                for i in range(1024):
                    episode = (await ctl.start("book-cheapest-economy", seed=i)).episode
                    await ctl.call(episode, "update_contact", {"customer_id": "C003", "phone": str(i)})
                return idle, _rss_mib(proc.pid)

        idle, full = anyio.run(fill)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return [Row("RSS with 1,024 live episodes", full, "MiB", "same process, 0 episodes", idle, "<= 1024 MiB",
                full <= 1024)]


def scaled_airline(rows: int) -> WorldRuntime:
    """The airline world with `rows` extra reservations, to time verification on a big table."""
    from dataclasses import replace

    from mcpworld.worlds.catalog.airline import world
    from mcpworld.worlds.catalog.airline.models import Reservation

    def seed(db) -> None:
        world.seed(db)
        for i in range(rows):
            db.add(Reservation(id=f"BULK{i:06d}", customer_id="C001", flight_id="MW401-0606", cabin="economy",
                               fare="standard", passengers=1, booked_at=world.clock - timedelta(days=1),
                               amount_paid=110.0, payment_id="PM-ADA-CARD"))

    return WorldRuntime(replace(world, seed=seed))


def bench_verify(quick: bool) -> list[Row]:
    out = {}
    for label, runtime in [("small", load_runtime("airline")), ("10k", scaled_airline(10_000))]:
        task = runtime.tasks["cancel-within-24h"]
        samples = []
        for i in range(30 if quick else 200):
            episode = runtime.fork(task.id, seed=i)
            for step in task.solution:
                runtime.call(episode, step.name, step.arguments)
            t = time.perf_counter()
            verdict = runtime.verify(episode, None)
            samples.append(time.perf_counter() - t)
            assert verdict.passed
            episode.close()
        out[label] = p50(samples) * 1000
    return [Row("verify p50, 10k-row table written", out["10k"], "ms", "verify p50, seed-size world", out["small"],
                "<= 5 ms", out["10k"] <= 5.0)]
