"""The simulated execution backend: the SWE `ExecutionBackend` contract, with SWT standing in for running code.

Per command (see `commands.classify`): destructive ones are refused, `pip install` is answered as success, file
operations and read-only inspection run for real through the wrapped backend (so the workspace the agent edits is
real), and whatever executes repository code is predicted by SWT from the workspace's current state.
SWT failures come back as exit code 125 with a clear message, never as invented output. An episode's shell
(`for_episode(instance)`) knows its instance and awaits SWT on the server's loop; the blocking `run` (what
grading calls) has no episode, so it cannot predict and says so.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio.to_thread

from mcpworld.swe.backends import SWEBackend
from mcpworld.swe.instances import Instance, answer_paths
from mcpworld.swe.shell import EpisodeShell, ExecResult, ExecutionBackend, LocalBackend
from mcpworld.swe.workspace import WorkspaceError, git
from mcpworld.worldmodels.commands import Decision, classify, pip_packages
from mcpworld.worldmodels.context import Budget, SWTContext, analyze_instance, build_swt_context
from mcpworld.worldmodels.repo import base_commit
from mcpworld.worldmodels.swt import SIMULATOR_FAILED_EXIT, SWT, SimulatorError, failure_result, prediction_result

REFUSED_EXIT = 1


def repo_root(cwd: Path) -> Path:
    """The repository root holding `cwd` (the workspace), or `cwd` itself outside git."""
    proc = git("rev-parse", "--show-toplevel", cwd=cwd, check=False)
    return Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else cwd


def pip_result(command: str) -> ExecResult:
    packages = [p for p in pip_packages(command) if not p.startswith((".", "/", "~"))]
    what = " ".join(packages) if packages else "the requested packages"
    return ExecResult(stdout=f"Successfully installed {what}\n", stderr="", exit_code=0)


@dataclass
class SimulatedBackend:
    """SWT for code execution, the real backend for everything else; `for_episode` gives an episode its shell."""

    swt: SWT
    real: ExecutionBackend = field(default_factory=lambda: LocalBackend(isolate=None))
    include_gold: bool = False
    budget: Budget = field(default_factory=Budget)
    name: str = "simulated"
    routes: Counter[str] = field(default_factory=Counter)
    _analysis: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def for_episode(self, instance: Instance) -> EpisodeShell:
        return SimulatedShell(self, instance)

    def route(self, command: str) -> tuple[Decision, ExecResult | None]:
        """Where `command` goes, and its answer when it needs no running (refused, or a pip install)."""
        decision = classify(command)
        with self._lock:
            self.routes[decision.route] += 1
        if decision.route == "refuse":
            return decision, ExecResult(stdout="", stderr=decision.reason, exit_code=REFUSED_EXIT)
        if decision.route == "pip":
            return decision, pip_result(command)
        return decision, None

    def run(self, command: str, cwd: Path, timeout: float, env: dict[str, str] | None = None,
            writable: Path | None = None) -> ExecResult:
        """The blocking seam (grading): real and answered commands as in an episode; nothing can be predicted."""
        decision, answered = self.route(command)
        if answered is not None:
            return answered
        if decision.route == "real":
            return self.real.run(decision.command, cwd, timeout, env=env, writable=writable)
        return failure_result("SWT predicts commands only in an episode's shell, which knows the episode's SWE "
                              "instance; grade with SWR (set MCPWORLD_SWR_URL) or a real backend")

    def context(self, instance: Instance, command: str, cwd: Path) -> SWTContext:
        """SWT's context for `command` from the workspace's current state (blocking: git and file reads)."""
        root = repo_root(cwd)
        base = base_commit(root, instance)
        key = f"{instance.instance_id}@{base}"
        if key not in self._analysis:
            self._analysis[key] = analyze_instance(instance, root)
        return build_swt_context(instance, command, root, base, include_gold=self.include_gold, budget=self.budget,
                                 analysis=self._analysis[key], cwd=cwd)

    async def simulate(self, instance: Instance, command: str, cwd: Path) -> ExecResult:
        """SWT's prediction of `command`, or a clear failure (exit 125) whatever goes wrong."""
        try:
            ctx = await anyio.to_thread.run_sync(self.context, instance, command, cwd)
        except (WorkspaceError, OSError) as exc:
            return failure_result(f"could not read the workspace to build SWT's context: {exc}")
        try:
            return prediction_result(await self.swt.predict(ctx))
        except SimulatorError as exc:
            return failure_result(str(exc))
        except Exception as exc:  # whatever goes wrong, the agent sees a failure, not a crashed tool
            return failure_result(f"the simulator broke: {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class SimulatedShell:
    """One episode's shell in simulated mode: it knows its instance, so SWT is asked directly (no lookup)."""

    backend: SimulatedBackend
    instance: Instance

    async def run(self, command: str, cwd: Path, timeout: float, env: dict[str, str] | None = None,
                  writable: Path | None = None) -> ExecResult:
        decision, answered = self.backend.route(command)
        if answered is not None:
            return answered
        if decision.route == "real":
            real = self.backend.real
            return await anyio.to_thread.run_sync(
                lambda: real.run(decision.command, cwd, timeout, env=env, writable=writable))
        started = time.monotonic()
        result = await self.backend.simulate(self.instance, decision.command, cwd)
        if decision.command != command and result.exit_code != SIMULATOR_FAILED_EXIT:  # pip part answered, not run
            result.stdout = pip_result(command).stdout + result.stdout
        result.duration_s = round(time.monotonic() - started, 4)
        return result


def simulated_backend(swt_url: str | None = None, model: str | None = None, *, real: ExecutionBackend | None = None,
                      include_gold: bool = False, timeout_s: float = 120.0,
                      hidden: Sequence[str] = ()) -> SimulatedBackend:
    """A SimulatedBackend on the SWT endpoint(s) given or in $MCPWORLD_SWT_URL; without `real`, what runs for
    real runs here, contained, with `hidden` (files and folders) out of its sight."""
    from mcpworld.worldmodels.llm_pool import ModelPool, parse_urls

    url = swt_url or os.environ.get("MCPWORLD_SWT_URL")
    if not parse_urls(url):
        from mcpworld.swe.shell import BackendUnavailable

        raise BackendUnavailable("simulated backend unavailable: no SWT endpoint (set MCPWORLD_SWT_URL or pass "
                                 "swt_url)")
    pool = ModelPool.from_urls(url, model or os.environ.get("MCPWORLD_SWT_MODEL", "swt"),  # type: ignore[arg-type]
                               timeout_s=timeout_s)
    return SimulatedBackend(SWT(pool), real=real or LocalBackend(hidden=tuple(hidden)), include_gold=include_gold)


def swe_backend(instances: Sequence[Instance]) -> SWEBackend:
    """`--backend simulated` (`mcpworld.swe.backends`): SWT predicts what code prints ($MCPWORLD_SWT_URL), the real
    part runs contained with these instances' answers hidden, and with $MCPWORLD_SWR_URL SWR grades."""
    from mcpworld.worldmodels.servers import WorldModelConfig, swr_grader

    execution = simulated_backend(hidden=answer_paths(instances))
    return SWEBackend(execution, swr_grader(WorldModelConfig.from_env(), list(instances)))
