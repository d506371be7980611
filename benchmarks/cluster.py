"""Serving from a Ray cluster (`--only cluster`): episodes/s and p99 episode latency through the registry with 1, 2
and 4 `up --ray` actors on a local multi-node Ray cluster, each figure beside one plain `mcpworld up` process
measured in the same run.

The cluster is `mcpworld.app.ray_local.LocalRayCluster`: 4 raylets on this machine (one CPU declared each, so
SPREAD puts one actor per node). Each configuration is a fresh `mcpworld up` (`--only airline --no-swe`, plus
`--ray ADDRESS --replicas N`). The load comes from `--generators` processes of this module (`python -m
benchmarks.cluster --registry URL ...`), each one `EpisodeClient("airline", registry=URL)`, as a trainer's
rollouts reach a world: the client reads the record's replicas from the registry and spreads episodes over them.
One episode is start -> 10 x `get_flight` -> verify with close (12 requests); its latency is start to close.

    python -m benchmarks.run --only cluster --quick
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Row, pct

TOKEN = "cluster-bench-token"
TASK = "cancel-within-24h"
FLIGHT = {"flight_id": "MW307-0602"}


async def _play(registry: str, concurrency: int, episodes: int) -> dict[str, Any]:
    import anyio

    from mcpworld.agent.episodes import EpisodeClient

    latencies: list[float] = []
    errors: list[str] = []
    async with EpisodeClient("airline", registry=registry, timeout=300.0) as client:
        for _ in range(4):  # warm every replica's connection (not counted)
            ctl = await client.control()
            started = await ctl.start(TASK)
            await ctl.verify(started.episode, None, close=True)
        left = [episodes]

        async def worker() -> None:
            while left[0] > 0:
                left[0] -= 1
                t = time.perf_counter()
                try:
                    ctl = await client.control()
                    started = await ctl.start(TASK)
                    for _ in range(10):
                        await ctl.call(started.episode, "get_flight", FLIGHT)
                    await ctl.verify(started.episode, None, close=True)
                except Exception as exc:  # noqa: BLE001 - counted, first reasons kept
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                    continue
                latencies.append(time.perf_counter() - t)

        began = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                tg.start_soon(worker)
        seconds = time.perf_counter() - began
    return {"episodes": len(latencies), "seconds": seconds, "latencies": latencies, "errors": len(errors),
            "first_errors": errors[:3]}


def _load(registry: str, concurrency: int, episodes: int, generators: int, env: dict[str, str]) -> dict[str, Any]:
    """`generators` load processes at once; their episodes summed, rate over the longest, p99 over all."""
    procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.cluster", "--registry", registry,
                               "--concurrency", str(concurrency), "--episodes", str(episodes)],
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(generators)]
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        results.append(json.loads(out.strip().splitlines()[-1]))
    latencies = [x * 1000 for r in results for x in r["latencies"]]
    seconds = max(r["seconds"] for r in results)
    return {"episodes": len(latencies), "rate": len(latencies) / seconds if seconds else 0.0,
            "p50_ms": pct(latencies, 0.5) if latencies else 0.0, "p99_ms": pct(latencies, 0.99) if latencies else 0.0,
            "errors": sum(r["errors"] for r in results),
            "first_errors": [e for r in results for e in r["first_errors"]][:3]}


class _Up:
    """One `mcpworld up` process (on Ray when `ray_address` is set), stopped on exit."""

    def __init__(self, env: dict[str, str], ray_address: str | None = None, replicas: int = 1):
        from mcpworld.core.testing import free_port

        self.port = free_port()
        self.home = tempfile.mkdtemp(prefix="mcpw-bench-up-")
        args = [sys.executable, "-m", "mcpworld", "up", "--port", str(self.port), "--only", "airline", "--no-swe",
                "--health-interval", "30", "--max-episodes", "8192"]
        if ray_address:
            args += ["--ray", ray_address, "--replicas", str(replicas)]
        self.log = Path(self.home) / "up.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(args, env={**env, "MCPWORLD_HOME": self.home}, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> _Up:
        from mcpworld.core.testing import wait_http

        try:
            wait_http(self.url + "/healthz", self.proc, timeout=180)
        except Exception:
            self.__exit__()
            raise RuntimeError(f"`mcpworld up` did not start: {self.log.read_text()[-2000:]}") from None
        return self

    def __exit__(self, *exc: Any) -> None:
        import shutil
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.home, ignore_errors=True)


def bench_cluster(quick: bool, counts: tuple[int, ...] = (1, 2, 4)) -> list[Row]:
    from mcpworld.app.ray_local import LocalRayCluster

    cores = os.cpu_count() or 1
    generators = max(1, min(4, cores // 4))
    concurrency = 32
    episodes = (300 if quick else 1500) * (2 if cores >= 8 else 1)  # per generator
    env = {**os.environ, "MCPWORLD_REGISTRY_TOKEN": TOKEN, "RAY_USAGE_STATS_ENABLED": "0"}
    scaling = cores >= 16  # the targets hold where the actors have cores of their own
    rows: list[Row] = []
    print(f"  cluster: {generators} load process(es) x {concurrency} concurrent, {episodes} episodes each, "
          f"{cores} cores", file=sys.stderr)
    with _Up(env) as up:
        base = _load(up.url, concurrency, episodes, generators, env)
    print(f"  one up process: {base['rate']:.1f} episodes/s, p99 {base['p99_ms']:.1f} ms, {base['errors']} errors "
          f"{base['first_errors']}", file=sys.stderr)
    with LocalRayCluster(nodes=max(counts), cpus=1) as cluster:
        for n in counts:
            with _Up(env, cluster.address, n) as up:
                got = _load(up.url, concurrency, episodes, generators, env)
            print(f"  {n} actor(s): {got['rate']:.1f} episodes/s, p99 {got['p99_ms']:.1f} ms, {got['errors']} errors "
                  f"{got['first_errors']}", file=sys.stderr)
            want = {1: 0.7, 2: 1.5, 4: 2.5}.get(n, 0.6 * n)
            ratio = got["rate"] / base["rate"] if base["rate"] else 0.0
            target = f">= {want:g}x on >= 16 cores" if scaling else f"recorded ({want:g}x needs >= 16 cores)"
            rows.append(Row(f"episodes/s via registry, up --ray, {n} actor(s) on {n} node(s)", got["rate"], "/s",
                            "one `up` process", base["rate"], target,
                            got["errors"] == 0 and (ratio >= want or not scaling)))
            rows.append(Row(f"episode p99 (12 requests), {n} actor(s)", got["p99_ms"], "ms", "one `up` process",
                            base["p99_ms"], "recorded", got["errors"] == 0))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one load-generator process of the cluster benchmark")
    parser.add_argument("--registry", required=True)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args(argv)
    import anyio

    result = anyio.run(_play, args.registry, args.concurrency, args.episodes)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
