"""The simulated execution backend: the SWE `ExecutionBackend` contract, with SWT standing in for running code.

Per command (see `commands.classify`): destructive ones are refused, `pip install` is answered as success, file
operations and read-only inspection run for real through the wrapped backend (so the workspace the agent edits is
real), and whatever executes repository code is predicted by SWT from the workspace's current state.
SWT failures come back as exit code 125 with a clear message, never as invented output.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mcpworld.swe.grading import repo_dirname
from mcpworld.swe.instances import Instance
from mcpworld.swe.shell import ExecResult, ExecutionBackend, LocalBackend
from mcpworld.swe.workspace import WorkspaceError, git
from mcpworld.worldmodels.bridge import run_sync
from mcpworld.worldmodels.commands import classify, pip_packages
from mcpworld.worldmodels.context import Budget, analyze_instance, build_swt_context
from mcpworld.worldmodels.repo import base_commit
from mcpworld.worldmodels.swt import SIMULATOR_FAILED_EXIT, SWT, SimulatorError, failure_result, prediction_result

InstanceResolver = Callable[[Path], Instance | None]
REFUSED_EXIT = 1


def _real(path: Path) -> str:
    return os.path.realpath(path)


def repo_root(cwd: Path) -> Path:
    """The repository root holding `cwd` (the workspace), or `cwd` itself outside git."""
    proc = git("rev-parse", "--show-toplevel", cwd=cwd, check=False)
    return Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else cwd


def static_resolver(instances: Iterable[Instance]) -> InstanceResolver:
    """Find the instance by the workspace folder's name (the repository's short name) and its HEAD commit.

    Ambiguous when several instances share a repository and commit: then None (bind the workspace instead).
    """
    by_dir: dict[str, list[Instance]] = {}
    for inst in instances:
        by_dir.setdefault(repo_dirname(inst), []).append(inst)

    def resolve(root: Path) -> Instance | None:
        candidates = by_dir.get(root.name, [])
        if len(candidates) <= 1:
            return candidates[0] if candidates else None
        head = git("rev-parse", "HEAD", cwd=root, check=False).stdout.strip()
        matching = [i for i in candidates if head and (i.base_commit == head or head.startswith(i.base_commit))]
        return matching[0] if len(matching) == 1 else None

    return resolve


def pip_result(command: str) -> ExecResult:
    packages = [p for p in pip_packages(command) if not p.startswith((".", "/", "~"))]
    what = " ".join(packages) if packages else "the requested packages"
    return ExecResult(stdout=f"Successfully installed {what}\n", stderr="", exit_code=0)


@dataclass
class SimulatedBackend:
    """SWT for code execution, the real backend for everything else. Bind workspaces to instances, or resolve."""

    swt: SWT
    resolve: InstanceResolver | None = None
    real: ExecutionBackend = field(default_factory=lambda: LocalBackend(isolate=None))
    include_gold: bool = False
    budget: Budget = field(default_factory=Budget)
    name: str = "simulated"
    routes: Counter[str] = field(default_factory=Counter)
    _bindings: dict[str, Instance] = field(default_factory=dict)
    _analysis: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def bind(self, root: Path, instance: Instance) -> None:
        """Declare that the workspace at `root` holds `instance` (what episode starts should do)."""
        with self._lock:
            self._bindings[_real(root)] = instance

    def unbind(self, root: Path) -> None:
        with self._lock:
            self._bindings.pop(_real(root), None)

    def instance_for(self, root: Path) -> Instance | None:
        with self._lock:
            bound = self._bindings.get(_real(root))
        if bound is not None:
            return bound
        return self.resolve(root) if self.resolve is not None else None

    def run(self, command: str, cwd: Path, timeout: float, env: dict[str, str] | None = None,
            writable: Path | None = None) -> ExecResult:
        decision = classify(command)
        with self._lock:
            self.routes[decision.route] += 1
        if decision.route == "refuse":
            return ExecResult(stdout="", stderr=decision.reason, exit_code=REFUSED_EXIT)
        if decision.route == "pip":
            return pip_result(command)
        if decision.route == "real":
            return self.real.run(decision.command, cwd, timeout, env=env, writable=writable)
        started = time.monotonic()
        result = self._simulate(decision.command, cwd)
        if decision.command != command and result.exit_code != SIMULATOR_FAILED_EXIT:  # pip part answered, not run
            result.stdout = pip_result(command).stdout + result.stdout
        result.duration_s = round(time.monotonic() - started, 4)
        return result

    def _simulate(self, command: str, cwd: Path) -> ExecResult:
        root = repo_root(cwd)
        instance = self.instance_for(root)
        if instance is None:
            return failure_result(f"no SWE instance is known for the workspace {root}, so SWT cannot predict "
                                  "this command")
        try:
            base = base_commit(root, instance)
            key = f"{instance.instance_id}@{base}"
            if key not in self._analysis:
                self._analysis[key] = analyze_instance(instance, root)
            ctx = build_swt_context(instance, command, root, base, include_gold=self.include_gold,
                                    budget=self.budget, analysis=self._analysis[key], cwd=cwd)
        except (WorkspaceError, OSError) as exc:
            return failure_result(f"could not read the workspace to build SWT's context: {exc}")
        try:
            return prediction_result(run_sync(self.swt.predict, ctx))
        except SimulatorError as exc:
            return failure_result(str(exc))
        except Exception as exc:  # whatever goes wrong, the agent sees a failure, not a crashed tool
            return failure_result(f"the simulator broke: {type(exc).__name__}: {exc}")


def simulated_backend(swt_url: str | None = None, model: str | None = None, *, real: ExecutionBackend | None = None,
                      include_gold: bool = False, timeout_s: float = 120.0,
                      resolve: InstanceResolver | None = None) -> SimulatedBackend:
    """A SimulatedBackend on the SWT endpoint(s) given or in $MCPWORLD_SWT_URL (what `make_backend` can call)."""
    from mcpworld.worldmodels.llm_pool import ModelPool, parse_urls

    url = swt_url or os.environ.get("MCPWORLD_SWT_URL")
    if not parse_urls(url):
        from mcpworld.swe.shell import BackendUnavailable

        raise BackendUnavailable("simulated backend unavailable: no SWT endpoint (set MCPWORLD_SWT_URL or pass "
                                 "swt_url)")
    pool = ModelPool.from_urls(url, model or os.environ.get("MCPWORLD_SWT_MODEL", "swt"),  # type: ignore[arg-type]
                               timeout_s=timeout_s)
    return SimulatedBackend(SWT(pool), resolve=resolve, real=real or LocalBackend(), include_gold=include_gold)
