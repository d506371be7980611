"""The serving stack without the network: the world server's ASGI app and the bare JSON-RPC handler (the ceiling,
`benchmarks.serving.bare_app`) in one process, driven as uvicorn drives them, interleaved in small pairs.

Why: over HTTP a server's CPU per call moves by 10-30% between runs on this machine (the load generator beside
it, the VM's neighbours), more than the gap being measured; here nothing else runs between the two, and each
pair plays a few episodes on one side and then the other, so both meet the machine in the same state; the
median over hundreds of pairs is kept. An episode is played as the load generator plays it (start, 10 x
`get_flight`, verify with close), so start and verify weigh what they weigh in training.

`python -m benchmarks.in_process [--protocol 2025-11-25|2026-07-28] [--pairs N]`: a table per protocol with
CPU per request of each kind, per request of an episode, and the ratio (target >= 0.8x, as over HTTP).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from benchmarks.common import Row, print_table

PATH = "/worlds/airline/mcp"
TASK = "cancel-within-24h"
FLIGHT = "MW307-0602"
ENVELOPE_KEYS = ("io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientInfo",
                 "io.modelcontextprotocol/clientCapabilities")
Episode = Callable[[list[float]], Awaitable[None]]


async def post(app: Any, message: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    """One POST through the ASGI app, its whole body in one message (as uvicorn hands a small one over)."""
    body = json.dumps(message).encode()
    raw = {"host": "127.0.0.1:8765", "content-type": "application/json", "content-length": str(len(body)),
           "accept": "application/json, text/event-stream", **headers}
    scope = {"type": "http", "method": "POST", "path": PATH, "root_path": "", "query_string": b"", "scheme": "http",
             "server": ("127.0.0.1", 8765), "client": ("127.0.0.1", 5555), "http_version": "1.1",
             "asgi": {"version": "3.0"}, "headers": [(k.encode(), v.encode()) for k, v in raw.items()]}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(event: dict[str, Any]) -> None:
        sent.append(event)

    await app(scope, receive, send)
    head = {k.decode(): v.decode() for k, v in sent[0].get("headers", [])}
    return sent[0]["status"], head, json.loads(sent[1]["body"]) if sent[1]["body"] else None


async def started(app: Any) -> Any:
    """Run the app's lifespan startup; returns the task that holds it (keep it alive)."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await inbox.put({"type": "lifespan.startup"})
    task = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, outbox.put))
    event = await outbox.get()
    if event["type"] != "lifespan.startup.complete":
        raise RuntimeError(f"lifespan startup failed: {event}")
    return task


async def player(app: Any, protocol: str) -> Episode:
    """An episode function for `app`: adds start, calls and verify CPU seconds to its `acc` argument."""
    ids = iter(range(1, 10**9))
    headers = {"mcp-protocol-version": protocol}
    meta: dict[str, Any] = {}
    if protocol == "2025-11-25":
        _, head, _ = await post(app, {"jsonrpc": "2.0", "id": next(ids), "method": "initialize", "params": {
            "protocolVersion": protocol, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}},
            headers)
        headers["mcp-session-id"] = head.get("mcp-session-id", "bare")
        await post(app, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    else:
        meta = dict(zip(ENVELOPE_KEYS, (protocol, {"name": "bench", "version": "1"}, {})))

    def request(method: str, params: dict[str, Any], **more: str) -> Awaitable[tuple[int, dict[str, str], Any]]:
        return post(app, {"jsonrpc": "2.0", "id": next(ids), "method": method,
                          "params": {**params, "_meta": {**meta, **params.get("_meta", {})}}},
                    {**headers, "mcp-method": method, **more})

    async def episode(acc: list[float]) -> None:
        t0 = time.process_time()
        _, _, reply = await request("io.mcpworld/episode/start", {"task": TASK, "seed": 0})
        handle = reply["result"]["episode"]
        t1 = time.process_time()
        for _ in range(10):
            call = {"name": "get_flight", "arguments": {"flight_id": FLIGHT}, "_meta": {"io.mcpworld/episode": handle}}
            _, _, reply = await request("tools/call", call, **{"mcp-name": "get_flight"})
            if reply["result"]["isError"]:
                raise RuntimeError(f"get_flight failed: {reply}")
        t2 = time.process_time()
        _, _, reply = await request("io.mcpworld/episode/verify", {"episode": handle, "close": True})
        if "result" not in reply:
            raise RuntimeError(f"verify failed: {reply}")
        t3 = time.process_time()
        acc[0] += t1 - t0
        acc[1] += t2 - t1
        acc[2] += t3 - t2

    return episode


async def measure(protocol: str, pairs: int, per_side: int) -> dict[str, list[float]]:
    """Median CPU (µs) of start, one call, verify and a request of the episode, for world and bare, over `pairs`
    back-to-back pairs of `per_side` episodes each (the order flipped every pair).

    Why pairs this small: this machine's speed swings by up to 2x from one few-millisecond stretch to the next
    (its neighbours; no steal time shows), and whole batches of 40 episodes a side landed in different
    stretches: the ratio moved 0.62-1.14x between runs of the same code. A pair takes ~10 ms, so both sides
    see the same machine, and the median of hundreds of pairs moves by ~0.01 between runs."""
    from benchmarks.serving import bare_app
    from mcpworld.worlds.episodes import EpisodeLimits
    from mcpworld.worlds.host import build_servers, load_runtime, worlds_app

    apps = {"world": worlds_app(build_servers(["airline"], EpisodeLimits())),
            "bare": bare_app(load_runtime("airline"))}
    keep = [await started(app) for app in apps.values()]
    play = {name: await player(app, protocol) for name, app in apps.items()}
    for episode in play.values():  # warm: templates, caches, the first connection
        for _ in range(20):
            await episode([0.0, 0.0, 0.0])
    samples: dict[str, list[list[float]]] = {name: [] for name in play}
    for i in range(pairs):
        for name in (("world", "bare") if i % 2 else ("bare", "world")):
            acc = [0.0, 0.0, 0.0]
            for _ in range(per_side):
                await play[name](acc)
            samples[name].append([acc[0] / per_side * 1e6, acc[1] / per_side / 10 * 1e6, acc[2] / per_side * 1e6,
                                  sum(acc) / per_side / 12 * 1e6])
    del keep
    return {name: [statistics.median(column) for column in zip(*rows)] for name, rows in samples.items()}


def rows(protocol: str, least: dict[str, list[float]]) -> list[Row]:
    world, bare = least["world"], least["bare"]
    kinds = ["episode/start", "tools/call get_flight", "episode/verify with close"]
    out = [Row(f"in process {protocol}: {kind}", world[i], "us", "bare JSON-RPC, same runtime", bare[i],
               "reported", True) for i, kind in enumerate(kinds)]
    out.append(Row(f"in process {protocol}: per request of an episode", world[3], "us",
                   "bare JSON-RPC, same runtime", bare[3], "capacity >= 0.8x", bare[3] >= 0.8 * world[3]))
    return out


def bench_in_process(quick: bool) -> list[Row]:
    """Both protocol versions (part of `python -m benchmarks.run --only serving`)."""
    pairs = 100 if quick else 300
    print("  serving: in process, world and bare handler interleaved ...", file=sys.stderr)
    table: list[Row] = []
    for protocol in ("2025-11-25", "2026-07-28"):
        table += rows(protocol, asyncio.run(measure(protocol, pairs, 2)))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--protocol", choices=["2025-11-25", "2026-07-28"], action="append",
                        help="the protocol version(s) to measure (default: both)")
    parser.add_argument("--pairs", type=int, default=300, help="back-to-back pairs of world and bare (default 300)")
    parser.add_argument("--episodes", type=int, default=2, help="episodes per side of a pair (default 2)")
    args = parser.parse_args(argv)
    table: list[Row] = []
    for protocol in args.protocol or ["2025-11-25", "2026-07-28"]:
        table += rows(protocol, asyncio.run(measure(protocol, args.pairs, args.episodes)))
    print_table(table)
    return 0 if all(r.ok for r in table) else 1


if __name__ == "__main__":
    sys.exit(main())
