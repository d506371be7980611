"""The serving stack without the network: the world server's ASGI app and the bare JSON-RPC handler (the ceiling,
`benchmarks.serving.bare_app`) in one process, driven as uvicorn drives them, interleaved in batches.

Why: over HTTP a server's CPU per call moves by 10-30% between runs on this machine (the load generator beside
it, the VM's neighbours), more than the gap being measured; here nothing else runs between the two, each batch
alternates them, and the least CPU per batch is kept. A batch is whole episodes as the load generator plays
them (start, 10 x `get_flight`, verify with close), so start and verify weigh what they weigh in training.

`python -m benchmarks.in_process [--protocol 2025-11-25|2026-07-28] [--batches N]`: a table per protocol with
CPU per request of each kind, per request of an episode, and the ratio (target >= 0.8x, as over HTTP).
"""

from __future__ import annotations

import argparse
import asyncio
import json
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


async def measure(protocol: str, batches: int, per_batch: int) -> dict[str, list[float]]:
    """Least CPU (µs) per batch of: start, one call, verify, and a request of the episode, for world and bare."""
    from benchmarks.serving import bare_app
    from mcpworld.core.serving import DirectEndpoints
    from mcpworld.worlds.episodes import EpisodeLimits
    from mcpworld.worlds.host import build_servers, load_runtime, worlds_app

    apps = {"world": DirectEndpoints(worlds_app(build_servers(["airline"], EpisodeLimits()))),
            "bare": bare_app(load_runtime("airline"))}
    keep = [await started(app) for app in apps.values()]
    play = {name: await player(app, protocol) for name, app in apps.items()}
    for episode in play.values():  # warm: templates, caches, the first connection
        for _ in range(20):
            await episode([0.0, 0.0, 0.0])
    least = {name: [float("inf")] * 4 for name in play}
    for _ in range(batches):
        for name, episode in play.items():
            acc = [0.0, 0.0, 0.0]
            for _ in range(per_batch):
                await episode(acc)
            figures = [acc[0] / per_batch * 1e6, acc[1] / per_batch / 10 * 1e6, acc[2] / per_batch * 1e6,
                       sum(acc) / per_batch / 12 * 1e6]
            least[name] = [min(a, b) for a, b in zip(least[name], figures)]
    del keep
    return least


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
    batches, episodes = (5, 20) if quick else (15, 40)
    print("  serving: in process, world and bare handler interleaved ...", file=sys.stderr)
    table: list[Row] = []
    for protocol in ("2025-11-25", "2026-07-28"):
        table += rows(protocol, asyncio.run(measure(protocol, batches, episodes)))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--protocol", choices=["2025-11-25", "2026-07-28"], action="append",
                        help="the protocol version(s) to measure (default: both)")
    parser.add_argument("--batches", type=int, default=15, help="interleaved batches per side (default 15)")
    parser.add_argument("--episodes", type=int, default=40, help="episodes per batch (default 40)")
    args = parser.parse_args(argv)
    table: list[Row] = []
    for protocol in args.protocol or ["2025-11-25", "2026-07-28"]:
        table += rows(protocol, asyncio.run(measure(protocol, args.batches, args.episodes)))
    print_table(table)
    return 0 if all(r.ok for r in table) else 1


if __name__ == "__main__":
    sys.exit(main())
