"""The audit's report: one result per policy and task, the table of pass counts per task kind, the failures,
the chance levels and their warnings, and the JSON `mcpworld world audit --json` writes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from mcpworld.core.models import Check
from mcpworld.worlds.audit.attacks import POLICIES, Policy
from mcpworld.worlds.audit.attempts import Outcome, TaskContext
from mcpworld.worlds.audit.chance import CHANCE_WARNING, ChanceLevel

__all__ = ["DETAIL_CHARS", "KINDS", "AuditReport", "PolicyResult", "summarize"]

KINDS = ("answer", "state", "refusal")
DETAIL_CHARS = 300


@dataclass
class PolicyResult:
    """One policy on one task: whether any of its attempts passed (all of them, for the must-pass probes)."""

    task: str
    kind: str
    policy: str
    passed: bool
    expected_pass: bool
    attempts: int
    detail: str = ""
    attempt: str = ""  # the label of the attempt the detail is about

    @property
    def ok(self) -> bool:
        """A wrong policy failed, or a must-pass probe passed."""
        return self.passed == self.expected_pass


@dataclass
class AuditReport:
    """Every policy's result on every audited task of one world."""

    world: str
    tasks: list[str] = field(default_factory=list)
    results: list[PolicyResult] = field(default_factory=list)
    chance: list[ChanceLevel] = field(default_factory=list)
    tau2: dict[str, list[str]] = field(default_factory=dict)
    """For τ² worlds: each wrong policy -> the tasks it passes by τ²'s own reward (the `tau2` verdict evidence)."""

    @property
    def warnings(self) -> list[str]:
        """Task kinds whose chance level is above 1 in 10: a policy that guesses collects reward there."""
        return [f"{c.kind}: {c.policy} earns {c.level:.2f} per task ({c.how})" for c in self.chance
                if c.level > CHANCE_WARNING]

    @property
    def failures(self) -> list[PolicyResult]:
        """Wrong policies that passed a task, references or accepted forms that failed."""
        return [r for r in self.results if not r.ok]

    @property
    def ok(self) -> bool:
        return not self.failures

    def policies(self) -> list[str]:
        seen = [p.name for p in POLICIES if any(r.policy == p.name for r in self.results)]
        return seen + sorted({r.policy for r in self.results} - set(seen))

    def table(self) -> list[dict[str, Any]]:
        """One row per policy: "passed/total" per task kind and in all (cells with no tasks are "-")."""
        rows = []
        for name in self.policies():
            mine = [r for r in self.results if r.policy == name]
            row: dict[str, Any] = {"policy": name, "expected_pass": mine[0].expected_pass}
            for kind in (*KINDS, "total"):
                cell = [r for r in mine if kind == "total" or r.kind == kind]
                row[kind] = f"{sum(r.passed for r in cell)}/{len(cell)}" if cell else "-"
            row["ok"] = all(r.ok for r in mine)
            rows.append(row)
        return rows

    def as_dict(self) -> dict[str, Any]:
        return {
            "world": self.world,
            "ok": self.ok,
            "tasks": list(self.tasks),
            "table": self.table(),
            "chance": [asdict(c) for c in self.chance],
            "warnings": self.warnings,
            "failures": [asdict(r) for r in self.failures],
            **({"tau2": self.tau2} if self.tau2 else {}),  # τ² worlds only
            "results": [asdict(r) for r in self.results],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent, default=str)


def _clip(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _check_text(c: Check) -> str:
    return c.name + (f" ({c.detail})" if c.detail else "")


def summarize(ctx: TaskContext, policy: Policy, outcomes: list[Outcome]) -> PolicyResult:
    """One policy's attempts on one task, as one result: the attempt that got through (or failed, for a must-pass)."""
    task = ctx.task
    if policy.expected_pass:
        bad = next((o for o in outcomes if not o.passed), None)
        passed = bad is None
        about = bad or outcomes[0]
        failing = next((c for c in about.checks if not c.passed), None)
        detail = f"{_check_text(failing)}" if failing is not None else "passed"
    else:
        good = next((o for o in outcomes if o.passed), None)
        passed = good is not None
        about = good or outcomes[0]
        if good is not None:
            shown = "no answer" if good.answer is None else f"answer {_clip(good.answer)!r}"
            detail = f"passed with {shown}: " + "; ".join(c.name for c in good.checks)
        else:
            failing = next((c for c in about.checks if not c.passed), None)
            detail = f"failed: {_check_text(failing)}" if failing is not None else "failed"
    return PolicyResult(task=task.id, kind=task.kind, policy=policy.name, passed=passed,
                        expected_pass=policy.expected_pass, attempts=len(outcomes),
                        detail=_clip(detail, DETAIL_CHARS), attempt=about.label)
