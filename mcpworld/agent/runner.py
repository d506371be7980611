"""Many episodes at once: tasks x samples by a bounded number of workers over one shared connection, written as
they finish.

An episode lost to the infrastructure (the server died, the connection broke, a request timed out) is not the
agent's: it is retried with backoff on a fresh episode (reconnecting when the connection broke), and if every
try fails it is written as `infra_error` with no reward, counted in `Summary.lost`, and played again by `resume`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from mcpworld.agent.episodes import EpisodeClient
from mcpworld.agent.loop import EpisodeConfig, infra_error_text, run_episode
from mcpworld.agent.policies import Policy
from mcpworld.agent.trajectory import Trajectory, TrajectoryWriter, read_trajectories
from mcpworld.core.models import TaskInfo
from mcpworld.core.retry import Backoff, retrying
from mcpworld.core.termination import Termination
from mcpworld.registry.connect import full_name


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
    retries: int = 3  # tries after the first for an episode lost to an infrastructure error
    backoff_s: float = 1.0  # wait before the first retry, doubled each retry, at most max_backoff_s
    max_backoff_s: float = 30.0

    @property
    def backoff(self) -> Backoff:
        return Backoff(self.backoff_s, self.max_backoff_s)


UNPLAYED = frozenset({Termination.SETUP_ERROR, Termination.MODEL_ERROR})
"""Endings where the policy never got to act as set up (its references, its recording, its model's endpoint): not
played, counted apart, a non-zero exit, and played again by --resume."""


@dataclass
class Summary:
    episodes: int
    success_rate: float
    mean_reward: float
    mean_turns: float
    failures: dict[str, int]
    skipped: int = 0
    lost: int = 0  # episodes lost to infrastructure errors (not in the other numbers)
    lost_reasons: dict[str, int] = field(default_factory=dict)
    setup_errors: int = 0  # episodes the run's setup (or the model's endpoint) kept from being played (not in the
    setup_example: str = ""  # other numbers), and the first of their errors: what to fix
    pass_hat: dict[int, float] = field(default_factory=dict)  # k -> pass^k, when tasks were played several times

    def rows(self) -> list[tuple[str, str]]:
        return [("episodes", str(self.episodes)), ("skipped (resume)", str(self.skipped)),
                ("success rate", f"{self.success_rate:.1%}"), ("mean reward", f"{self.mean_reward:.3f}"),
                ("mean turns", f"{self.mean_turns:.2f}"),
                *((f"pass^{k}", f"{v:.3f}") for k, v in sorted(self.pass_hat.items())),
                *((f"failed: {k}", str(v)) for k, v in sorted(self.failures.items())),
                *((("lost: infrastructure", str(self.lost)),) if self.lost else ()),
                *((("not played: setup error", str(self.setup_errors)),) if self.setup_errors else ())]

    def setup_message(self) -> str | None:
        """'22 episodes not played: the run is set up wrong: no recorded trajectory for ...', or None."""
        if not self.setup_errors:
            return None
        return (f"{self.setup_errors} episode{'s' if self.setup_errors != 1 else ''} not played: the run is set up "
                f"wrong or the model's endpoint failed (no reward was recorded): {self.setup_example}")

    def lost_message(self) -> str | None:
        """'12 episodes lost to infrastructure errors (server unreachable); rerun with --resume', or None."""
        if not self.lost:
            return None
        reasons = ", ".join(k if len(self.lost_reasons) == 1 else f"{k}: {v}"
                            for k, v in sorted(self.lost_reasons.items(), key=lambda kv: -kv[1]))
        return (f"{self.lost} episode{'s' if self.lost != 1 else ''} lost to infrastructure errors ({reasons}); "
                "rerun with --resume")


def summarize(trajectories: list[Trajectory], skipped: int = 0) -> Summary:
    """Scores over the episodes the agent played; episodes lost to infrastructure errors are counted apart."""
    lost = [t for t in trajectories if t.is_infra]
    setup = [t for t in trajectories if t.termination in UNPLAYED]
    played = [t for t in trajectories if not t.is_infra and t.termination not in UNPLAYED]
    n = len(played)
    failures = Counter(t.termination if t.termination != "final_answer" else "verifier" for t in played
                       if not (t.verdict and t.verdict.passed))
    return Summary(
        episodes=n,
        success_rate=sum(bool(t.verdict and t.verdict.passed) for t in played) / n if n else 0.0,
        mean_reward=sum(t.reward for t in played) / n if n else 0.0,
        mean_turns=sum(len(t.steps) for t in played) / n if n else 0.0,
        failures=dict(failures), skipped=skipped, lost=len(lost),
        lost_reasons=dict(Counter(t.infra_reason or "server error" for t in lost)),
        setup_errors=len(setup), setup_example=setup[0].error or "" if setup else "",
        pass_hat=pass_hat(played),
    )


def pass_hat(played: list[Trajectory]) -> dict[int, float]:
    """pass^k for k = 1..n as τ²-bench reports it: per task, the chance that k of its n played samples drawn
    without replacement all pass, C(c, k) / C(n, k) with c of them passing, averaged over tasks. n is the
    fewest samples any task has (an episode lost to the infrastructure is not a sample); empty below 2."""
    by_task: dict[tuple[str, str], list[bool]] = {}
    for t in played:
        by_task.setdefault((t.server, t.task), []).append(bool(t.verdict and t.verdict.passed))
    n = min((len(v) for v in by_task.values()), default=0)
    if n < 2:
        return {}
    return {k: sum(math.comb(sum(v), k) / math.comb(len(v), k) for v in by_task.values()) / len(by_task)
            for k in range(1, n + 1)}


async def list_tasks(server: str, registry: str | None = None, split: str | None = None,
                     include_provisional: bool = False) -> list[TaskInfo]:
    """The server's tasks; provisional ones (no reference yet, `TaskInfo.provisional`) only when asked."""
    async with EpisodeClient(server, registry=registry) as client:
        tasks = await client.tasks(split)
    return tasks if include_provisional else [t for t in tasks if not t.provisional]


async def run(spec: RunSpec, make_policy: Callable[[int], Policy],
              on_done: Callable[[Trajectory], Any] | None = None) -> tuple[list[Trajectory], Summary]:
    """Run every (task, sample) not already done in the output; a dead server loses episodes, never the run.

    Every worker plays its episodes over one shared `EpisodeClient` (one connection pool, no handshake per
    episode). With `resume`, a (task, sample) is done when the output has a trajectory for it that is not an
    infra or setup error: episodes lost to the infrastructure, or kept from playing by the setup, are played again.
    """
    name = spec.server if spec.server.startswith("http") else full_name(spec.server)
    done = {t.key for t in read_trajectories(spec.output) if not t.is_infra and t.termination not in UNPLAYED} \
        if spec.output and spec.resume else set()
    jobs = [(task, s) for task in spec.tasks for s in range(spec.samples) if (name, task.id, s) not in done]
    writer = TrajectoryWriter(spec.output) if spec.output else None
    results: list[Trajectory] = []
    send, receive = anyio.create_memory_object_stream[tuple[TaskInfo, int]](math.inf)
    for job in jobs:
        send.send_nowait(job)
    send.close()
    # Set when a job used up its retries, cleared by the next episode that is not lost: while the server looks
    # down, each further job gets one try (no backoff), so a dead server costs seconds, not retries x jobs.
    down = False

    def record(traj: Trajectory) -> None:
        if writer is not None:
            writer.append(traj)
        results.append(traj)
        if on_done is not None:
            on_done(traj)

    async def play(client: EpisodeClient, job: tuple[TaskInfo, int], policy: Policy) -> None:
        """One job to its end: played, or retried on a fresh episode until it is not lost or gives up."""
        nonlocal down
        task, sample = job

        async def attempt(_: int) -> Trajectory:
            try:
                ctl = await client.control()
                return await run_episode(ctl, name, task, policy, spec.config, sample=sample, seed=spec.seed + sample)
            except Exception as exc:  # could not connect: not the agent's doing
                return _failed(spec, name, job, policy, exc)

        traj, tries = await retrying(attempt, retries=lambda: 0 if down else spec.retries, backoff=spec.backoff,
                                     lost=lambda traj: traj.is_infra)
        traj.attempts = tries
        down = traj.is_infra
        if down:
            traj.error = f"{traj.error} (gave up after {tries} attempt{'s' if tries > 1 else ''})"
        record(traj)

    async def worker(client: EpisodeClient, index: int) -> None:
        policy = make_policy(index)
        async with receive.clone() as queue:
            async for job in queue:
                await play(client, job, policy)

    async with EpisodeClient(spec.server, registry=spec.registry, timeout=spec.config.turn_timeout_s) as client:
        async with anyio.create_task_group() as tg:
            for i in range(max(1, min(spec.concurrency, len(jobs)))):
                tg.start_soon(worker, client, i)
    receive.close()
    return results, summarize(results, skipped=len(done))


def _failed(spec: RunSpec, name: str, job: tuple[TaskInfo, int], policy: Policy, exc: BaseException) -> Trajectory:
    task, sample = job
    return Trajectory(server=name, task=task.id, sample=sample, seed=spec.seed + sample, policy=policy.name,
                      model=policy.model, format=policy.format.name, termination=Termination.INFRA_ERROR,
                      error=infra_error_text(exc), reward=0.0)


def best_of_n(trajectories: list[Trajectory],
              score: Callable[[Trajectory], float] = lambda t: t.verdict.score if t.verdict else -1.0,
              ) -> dict[str, Trajectory]:
    """The best sample per task by `score` (verifier score by default; ties go to the lowest sample index)."""
    best: dict[str, Trajectory] = {}
    for t in sorted(trajectories, key=lambda t: t.sample):
        if t.task not in best or score(t) > score(best[t.task]):
            best[t.task] = t
    return best
