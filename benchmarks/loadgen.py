"""A lean Streamable HTTP load generator, run in its own process: `python -m benchmarks.loadgen URL [options]`.

One episode is `io.mcpworld/episode/start` -> 10 x `tools/call get_flight` -> `io.mcpworld/episode/verify` with
close (12 requests); `--kind echo` sends 12 `tools/call echo` instead, `--kind ping` 12 `ping`s, `--kind fill` starts an
episode, writes once and leaves it open, `--kind cancel` plays the OpenRLHF bridge row's rollout (start ->
get_reservation -> cancel_reservation -> verify with the answer and close, 4 requests; it must pass). Clients speak
2025-11-25 (initialize once, then `Mcp-Session-Id`) or 2026-07-28 (no handshake, the envelope in every request's
`_meta`). Prints one JSON object: requests, seconds, requests/s, p50/p99 in ms, errors.

`--pairs N --against URL2 --pids PIDS --pids PIDS2`: bursts of `--episodes` against each server in turn, N
times, each burst's rate and server CPU per request (`{"targets": [...]}`): how two servers are compared here;
`--also-at C` adds the first server at concurrency C (how one server at two concurrencies is compared).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from benchmarks.common import cpu_s, load_summary

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "loadgen", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}
EPISODE_META = "io.mcpworld/episode"
CANCEL_CALLS = [("get_reservation", {"reservation_id": "ZFA04Y"}),
                ("cancel_reservation", {"reservation_id": "ZFA04Y", "reason": "change_of_plan"})]


class Client:
    """One logical MCP client over a shared aiohttp connection pool."""

    def __init__(self, http: aiohttp.ClientSession, url: str, protocol: str, headers: dict[str, str]):
        self.http, self.url, self.protocol = http, url, protocol
        self.headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                        "mcp-protocol-version": protocol, **headers}
        self.next_id = 0

    async def open(self) -> None:
        if self.protocol == MODERN:
            return
        result = await self.request("initialize", {"protocolVersion": self.protocol, "capabilities": {},
                                                   "clientInfo": {"name": "loadgen", "version": "1"}}, init=True)
        assert result["protocolVersion"] == self.protocol, result
        async with self.http.post(self.url, data=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                                  headers=self.headers) as resp:
            await resp.read()
            assert resp.status == 202, resp.status

    async def request(self, method: str, params: dict[str, Any] | None = None, init: bool = False) -> Any:
        self.next_id += 1
        params = dict(params or {})
        if self.protocol == MODERN:
            params["_meta"] = {**ENVELOPE, **params.get("_meta", {})}
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        headers = self.headers
        if self.protocol == MODERN:  # 2026-07-28 routing headers mirror the body
            headers = {**headers, "mcp-method": method}
            if "name" in params:
                headers["mcp-name"] = params["name"]
        async with self.http.post(self.url, data=body, headers=headers) as resp:
            raw = await resp.read()
            if init and "mcp-session-id" in resp.headers:
                self.headers["mcp-session-id"] = resp.headers["mcp-session-id"]
            if resp.status >= 400 and not raw:
                raise RuntimeError(f"HTTP {resp.status} for {method}")
            kind = resp.headers.get("content-type", "")
        if kind.startswith("text/event-stream"):
            raw = next(line[5:] for line in raw.decode().splitlines()[::-1] if line.startswith("data:")).encode()
        message = json.loads(raw)
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        return message["result"]


async def episode(client: Client, kind: str, latencies: list[float]) -> None:
    async def timed(method: str, params: dict[str, Any] | None = None) -> Any:
        t = time.perf_counter()
        result = await client.request(method, params)
        latencies.append(time.perf_counter() - t)
        return result

    if kind == "echo":
        for _ in range(12):
            assert not (await timed("tools/call", {"name": "echo", "arguments": {"text": "MW307-0602"}}))["isError"]
        return
    if kind == "fill":  # an episode left open, one write in it (for memory with many live episodes)
        started = await timed("io.mcpworld/episode/start", {"task": "book-cheapest-economy", "seed": 0})
        await timed("tools/call", {"name": "update_contact", "arguments": {"customer_id": "C003", "phone": "1"},
                                   "_meta": {EPISODE_META: started["episode"]}})
        return
    if kind == "ping":
        for _ in range(12):
            await timed("ping")
        return
    if kind == "cancel":  # the OpenRLHF bridge row's rollout (benchmarks/agent.py plays CANCEL_CALLS too)
        started = await timed("io.mcpworld/episode/start", {"task": "cancel-within-24h", "seed": 0})
        meta = {EPISODE_META: started["episode"]}
        for name, arguments in CANCEL_CALLS:
            result = await timed("tools/call", {"name": name, "arguments": arguments, "_meta": meta})
            assert not result["isError"], result
        verified = await timed("io.mcpworld/episode/verify", {"episode": started["episode"], "answer": "Cancelled.",
                                                              "close": True})
        assert verified["verdict"]["passed"] and verified["closed"], verified
        return
    started = await timed("io.mcpworld/episode/start", {"task": "cancel-within-24h", "seed": 0})
    meta = {EPISODE_META: started["episode"]}
    for _ in range(10):
        result = await timed("tools/call", {"name": "get_flight", "arguments": {"flight_id": "MW307-0602"},
                                            "_meta": meta})
        assert not result["isError"], result
    verified = await timed("io.mcpworld/episode/verify", {"episode": started["episode"], "close": True})
    assert verified["closed"], verified


async def _clients(stack: contextlib.AsyncExitStack, url: str, concurrency: int, protocol: str, kind: str,
                   token: str | None, sticky: bool) -> list[Client]:
    """`concurrency` opened clients of `url` (handshakes done, one warm-up episode played: neither is timed)."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    timeout = aiohttp.ClientTimeout(total=300)
    # `sticky`: each client keeps its own connection (as a trainer's rollout worker does); else one shared pool
    pools = [aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1 if sticky else 0), timeout=timeout)
             for _ in range(concurrency if sticky else 1)]
    for pool in pools:
        await stack.enter_async_context(pool)
    clients = [Client(pools[i % len(pools)], url, protocol, headers) for i in range(concurrency)]
    await asyncio.gather(*(c.open() for c in clients))
    if kind != "fill":
        await episode(clients[0], kind, [])  # warm-up, not counted
    return clients


async def _burst(clients: list[Client], kind: str, episodes: int, latencies: list[float], errors: list[str]) -> float:
    """`episodes` episodes over every client at once; the seconds they took."""
    left = [episodes]

    async def worker(client: Client) -> None:
        while left[0] > 0:
            left[0] -= 1
            try:
                await episode(client, kind, latencies)
            except Exception as exc:  # counted and reported: a benchmark must say what failed
                errors.append(f"{type(exc).__name__}: {exc}"[:200])

    t = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in clients))
    return time.perf_counter() - t


async def rewarm(clients: list[Client]) -> None:
    """Fresh connections for `clients` (one shared pool), opened by one untimed probe each (2026-07-28 removed
    `ping`: `server/discover` is its liveness probe). Why: while another server is loaded their idle ones may
    be closed by this one (uvicorn keeps an idle connection 5 s), and a request on a closing one fails."""
    old = clients[0].http
    pool = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=old.timeout)
    for client in clients:
        client.http = pool
    await old.close()
    await asyncio.gather(*(c.request("server/discover" if c.protocol == MODERN else "ping") for c in clients))


@dataclass
class Side:
    """One target of paired bursts: its server's processes (for CPU per request), the burst (seconds taken,
    requests made), and what to do untimed before each burst."""

    pids: list[int]
    burst: Callable[[], Awaitable[tuple[float, int]]]
    prepare: Callable[[], Awaitable[None]] | None = None


async def in_turn(sides: list[Side], pairs: int) -> list[dict[str, Any]]:
    """A burst of each side in turn, `pairs` times (the order flipped every pair): per side its bursts' rates
    and server CPU per request, and the seconds they took in all.

    Why: this machine's speed swings by up to 2x from one second to the next, so two servers (or one at two
    concurrencies) loaded one after the other for a few seconds each met different machines; bursts a
    fraction of a second apart meet the same one (benchmarks.serving, `paired_load`)."""
    out: list[dict[str, Any]] = [{"bursts": [], "seconds": 0.0} for _ in sides]
    for i in range(pairs):
        for t in (range(len(sides)) if i % 2 == 0 else reversed(range(len(sides)))):
            side = sides[t]
            if side.prepare is not None:
                await side.prepare()
            before = cpu_s(side.pids)
            seconds, requests = await side.burst()
            out[t]["seconds"] += seconds
            out[t]["bursts"].append({"rate": requests / seconds,
                                     "cpu_us": (cpu_s(side.pids) - before) / max(1, requests) * 1e6})
    return out


def mcp_side(clients: list[Client], pids: list[int], kind: str, episodes: int, latencies: list[float],
             errors: list[str]) -> Side:
    """A world server's side of paired bursts: `episodes` episodes a burst over `clients`, reconnected first."""
    async def burst() -> tuple[float, int]:
        done = len(latencies)
        seconds = await _burst(clients, kind, episodes, latencies, errors)
        return seconds, len(latencies) - done

    return Side(pids, burst, lambda: rewarm(clients))


async def run(url: str, concurrency: int, episodes: int, protocol: str, kind: str, token: str | None,
              sticky: bool = False) -> dict:
    latencies: list[float] = []
    errors: list[str] = []
    async with contextlib.AsyncExitStack() as stack:
        clients = await _clients(stack, url, concurrency, protocol, kind, token, sticky)
        seconds = await _burst(clients, kind, episodes, latencies, errors)
    return load_summary(latencies, seconds, errors)


async def paired(targets: list[tuple[str, list[int], int, int]], pairs: int, protocol: str, kind: str,
                 token: str | None) -> dict:
    """Bursts against each target (url, its server's pids on this machine, concurrency, episodes per burst) in
    turn (`in_turn`): each burst's rate and server CPU per request, and latencies over all of a target's."""
    async with contextlib.AsyncExitStack() as stack:
        groups = [await _clients(stack, url, c, protocol, kind, token, False) for url, _, c, _ in targets]
        records: list[tuple[list[float], list[str]]] = [([], []) for _ in targets]
        runs = await in_turn([mcp_side(clients, pids, kind, episodes, *record)
                              for clients, (_, pids, _, episodes), record in zip(groups, targets, records)], pairs)
        for clients in groups:
            await clients[0].http.close()  # the pool the last reconnection opened
    return {"targets": [{"url": url, "concurrency": c, "bursts": run_["bursts"],
                         **load_summary(latencies, run_["seconds"], errors)}
                        for (url, _, c, _), run_, (latencies, errors) in zip(targets, runs, records)]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--episodes", type=int, default=200, help="episodes in all (with --pairs: per burst)")
    parser.add_argument("--protocol", default=LEGACY)
    parser.add_argument("--kind", choices=["world", "echo", "ping", "fill", "cancel"], default="world")
    parser.add_argument("--token", default=None)
    parser.add_argument("--sticky", action="store_true", help="one connection per client instead of a shared pool")
    parser.add_argument("--against", action="append", default=[], metavar="URL",
                        help="with --pairs: another server, loaded in turn with the first")
    parser.add_argument("--pids", action="append", default=[], metavar="PID[,PID...]",
                        help="with --pairs: each server's processes, in the order of the URLs (for CPU per request)")
    parser.add_argument("--pairs", type=int, default=0, help="alternate bursts between the servers this many times")
    parser.add_argument("--also-at", action="append", type=int, default=[], metavar="C",
                        help="with --pairs: the first server again at concurrency C (bursts of max(C, --episodes))")
    args = parser.parse_args(argv)
    try:
        import uvloop  # type: ignore[import-not-found]

        uvloop.install()
    except ImportError:
        pass
    if args.pairs:
        urls = [args.url, *args.against]
        if len(args.pids) != len(urls):
            parser.error(f"--pairs needs --pids for each of the {len(urls)} servers, in order")
        targets = [(url, [int(p) for p in pids.split(",")], args.concurrency, args.episodes)
                   for url, pids in zip(urls, args.pids)]
        targets += [(args.url, targets[0][1], c, max(c, args.episodes)) for c in args.also_at]
        out = asyncio.run(paired(targets, args.pairs, args.protocol, args.kind, args.token))
    else:
        out = asyncio.run(run(args.url, args.concurrency, args.episodes, args.protocol, args.kind, args.token,
                             args.sticky))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
