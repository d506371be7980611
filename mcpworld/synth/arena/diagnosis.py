"""The arena's diagnosis: one failure class per failed trajectory, a report per world, guidance for the next round.

A failed trajectory is classified from what the policy did (tool names against the reference, erroring calls,
the verdict's state diff, how it ended); a world's report counts the classes and names the tools of the tasks it
failed, and the weakest worlds' reports become the guidance a model gets when it writes their targeted tasks.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from mcpworld.agent.trajectory import Trajectory
from mcpworld.core.models import TaskInfo
from mcpworld.worlds.world import REFUSAL_WORDS

FAILURES = ("wrong_tool", "bad_arguments", "state_not_updated", "gave_up", "format_error", "wrong_answer",
            "wrong_state", "server_error", "timeout")
GAVE_UP = ("could not", "couldn't", "unable to", "i don't know", "not sure", "give up")


def classify(traj: Trajectory, task: TaskInfo) -> str | None:
    """One failure class for a trajectory (None when it passed), from what the policy actually did."""
    if traj.verdict is not None and traj.verdict.passed:
        return None
    if traj.termination == "format_error":
        return "format_error"
    if traj.termination == "unknown_tool":
        return "wrong_tool"
    if traj.is_infra or traj.termination in ("model_error", "setup_error"):
        return "server_error"
    if traj.termination in ("timeout", "episode_timeout"):
        return "timeout"
    calls = [c for s in traj.steps for c in s.calls]
    if not calls:
        return "gave_up"
    reference = {c.name for c in task.solution}
    called = {c.name for c in calls}
    if reference and not reference & called:
        return "wrong_tool"
    text = json.dumps(traj.messages, default=str)
    if any(c.is_error and c.name in reference for c in calls) or "invalid arguments for" in text \
            or all(c.is_error for c in calls):
        return "bad_arguments"
    diff = (traj.verdict.evidence.get("diff") if traj.verdict else None) or {}
    if task.kind == "state":
        return "state_not_updated" if not diff else "wrong_state"
    final = next((m.get("content") or "" for m in reversed(traj.messages) if m.get("role") == "assistant"), "")
    if traj.termination == "max_turns" or (task.kind != "refusal" and any(w in final.lower() for w in GAVE_UP)):
        return "gave_up"
    if task.kind != "refusal" and any(w in final.lower() for w in REFUSAL_WORDS):
        return "gave_up"
    return "wrong_answer"


@dataclass
class WorldReport:
    """One world's round: episodes, passes, failure classes, the tools it failed with, examples."""

    world: str
    episodes: int = 0
    passed: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    weak_tools: list[str] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)
    new_tasks: int = 0

    @property
    def success_rate(self) -> float:
        return self.passed / self.episodes if self.episodes else 0.0


def diagnose(world: str, trajs: list[Trajectory], tasks: dict[str, TaskInfo]) -> WorldReport:
    """One world's report: how many passed, the failure classes, and the tools of the tasks it failed."""
    report = WorldReport(world=world, episodes=len(trajs))
    failures: Counter[str] = Counter()
    tools: Counter[str] = Counter()
    for traj in trajs:
        task = tasks[traj.task]
        kind = classify(traj, task)
        if kind is None:
            report.passed += 1
            continue
        failures[kind] += 1
        tools.update(c.name for c in task.solution)
        if len(report.examples) < 5:
            report.examples.append({"task": task.id, "failure": kind, "termination": traj.termination,
                                    "calls": [c.name for s in traj.steps for c in s.calls], "error": traj.error})
    report.failures = dict(failures)
    report.weak_tools = [name for name, _ in tools.most_common(4)]
    return report


def guidance_text(world: str, failures: dict[str, int], weak_tools: list[str]) -> str:
    """What a model writing the next round's questions for a weak world is told to focus on."""
    top = ", ".join(f"{k} ({v})" for k, v in sorted(failures.items(), key=lambda kv: -kv[1])) or "none"
    tools = ", ".join(weak_tools) or "any"
    return (f"The policy is weakest on {world}: failures {top}. Write questions that exercise these tools: {tools}, "
            "with the same kind of reasoning it got wrong.")


def markdown(summary: dict[str, Any]) -> str:
    """A round's summary as a Markdown report: the table of worlds, then each weak world's examples."""
    lines = [f"# Arena round {summary['round']}", "",
             f"Weakest: {', '.join(summary['weakest']) or '-'}", "",
             "| world | episodes | success | " + " | ".join(f.replace("_", " ") for f in FAILURES) + " | new tasks |",
             "|---|---|---|" + "---|" * len(FAILURES) + "---|"]
    for name, r in summary["worlds"].items():
        lines.append(f"| {name} | {r['episodes']} | {r['success_rate']:.0%} | "
                     + " | ".join(str(r["failures"].get(f, 0)) for f in FAILURES) + f" | {r['new_tasks']} |")
    for name, r in summary["worlds"].items():
        if r["examples"]:
            lines += ["", f"## {name}", "", f"Tools in failed tasks: {', '.join(r['weak_tools']) or '-'}", ""]
            lines += [f"- `{e['task']}`: {e['failure']} (calls: {', '.join(e['calls']) or 'none'})"
                      for e in r["examples"]]
    return "\n".join(lines) + "\n"
