"""Load generator for the OpenEnv peer, through OpenEnv's own client (`GenericEnvClient`, WebSocket `/ws`).

Runs under the peer venv, in its own process: `.bench/openenv-venv/bin/python -m benchmarks.peers.openenv_load
URL --concurrency C --episodes N`. Each of C clients holds one session (as it holds one MCP session in
`benchmarks.loadgen`) and plays episodes of the same shape as the mcpworld one: `reset` -> 10 x `step get_flight`
-> `step end` (done), 12 messages. Prints one JSON object: the whole run (as `benchmarks.loadgen` reports it)
plus `reset`, `step` and `end` each with its own rate and p50/p99.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

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


async def run(url: str, concurrency: int, episodes: int) -> dict:
    times: dict[str, list[float]] = {"reset": [], "step": [], "end": []}
    errors: list[str] = []
    left = [episodes]
    clients = [GenericEnvClient(base_url=url, connect_timeout_s=120, message_timeout_s=300)
               for _ in range(concurrency)]
    await asyncio.gather(*(c.connect() for c in clients))  # sessions opened before timing, as loadgen's are
    await episode(clients[0], {k: [] for k in times})  # warm-up, not counted

    async def worker(env: GenericEnvClient) -> None:
        while left[0] > 0:
            left[0] -= 1
            try:
                await episode(env, times)
            except Exception as exc:  # counted and reported: a benchmark must say what failed
                errors.append(f"{type(exc).__name__}: {exc}"[:200])

    t = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in clients))
    seconds = time.perf_counter() - t
    await asyncio.gather(*(c.close() for c in clients))
    out = load_summary(times["reset"] + times["step"] + times["end"], seconds, errors)
    for kind, samples in times.items():
        part = load_summary(samples, seconds, [])
        out[kind] = {k: part[k] for k in ("requests", "rate", "p50_ms", "p99_ms")}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    print(json.dumps(asyncio.run(run(args.url, args.concurrency, args.episodes))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
