"""How faithful the world models are: SWT against real execution, SWR against real grading.

SWT: exit-code agreement and output similarity (difflib ratio of stdout+stderr) over the commands it answered;
failures are counted, not scored. SWR: accuracy, precision and recall of "resolved" (mean >= 0.5) against real
grading over valid results; invalid results are counted, not scored. Metrics are plain functions so they can be
checked by hand; `evaluate` gathers the cases.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio

from mcpworld.swe.grading import grade
from mcpworld.swe.instances import Instance, answer_paths
from mcpworld.swe.shell import ExecResult, ExecutionBackend, LocalBackend
from mcpworld.swe.workspace import WorkspaceError, WorkspacePool
from mcpworld.worldmodels.candidates import CANDIDATES, candidate_patches
from mcpworld.worldmodels.context import Budget
from mcpworld.worldmodels.distill import real_runs
from mcpworld.worldmodels.swr import SWRScorer
from mcpworld.worldmodels.swt import SWT, SimulatorError


def similarity(real: str, predicted: str) -> float:
    """difflib's ratio of two outputs (1.0 identical, 0.0 nothing in common; two empty outputs are identical)."""
    return difflib.SequenceMatcher(None, real, predicted, autojunk=False).ratio()


@dataclass
class SWTCase:
    instance_id: str
    candidate: str
    command: str
    real_exit: int
    real_output: str
    predicted_exit: int | None = None  # None: SWT failed
    predicted_output: str = ""
    error: str = ""

    @property
    def answered(self) -> bool:
        return self.predicted_exit is not None


@dataclass
class SWRCase:
    instance_id: str
    candidate: str
    real: int  # 1 when real grading resolved it
    score: float | None  # SWR mean; None when invalid
    status: str = "ok"

    @property
    def predicted(self) -> int | None:
        return None if self.score is None else int(self.score >= 0.5)


def swt_metrics(cases: Sequence[SWTCase]) -> dict[str, Any]:
    answered = [c for c in cases if c.answered]
    n = len(answered)
    return {
        "cases": len(cases), "answered": n, "failed": len(cases) - n,
        "exit_code_agreement": sum(c.predicted_exit == c.real_exit for c in answered) / n if n else None,
        "output_similarity": sum(similarity(c.real_output, c.predicted_output) for c in answered) / n if n else None,
    }


def swr_metrics(cases: Sequence[SWRCase]) -> dict[str, Any]:
    valid = [c for c in cases if c.predicted is not None]
    tp = sum(c.predicted == 1 and c.real == 1 for c in valid)
    fp = sum(c.predicted == 1 and c.real == 0 for c in valid)
    fn = sum(c.predicted == 0 and c.real == 1 for c in valid)
    tn = sum(c.predicted == 0 and c.real == 0 for c in valid)
    n = len(valid)
    return {
        "cases": len(cases), "valid": n, "invalid": len(cases) - n, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "accuracy": (tp + tn) / n if n else None,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
    }


@dataclass
class FidelityReport:
    swt_cases: list[SWTCase] = field(default_factory=list)
    swr_cases: list[SWRCase] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"swt": swt_metrics(self.swt_cases) if self.swt_cases else None,
                "swr": swr_metrics(self.swr_cases) if self.swr_cases else None,
                "swt_cases": [{**asdict(c), "similarity": similarity(c.real_output, c.predicted_output)
                               if c.answered else None} for c in self.swt_cases],
                "swr_cases": [{**asdict(c), "predicted": c.predicted} for c in self.swr_cases],
                "errors": self.errors}


def _output(result: ExecResult) -> str:
    return result.stdout + result.stderr


async def evaluate(instances: Iterable[Instance], *, swt: SWT | None = None, scorer: SWRScorer | None = None,
                   commands: Iterable[str] = (), test_command: bool = True,
                   candidates: Iterable[str] = CANDIDATES, timeout: float = 300.0, include_gold: bool = False,
                   budget: Budget = Budget(), backend: ExecutionBackend | None = None,
                   pool: WorkspacePool | None = None) -> FidelityReport:
    """Compare SWT (when given) with real runs and SWR (when given) with real grading, per instance x candidate."""
    instances = list(instances)
    backend = backend or LocalBackend(hidden=tuple(answer_paths(instances)))  # candidates' tests never see answers
    own_pool = pool is None
    pool = pool or WorkspacePool(warm=0)
    report = FidelityReport()
    extra, names = list(commands), list(candidates)
    try:
        for instance in instances:
            try:
                patches = await anyio.to_thread.run_sync(candidate_patches, instance, pool, names)
            except (WorkspaceError, ValueError) as exc:
                report.errors.append(f"{instance.instance_id}: {exc}")
                continue
            cmds = ([instance.test_command()] if test_command else []) + extra
            for name, patch in patches.items():
                try:
                    if swt is not None and cmds:
                        runs = await anyio.to_thread.run_sync(real_runs, instance, patch, cmds, pool, backend,
                                                              timeout, include_gold, budget)
                        for ctx, real, command in runs:
                            case = SWTCase(instance.instance_id, name, command, real.exit_code, _output(real))
                            try:
                                p = await swt.predict(ctx)
                                case.predicted_exit, case.predicted_output = p.exit_code, p.stdout + p.stderr
                            except SimulatorError as exc:
                                case.error = str(exc)
                            report.swt_cases.append(case)
                    if scorer is not None:
                        real_grade = await anyio.to_thread.run_sync(grade, instance, patch, pool, backend, timeout)
                        result = await scorer.score(instance, patch)
                        report.swr_cases.append(SWRCase(instance.instance_id, name,
                                                        int(bool(real_grade.report.get("resolved"))), result.score,
                                                        result.status))
                except WorkspaceError as exc:
                    report.errors.append(f"{instance.instance_id} [{name}]: {exc}")
    finally:
        if own_pool:
            pool.close_all()
    return report


def print_report(report: FidelityReport, console: Any = None) -> None:
    """Rich tables: per-case rows, then the metrics."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    data = report.to_dict()
    if report.swt_cases:
        table = Table("instance", "candidate", "command", "real exit", "SWT exit", "similarity", title="SWT vs real")
        for c in data["swt_cases"]:
            table.add_row(c["instance_id"], c["candidate"], c["command"][:50], str(c["real_exit"]),
                          "failed" if c["predicted_exit"] is None else str(c["predicted_exit"]),
                          "-" if c["similarity"] is None else f"{c['similarity']:.3f}")
        console.print(table)
    if report.swr_cases:
        table = Table("instance", "candidate", "real", "SWR mean", "predicted", title="SWR vs real grading")
        for c in data["swr_cases"]:
            table.add_row(c["instance_id"], c["candidate"], str(c["real"]),
                          c["status"] if c["score"] is None else f"{c['score']:.2f}",
                          "-" if c["predicted"] is None else str(c["predicted"]))
        console.print(table)
    summary = Table("metric", "value", title="Fidelity")
    for kind in ("swt", "swr"):
        for key, value in (data[kind] or {}).items():
            summary.add_row(f"{kind} {key}", "-" if value is None else
                            f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(summary)
    for error in report.errors:
        console.print(f"[red]error[/red] {error}")
