"""Load generator for the OpenEnv peer, through OpenEnv's own client (`GenericEnvClient`, WebSocket `/ws`).

Runs under the peer venv, in its own process: `.bench/openenv-venv/bin/python -m benchmarks.peers.openenv_load
URL --concurrency C --episodes N`. Each of C clients holds one session (as it holds one MCP session in
`benchmarks.loadgen`) and plays episodes of the same shape as the mcpworld one: `reset` -> 10 x `step get_flight`
-> `step end` (done), 12 messages. Prints one JSON object: the whole run (as `benchmarks.loadgen` reports it)
plus `reset`, `step` and `end` each with its own rate and p50/p99. `--pairs N --target KIND URL PIDS ...`:
bursts against several servers in turn, OpenEnv ones and mcpworld ones alike (`paired`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from openenv.core.generic_client import GenericEnvClient

from benchmarks.common import load_summary

FLIGHT = "MW307-0602"  # the flight benchmarks.loadgen asks the mcpworld server for


async def episode(env: GenericEnvClient, times: dict[str, list[float]]) -> None:
    async def timed(kind: str, call: object) -> object:
        t = time.perf_counter()
        result = await call  # type: ignore[misc]
        times[kind].append(time.perf_counter() - t)
        return result

    await timed("reset", env.reset())
    for _ in range(10):
        result = await timed("step", env.step({"tool": "get_flight", "flight_id": FLIGHT}))
        flight = result.observation.get("flight")  # type: ignore[attr-defined]
        if not flight or flight["id"] != FLIGHT:
            raise RuntimeError(f"get_flight answered {result.observation}")  # type: ignore[attr-defined]
    ended = await timed("end", env.step({"tool": "end"}))
    if not ended.done:  # type: ignore[attr-defined]
        raise RuntimeError(f"end did not end the episode: {ended}")


async def _sessions(url: str, concurrency: int) -> list[GenericEnvClient]:
    """`concurrency` connected clients (sessions opened before timing, as loadgen's are), one warm-up episode."""
    clients = [GenericEnvClient(base_url=url, connect_timeout_s=120, message_timeout_s=300)
               for _ in range(concurrency)]
    await asyncio.gather(*(c.connect() for c in clients))
    await episode(clients[0], {"reset": [], "step": [], "end": []})  # warm-up, not counted
    return clients


async def _burst(clients: list[GenericEnvClient], episodes: int, times: dict[str, list[float]],
                 errors: list[str]) -> float:
    left = [episodes]

    async def worker(env: GenericEnvClient) -> None:
        while left[0] > 0:
            left[0] -= 1
            try:
                await episode(env, times)
            except Exception as exc:  # counted and reported: a benchmark must say what failed
                errors.append(f"{type(exc).__name__}: {exc}"[:200])

    t = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in clients))
    return time.perf_counter() - t


def _summary(times: dict[str, list[float]], seconds: float, errors: list[str]) -> dict:
    out = load_summary(times["reset"] + times["step"] + times["end"], seconds, errors)
    for kind, samples in times.items():
        part = load_summary(samples, seconds, [])
        out[kind] = {k: part[k] for k in ("requests", "rate", "p50_ms", "p99_ms")}
    return out


async def run(url: str, concurrency: int, episodes: int) -> dict:
    times: dict[str, list[float]] = {"reset": [], "step": [], "end": []}
    errors: list[str] = []
    clients = await _sessions(url, concurrency)
    seconds = await _burst(clients, episodes, times, errors)
    await asyncio.gather(*(c.close() for c in clients))
    return _summary(times, seconds, errors)


async def paired(targets: list[tuple[str, str, list[int]]], concurrency: int, episodes: int, pairs: int) -> dict:
    """Bursts of `episodes` against each target in turn (`openenv`, or `mcp`: a world server driven by
    `benchmarks.loadgen`'s episodes at 2025-11-25), `pairs` times (`loadgen.in_turn`): each burst's messages/s
    and its server's CPU per message, and latencies over all of a target's."""
    import contextlib

    from benchmarks import loadgen

    sides: list[loadgen.Side] = []
    records: list[tuple[Any, list[str]]] = []  # (reset/step/end times, or one latency list; errors)
    sessions: list[list[GenericEnvClient]] = []
    async with contextlib.AsyncExitStack() as stack:
        for kind, url, pids in targets:
            errors: list[str] = []
            if kind == "openenv":
                clients = await _sessions(url, concurrency)
                times: dict[str, list[float]] = {"reset": [], "step": [], "end": []}
                sides.append(_openenv_side(clients, pids, episodes, times, errors))
                records.append((times, errors))
                sessions.append(clients)
            else:
                mcp = await loadgen._clients(stack, url, concurrency, loadgen.LEGACY, "world", None, False)
                latencies: list[float] = []
                sides.append(loadgen.mcp_side(mcp, pids, "world", episodes, latencies, errors))
                records.append((latencies, errors))
                stack.push_async_callback(lambda mcp=mcp: mcp[0].http.close())  # the last reconnection's pool
        runs = await loadgen.in_turn(sides, pairs)
        for clients in sessions:
            await asyncio.gather(*(c.close() for c in clients))
    out = []
    for (kind, url, _), run_, (samples, errors) in zip(targets, runs, records):
        summary = _summary(samples, run_["seconds"], errors) if kind == "openenv" else \
            load_summary(samples, run_["seconds"], errors)
        out.append({"kind": kind, "url": url, "bursts": run_["bursts"], **summary})
    return {"targets": out}


def _openenv_side(clients: list[GenericEnvClient], pids: list[int], episodes: int, times: dict[str, list[float]],
                  errors: list[str]) -> Any:
    from benchmarks.loadgen import Side

    async def burst() -> tuple[float, int]:
        done = sum(map(len, times.values()))
        seconds = await _burst(clients, episodes, times, errors)
        return seconds, sum(map(len, times.values())) - done

    return Side(pids, burst)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url", nargs="?", help="the OpenEnv server (one run, no --pairs)")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--episodes", type=int, default=200, help="episodes in all (with --pairs: per burst)")
    parser.add_argument("--target", action="append", nargs=3, default=[], metavar=("KIND", "URL", "PIDS"),
                        help="with --pairs: a server to load in turn (KIND openenv or mcp; PIDS comma-separated)")
    parser.add_argument("--pairs", type=int, default=0, help="alternate bursts between the targets this many times")
    args = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    if args.pairs:
        if not args.target or any(kind not in ("openenv", "mcp") for kind, _, _ in args.target):
            parser.error("--pairs needs --target openenv|mcp URL PIDS, once per server")
        targets = [(kind, url, [int(p) for p in pids.split(",")]) for kind, url, pids in args.target]
        out = asyncio.run(paired(targets, args.concurrency, args.episodes, args.pairs))
    elif args.url:
        out = asyncio.run(run(args.url, args.concurrency, args.episodes))
    else:
        parser.error("give the OpenEnv server's URL, or --pairs with --target")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
