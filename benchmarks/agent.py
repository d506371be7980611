"""Agent benchmark: oracle rollouts through the registry over Streamable HTTP, episodes per second."""

from __future__ import annotations

import os
import secrets
import subprocess
import tempfile
import time

import anyio

from benchmarks.common import Row
from mcpworld.agent.policies import OraclePolicy
from mcpworld.agent.runner import RunSpec, list_tasks, run
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http
from mcpworld.worlds.host import load_runtime
from mcpworld.worlds.loader import discover


def _direct_rate() -> float:
    """Baseline: the same reference solutions straight on the runtimes (loaded beforehand), no MCP and no HTTP."""
    runtimes = [load_runtime(ref.name) for ref in discover()]
    for runtime in runtimes:
        for task in runtime.tasks.values():
            runtime.verify(runtime.fork(task.id), None)  # build every task's template and diff cache first
    count, began = 0, time.perf_counter()
    for runtime in runtimes:
        for task in runtime.tasks.values():
            episode = runtime.fork(task.id)
            for step in task.solution:
                runtime.call(episode, step.name, step.arguments)
            runtime.verify(episode, task.answer)
            episode.close()
            count += 1
    return count / (time.perf_counter() - began)


def bench_agent(quick: bool, concurrency: int = 8) -> list[Row]:
    home = tempfile.mkdtemp()
    token = secrets.token_urlsafe(16)  # the oracle presents it to fetch references; no other policy sees them
    port = free_port()
    registry = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(mcpworld_cmd("up", "--port", str(port), "--health-interval", "3600"),
                            env={**os.environ, "MCPWORLD_HOME": home, "MCPWORLD_REGISTRY_TOKEN": token},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_http(registry + "/healthz", proc)

        async def rollouts() -> tuple[int, float, int]:
            total, ok, elapsed = 0, 0, 0.0
            for ref in discover():
                tasks = await list_tasks(ref.name, registry)
                spec = RunSpec(server=ref.name, tasks=tasks, samples=1 if quick else 2, concurrency=concurrency,
                               registry=registry)
                began = time.perf_counter()
                trajs, _ = await run(spec, lambda i: OraclePolicy(token=token))
                elapsed += time.perf_counter() - began
                total += len(trajs)
                ok += sum(t.reward == 1.0 for t in trajs)
            return total, elapsed, ok

        total, elapsed, ok = anyio.run(rollouts)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    rate = total / elapsed
    assert ok == total, f"oracle failed {total - ok} of {total} episodes"
    return [Row(f"oracle episodes/s via registry + HTTP (c={concurrency})", rate, "episodes/s",
                "same solutions in-process, no MCP", _direct_rate(), ">= 100 episodes/s", rate >= 100)]
