"""The audit's driver: for each task, build its context, play every policy's attempts, sum them up; then the
chance levels.
"""

from __future__ import annotations

from collections.abc import Callable

from mcpworld.core.models import Check
from mcpworld.worlds.audit.attacks import POLICIES, Policy
from mcpworld.worlds.audit.attempts import Outcome, TaskContext, play
from mcpworld.worlds.audit.chance import chance_levels
from mcpworld.worlds.audit.report import AuditReport, PolicyResult, summarize
from mcpworld.worlds.runtime import UnknownTask, WorldRuntime

__all__ = ["audit"]


def audit(runtime: WorldRuntime, tasks: list[str] | None = None,
          on_progress: Callable[[int, int, str], None] | None = None,
          policies: list[Policy] | None = None) -> AuditReport:
    """Play the reference, its accepted forms and every attack on each task (all tasks when `tasks` is None),
    then work out the chance levels.

    `on_progress(done, total, task_id)` is called after each task. Raises `UnknownTask` for an unknown id.
    """
    # a provisional task has no reference to attack from (Task.provisional): audited once it is promoted
    ids = [t for t, task in runtime.tasks.items() if not task.provisional] if tasks is None else list(tasks)
    for tid in ids:
        if tid not in runtime.tasks:
            raise UnknownTask(tid)
    report = AuditReport(world=runtime.world.name, tasks=ids)
    contexts: list[TaskContext] = []
    for n, tid in enumerate(ids, 1):
        task = runtime.tasks[tid]
        try:
            ctx = TaskContext.build(runtime, task)
        except Exception as exc:
            report.results.append(PolicyResult(task=tid, kind=task.kind, policy="reference", passed=False,
                                               expected_pass=True, attempts=0,
                                               detail=f"could not play the reference: {type(exc).__name__}: {exc}"))
            if on_progress:
                on_progress(n, len(ids), tid)
            continue
        for policy in policies or POLICIES:
            try:
                attempts = list(policy.attempts(ctx))
            except Exception as exc:
                outcomes = [Outcome("building attempts", False,
                                     [Check(name="attempts built", passed=False,
                                            detail=f"{type(exc).__name__}: {exc}")], None)]
            else:
                outcomes = [o for a in attempts if (o := play(ctx, a)) is not None]
            if outcomes:
                report.results.append(summarize(ctx, policy, outcomes))
            if not policy.expected_pass and any(((o.evidence or {}).get("tau2") or {}).get("reward") == 1.0
                                                for o in outcomes):  # τ² worlds: what τ²'s own reward lets pass
                report.tau2.setdefault(policy.name, []).append(tid)
        contexts.append(ctx)
        if on_progress:
            on_progress(n, len(ids), tid)
    noop = {r.task: r.passed for r in report.results if r.policy == "noop"}
    report.chance = chance_levels(runtime, contexts, noop)
    return report
