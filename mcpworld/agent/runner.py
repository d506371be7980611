"""Many episodes at once: tasks x samples over a bounded number of connections, written as they finish."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from mcpworld.agent.loop import EpisodeConfig, run_episode
from mcpworld.agent.policies import Policy
from mcpworld.agent.trajectory import Trajectory, TrajectoryWriter, read_trajectories
from mcpworld.models import TaskInfo
from mcpworld.protocol import EpisodeControl
from mcpworld.registry.connect import connect, full_name


@dataclass
class RunSpec:
    server: str
    tasks: list[TaskInfo]
    samples: int = 1
    concurrency: int = 4
    seed: int = 0
    output: Path | None = None
    resume: bool = False
    registry: str | None = None
    config: EpisodeConfig = field(default_factory=EpisodeConfig)


@dataclass
class Summary:
    episodes: int
    success_rate: float
    mean_reward: float
    mean_turns: float
    failures: dict[str, int]
    skipped: int = 0

    def rows(self) -> list[tuple[str, str]]:
        return [("episodes", str(self.episodes)), ("skipped (resume)", str(self.skipped)),
                ("success rate", f"{self.success_rate:.1%}"), ("mean reward", f"{self.mean_reward:.3f}"),
                ("mean turns", f"{self.mean_turns:.2f}"),
                *((f"failed: {k}", str(v)) for k, v in sorted(self.failures.items()))]


def summarize(trajectories: list[Trajectory], skipped: int = 0) -> Summary:
    n = len(trajectories)
    failures = Counter(t.termination if t.termination != "final_answer" else "verifier" for t in trajectories
                       if not (t.verdict and t.verdict.passed))
    return Summary(
        episodes=n,
        success_rate=sum(bool(t.verdict and t.verdict.passed) for t in trajectories) / n if n else 0.0,
        mean_reward=sum(t.reward for t in trajectories) / n if n else 0.0,
        mean_turns=sum(len(t.steps) for t in trajectories) / n if n else 0.0,
        failures=dict(failures), skipped=skipped,
    )


async def list_tasks(server: str, registry: str | None = None, split: str | None = None) -> list[TaskInfo]:
    async with connect(server, registry=registry) as client:
        return (await EpisodeControl(client).tasks(split)).tasks


async def run(spec: RunSpec, make_policy: Callable[[int], Policy],
              on_done: Callable[[Trajectory], Any] | None = None) -> tuple[list[Trajectory], Summary]:
    """Run every (task, sample) not already in the output; a dead server fails episodes, never the run."""
    name = spec.server if spec.server.startswith("http") else full_name(spec.server)
    done = {t.key for t in read_trajectories(spec.output)} if spec.output and spec.resume else set()
    jobs = [(task, s) for task in spec.tasks for s in range(spec.samples) if (name, task.id, s) not in done]
    writer = TrajectoryWriter(spec.output) if spec.output else None
    results: list[Trajectory] = []
    send, receive = anyio.create_memory_object_stream[tuple[TaskInfo, int]](math.inf)
    for job in jobs:
        send.send_nowait(job)
    send.close()

    async def worker(index: int) -> None:
        policy = make_policy(index)
        connection = _Connection(spec)
        try:
            async with receive.clone() as queue:
                async for task, sample in queue:
                    traj = await connection.play(name, task, sample, policy)
                    if writer is not None:
                        writer.append(traj)
                    results.append(traj)
                    if on_done is not None:
                        on_done(traj)
        finally:
            await connection.close()

    async with anyio.create_task_group() as tg:
        for i in range(max(1, min(spec.concurrency, len(jobs)))):
            tg.start_soon(worker, i)
    receive.close()
    return results, summarize(results, skipped=len(done))


class _Connection:
    """A worker's MCP connection, reused across its episodes and reopened after a server error."""

    def __init__(self, spec: RunSpec):
        self.spec = spec
        self.stack: AsyncExitStack | None = None
        self.ctl: EpisodeControl | None = None

    async def play(self, name: str, task: TaskInfo, sample: int, policy: Policy) -> Trajectory:
        spec = self.spec
        try:
            if self.ctl is None:
                self.stack = AsyncExitStack()
                client = await self.stack.enter_async_context(
                    connect(spec.server, registry=spec.registry, timeout=spec.config.turn_timeout_s))
                self.ctl = EpisodeControl(client, spec.config.turn_timeout_s)
        except Exception as exc:
            await self.close()
            return Trajectory(server=name, task=task.id, sample=sample, seed=spec.seed + sample,
                              policy=policy.name, model=policy.model, termination="server_error",
                              error=f"{type(exc).__name__}: {exc}", reward=-1.0 if spec.config.penalize else 0.0)
        traj = await run_episode(self.ctl, name, task, policy, spec.config, sample=sample, seed=spec.seed + sample)
        if traj.termination == "server_error":
            await self.close()
        return traj

    async def close(self) -> None:
        stack, self.stack, self.ctl = self.stack, None, None
        if stack is not None:
            try:  # no cancel scope here: the client's own scopes must unwind in the order they were entered
                await stack.aclose()
            except Exception:  # a broken connection may fail to close; it is gone either way
                pass


def best_of_n(trajectories: list[Trajectory],
              score: Callable[[Trajectory], float] = lambda t: t.verdict.score if t.verdict else -1.0,
              ) -> dict[str, Trajectory]:
    """The best sample per task by `score` (verifier score by default; ties go to the lowest sample index)."""
    best: dict[str, Trajectory] = {}
    for t in sorted(trajectories, key=lambda t: t.sample):
        if t.task not in best or score(t) > score(best[t.task]):
            best[t.task] = t
    return best
