"""Distillation data for SWT and SWR, recorded from real runs: the context a world model would see, and the truth.

SWT pairs: the SWT prompt for a command in a real checkout (candidate patch applied) -> the real stdout, stderr and
exit code. SWR pairs: the SWR prompt for a candidate patch -> the real test log and the real reward from SWE-bench
grading. Each line is chat JSONL ({"messages": [...], "meta": {...}}), ready for SFT.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpworld.swe.grading import Grade, grade
from mcpworld.swe.instances import Instance, answer_paths
from mcpworld.swe.shell import ExecResult, ExecutionBackend, LocalBackend, scrubbed_env
from mcpworld.swe.workspace import WorkspaceError, WorkspacePool
from mcpworld.worldmodels.candidates import CANDIDATES, candidate_patches
from mcpworld.worldmodels.context import (
    Budget,
    SWTContext,
    build_swr_context,
    build_swt_context,
    clip,
    swr_messages,
    swt_messages,
)
from mcpworld.worldmodels.repo import base_commit, instance_test_files, patched_checkout

OUTPUT_TOKENS = 4000  # each recorded stream is clipped to this many tokens (head and tail kept)


def swt_target(result: ExecResult) -> str:
    """The assistant message SWT should learn to write for a real result."""
    return json.dumps({"stdout": clip(result.stdout, OUTPUT_TOKENS), "stderr": clip(result.stderr, OUTPUT_TOKENS),
                       "exit_code": result.exit_code}, ensure_ascii=False)


def grade_reasoning(g: Grade) -> str:
    """A factual account of a real grading, as SWR's reasoning target (derived from the report, not made up)."""
    r = g.report
    if not r.get("patch_successfully_applied"):
        return f"The patch cannot be applied ({str(r.get('error', 'no patch'))[:300]}), so no test can pass. Reward 0."
    lines = []
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        status = (r.get("tests_status") or {}).get(key) or {"success": [], "failure": []}
        ok, bad = status["success"], status["failure"]
        lines.append(f"{key}: {len(ok)}/{len(ok) + len(bad)} pass" + (f"; failing: {', '.join(bad)}" if bad else "."))
    verdict = "All listed tests pass, so the reward is 1." if r.get("resolved") else \
        "Not every listed test passes, so the reward is 0."
    return "\n".join(lines + [verdict])


def swr_target(g: Grade) -> str:
    report = {"test_report": clip(g.log, OUTPUT_TOKENS), "reward": 1 if g.report.get("resolved") else 0}
    return f"{grade_reasoning(g)}\n\n```json\n{json.dumps(report, ensure_ascii=False)}\n```"


def real_runs(instance: Instance, patch: str, commands: list[str], pool: WorkspacePool, backend: ExecutionBackend,
              timeout: float, include_gold: bool, budget: Budget) -> list[tuple[SWTContext, ExecResult, str]]:
    """Run each command for real in a checkout with `patch` applied: (SWT's context, real result, command).

    Blocking (git and subprocesses): the one place both distillation and the fidelity eval get real output.
    """
    out = []
    with patched_checkout(instance, patch, pool) as ws:
        base = base_commit(ws.root, instance)
        analysis: str | None = None  # the same for every command in this checkout
        for command in commands:
            ctx = build_swt_context(instance, command, ws.root, base, include_gold=include_gold, budget=budget,
                                    analysis=analysis)
            analysis = ctx.analysis
            out.append((ctx, backend.run(command, ws.root, timeout, env=scrubbed_env(ws.home), writable=ws.parent),
                        command))
    return out


def swt_pairs(instance: Instance, name: str, patch: str, commands: list[str], pool: WorkspacePool,
              backend: ExecutionBackend, timeout: float, include_gold: bool, budget: Budget) -> list[dict[str, Any]]:
    """One chat pair per command: SWT's context -> what the command really printed."""
    return [{"messages": swt_messages(ctx) + [{"role": "assistant", "content": swt_target(result)}],
             "meta": {"kind": "swt", "instance_id": instance.instance_id, "candidate": name, "command": command,
                      "exit_code": result.exit_code, "timed_out": result.timed_out}}
            for ctx, result, command in real_runs(instance, patch, commands, pool, backend, timeout, include_gold,
                                                  budget)]


def swr_pair(instance: Instance, name: str, patch: str, tests: list[tuple[str, str]], pool: WorkspacePool,
             backend: ExecutionBackend, timeout: float, budget: Budget) -> dict[str, Any]:
    """Grade `patch` for real; the pair is SWR's prompt -> the real log and reward."""
    g = grade(instance, patch, pool, backend, timeout)
    messages = swr_messages(build_swr_context(instance, patch, tests, budget))
    messages.append({"role": "assistant", "content": swr_target(g)})
    return {"messages": messages, "meta": {"kind": "swr", "instance_id": instance.instance_id, "candidate": name,
                                           "reward": 1 if g.report.get("resolved") else 0,
                                           "resolution": g.report.get("resolution")}}


@dataclass
class CollectStats:
    swt: int = 0
    swr: int = 0
    errors: list[str] = field(default_factory=list)


def collect(instances: Iterable[Instance], output: str | Path, commands: Iterable[str] = (), *,
            candidates: Iterable[str] = CANDIDATES, test_command: bool = True, kinds: Iterable[str] = ("swt", "swr"),
            timeout: float = 300.0, include_gold: bool = False, budget: Budget = Budget(),
            backend: ExecutionBackend | None = None, pool: WorkspacePool | None = None,
            progress: Callable[[str], None] | None = None) -> CollectStats:
    """Write SWT and SWR pairs for every instance x candidate patch to `output` (JSONL, appended as made).

    Commands default to the instance's test command; SWR pairs skip the empty patch (SWR is never asked about it).
    """
    instances = list(instances)
    backend = backend or LocalBackend(hidden=tuple(answer_paths(instances)))  # candidates' tests never see answers
    own_pool = pool is None
    pool = pool or WorkspacePool(warm=0)
    kinds, extra, names = set(kinds), list(commands), list(candidates)
    stats = CollectStats()
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with path.open("w", encoding="utf-8") as fh:
            def write(pair: dict[str, Any]) -> None:
                fh.write(json.dumps(pair, ensure_ascii=False) + "\n")
                fh.flush()

            for instance in instances:
                try:
                    patches = candidate_patches(instance, pool, names)
                    tests = instance_test_files(instance, pool) if "swr" in kinds else []
                except (WorkspaceError, ValueError) as exc:
                    stats.errors.append(f"{instance.instance_id}: {exc}")
                    continue
                cmds = ([instance.test_command()] if test_command else []) + extra
                for name, patch in patches.items():
                    if progress:
                        progress(f"{instance.instance_id} [{name}]")
                    try:
                        if "swt" in kinds and cmds:
                            for pair in swt_pairs(instance, name, patch, cmds, pool, backend, timeout, include_gold,
                                                  budget):
                                write(pair)
                                stats.swt += 1
                        if "swr" in kinds and patch.strip():
                            write(swr_pair(instance, name, patch, tests, pool, backend, timeout, budget))
                            stats.swr += 1
                    except WorkspaceError as exc:
                        stats.errors.append(f"{instance.instance_id} [{name}]: {exc}")
    finally:
        if own_pool:
            pool.close_all()
    return stats
