"""The self-evolving arena's rounds: evaluate a policy on fresh tasks, diagnose failures per world, synthesize more.

One round: for every world, held-out tasks (the world's own test split plus fresh graph tasks, or last
round's targeted tasks, typed and audited like every synthesized task) are served over real MCP and played
by the policy (the oracle fetches references itself, with the registry token); each failed trajectory gets one
failure class from what it did (tool names against the reference, erroring calls, the verdict's state diff,
how it ended). The report ranks worlds; the weakest get targeted tasks (tool-graph walks boosted towards
the tools it failed with, and the diagnosis as guidance when a model writes the questions), which become the
next round's held-out set for that world.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio

from mcpworld.agent.loop import EpisodeConfig
from mcpworld.agent.policies import Policy
from mcpworld.agent.runner import RunSpec, run
from mcpworld.core.llm import ChatClient
from mcpworld.core.testing import free_port
from mcpworld.synth.arena.diagnosis import WorldReport, diagnose, guidance_text, markdown
from mcpworld.synth.tasks.graph import graph_tasks
from mcpworld.synth.tasks.taskspec import Dropped, SynthTask, save_tasks, with_tasks
from mcpworld.worlds.host import world_path, worlds_app
from mcpworld.worlds.loader import load_world, resolve
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.server import WorldServer
from mcpworld.worlds.world import World

PolicyFactory = Callable[[str, int], Policy]  # (world name, worker index) -> policy


@contextmanager
def serve_worlds(worlds: list[World]) -> Iterator[str]:
    """The worlds over Streamable HTTP on a free local port (a real MCP server, in a thread)."""
    from mcpworld.core.serving import serve_in_thread

    servers = [WorldServer(WorldRuntime(w)) for w in worlds]
    with serve_in_thread(worlds_app(servers), free_port()) as base:
        yield base


@dataclass
class Arena:
    worlds: list[str]
    make_policy: PolicyFactory
    out: Path
    rounds: int = 1
    tasks_per_world: int = 6
    targeted: int = 6
    weakest: int = 1
    seed: int = 0
    client: ChatClient | None = None
    episode: EpisodeConfig = field(default_factory=lambda: EpisodeConfig(max_turns=8, turn_timeout_s=60))
    log: Callable[[str], None] = lambda line: None

    async def held_out(self, world: World, round_no: int) -> list[SynthTask]:
        dropped: list[Dropped] = []
        tasks = await graph_tasks(world, self.tasks_per_world, self.seed + 1000 * round_no, client=self.client,
                                  split="test", dropped=dropped)
        self._log_dropped(round_no, world.name, dropped)
        return tasks

    def _log_dropped(self, round_no: int, world: str, dropped: list[Dropped]) -> None:
        if dropped:
            self.log(f"round {round_no}: {world}: dropped {len(dropped)} synthesized task(s) that failed "
                     f"validation or the audit")

    async def run(self) -> dict[str, Any]:
        """Every round: evaluate, diagnose, report, and synthesize targeted tasks for the weakest worlds."""
        self.out.mkdir(parents=True, exist_ok=True)
        base = {name: load_world(resolve(name)) for name in self.worlds}
        pending: dict[str, list[SynthTask]] = {}
        history = []
        for round_no in range(1, self.rounds + 1):
            folder = self.out / f"round-{round_no}"
            evaluated: dict[str, World] = {}
            for name, world in base.items():
                fresh = pending.get(name) or await self.held_out(world, round_no)
                own = [t for t in world.tasks if t.split == "test"][: max(0, self.tasks_per_world - len(fresh))]
                evaluated[name] = with_tasks(dataclasses.replace(world, tasks=own), fresh)
                save_tasks(folder / "tasks" / f"{name}.json", fresh)
            self.log(f"round {round_no}: evaluating on {sum(len(w.tasks) for w in evaluated.values())} tasks")
            reports = await self._evaluate(evaluated, folder)
            ranked = sorted(reports.values(), key=lambda r: (r.success_rate, -sum(r.failures.values()), r.world))
            weak = ranked[: self.weakest]
            pending = {}
            for report in weak:
                guidance = guidance_text(report.world, report.failures, report.weak_tools)
                boost = {t: 4.0 for t in report.weak_tools}
                dropped: list[Dropped] = []
                new = await graph_tasks(base[report.world], self.targeted, self.seed + 7919 * round_no + 1,
                                        client=self.client, split="test", boost=boost, guidance=guidance,
                                        dropped=dropped)
                self._log_dropped(round_no, report.world, dropped)
                for task in new:
                    task.meta.update({"arena_round": round_no, "targets": report.weak_tools})
                report.new_tasks = len(new)
                pending[report.world] = new
                save_tasks(folder / "targeted" / f"{report.world}.json", new)
                self.log(f"round {round_no}: {report.world} is weakest ({report.success_rate:.0%}); "
                         f"{len(new)} targeted tasks")
            summary = {"round": round_no, "weakest": [r.world for r in weak],
                       "worlds": {r.world: {**asdict(r), "success_rate": r.success_rate} for r in ranked}}
            (folder / "report.json").write_text(json.dumps(summary, indent=2))
            (folder / "report.md").write_text(markdown(summary))
            history.append(summary)
        result = {"rounds": history, "out": str(self.out)}
        (self.out / "arena.json").write_text(json.dumps(result, indent=2))
        (self.out / "report.md").write_text("\n\n".join(markdown(r) for r in history))
        return result

    async def _evaluate(self, worlds: dict[str, World], folder: Path) -> dict[str, WorldReport]:
        reports = {}
        with serve_worlds(list(worlds.values())) as base_url:
            for name, world in worlds.items():
                runtime = WorldRuntime(world)
                public = [runtime.task_info(t) for t in world.tasks]  # what the policy is given
                spec = RunSpec(server=base_url + world_path(name), tasks=public, concurrency=2,
                               seed=self.seed, output=folder / f"trajectories-{name}.jsonl", config=self.episode)
                trajs, _ = await run(spec, lambda i, name=name: self.make_policy(name, i))
                # the arena judges its own runs: it reads the tasks' kinds and references, the policy never did
                reports[name] = diagnose(name, trajs, {t.id: runtime.task_info(t, reveal=True) for t in world.tasks})
        return reports


def policy_factory(policy: str, seed: int = 0, model: str | None = None, base_url: str | None = None) -> PolicyFactory:
    """The arena's policies by name: random, oracle, or openai (an OpenAI-compatible endpoint)."""
    from mcpworld.agent.policies import make_policy

    if policy not in ("random", "oracle", "openai"):
        raise ValueError(f"unknown policy {policy!r}: random, oracle or openai")

    def make(world: str, index: int) -> Policy:
        return make_policy(policy, seed=seed, index=index, model=model, base_url=base_url)

    return make


def run_arena(arena: Arena) -> dict[str, Any]:
    return anyio.run(arena.run)
