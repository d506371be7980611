"""Many episodes at once: tasks x samples over a bounded number of connections, written as they finish."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
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

    def record(traj: Trajectory) -> None:
        if writer is not None:
            writer.append(traj)
        results.append(traj)
        if on_done is not None:
            on_done(traj)

    async def worker(index: int) -> None:
        policy = make_policy(index)
        async with receive.clone() as queue:
            pending, attempts = None, 0
            while True:
                if pending is None:
                    try:
                        pending, attempts = await queue.receive(), 0
                    except anyio.EndOfStream:
                        return
                attempts += 1
                try:
                    # The connection wraps a run of episodes lexically: if the transport dies, the SDK cancels
                    # this scope, we land after it with the interrupted job still pending, and reconnect.
                    async with connect(spec.server, registry=spec.registry, timeout=spec.config.turn_timeout_s) as c:
                        ctl = EpisodeControl(c, spec.config.turn_timeout_s)
                        while pending is not None:
                            task, sample = pending
                            traj = await run_episode(ctl, name, task, policy, spec.config, sample=sample,
                                                     seed=spec.seed + sample)
                            record(traj)
                            pending = None
                            if traj.termination == "server_error":
                                break
                            try:
                                pending, attempts = queue.receive_nowait(), 1
                            except anyio.WouldBlock:
                                pending = None
                            except anyio.EndOfStream:
                                return
                except Exception as exc:  # could not connect: try once more, then record the failure
                    if pending is not None and attempts >= 2:
                        record(_failed(spec, name, pending, policy, exc))
                        pending = None
                if pending is not None and attempts >= 2:  # the connection died under this job twice
                    record(_failed(spec, name, pending, policy, ConnectionError("connection lost mid-episode")))
                    pending = None

    async with anyio.create_task_group() as tg:
        for i in range(max(1, min(spec.concurrency, len(jobs)))):
            tg.start_soon(worker, i)
    receive.close()
    return results, summarize(results, skipped=len(done))


def _failed(spec: RunSpec, name: str, job: tuple[TaskInfo, int], policy: Policy, exc: BaseException) -> Trajectory:
    task, sample = job
    return Trajectory(server=name, task=task.id, sample=sample, seed=spec.seed + sample, policy=policy.name,
                      model=policy.model, termination="server_error", error=f"{type(exc).__name__}: {exc}",
                      reward=-1.0 if spec.config.penalize else 0.0)


def best_of_n(trajectories: list[Trajectory],
              score: Callable[[Trajectory], float] = lambda t: t.verdict.score if t.verdict else -1.0,
              ) -> dict[str, Trajectory]:
    """The best sample per task by `score` (verifier score by default; ties go to the lowest sample index)."""
    best: dict[str, Trajectory] = {}
    for t in sorted(trajectories, key=lambda t: t.sample):
        if t.task not in best or score(t) > score(best[t.task]):
            best[t.task] = t
    return best
