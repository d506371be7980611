"""Shared data shapes: what a verifier says, what a task looks like on the wire.

These are the types every part (servers, agent, trainer, TUI) exchanges, so they live in the kernel.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_serializer


class Check(BaseModel):
    """One named assertion a verifier made, with what it saw."""

    name: str
    passed: bool
    detail: str = ""
    group: str = ""
    """What the check is about, in words that reveal nothing ("final state", "answer", "decline", "free text",
    "task check"): what a sealed verdict keeps of it (`Verdict.sealed`)."""

    def __bool__(self) -> bool:
        return self.passed


SEALED_EVIDENCE = ("diff", "answer", "submission")
"""Evidence a sealed verdict keeps: what the agent itself did and said."""


class Verdict(BaseModel):
    """A verifier's judgement of one episode: pass/fail, a score in [0, 1], and the evidence."""

    passed: bool
    score: float = Field(ge=0.0, le=1.0)
    checks: list[Check] = Field(default_factory=list)
    evidence: dict[str, Any] = Field(default_factory=dict)

    def sealed(self) -> Verdict:
        """The verdict as a caller without the registry token sees it: pass/fail per check under its group's
        name, no details (they name expected values and reference rows), the agent's own changes as evidence."""
        checks = [Check(name=c.group or "check", passed=c.passed, group=c.group or "check") for c in self.checks]
        evidence = {k: v for k, v in self.evidence.items() if k in SEALED_EVIDENCE}
        return Verdict(passed=self.passed, score=self.score, checks=checks, evidence=evidence)

    @property
    def failures(self) -> list[str]:
        """The failing checks as "name: detail" lines (what to read when a verdict surprises you)."""
        return [f"{c.name}: {c.detail}" if c.detail else c.name for c in self.checks if not c.passed]


class ToolCall(BaseModel):
    """A tool name and its arguments: one step of a reference solution or of a trajectory.

    `role` says who calls: the agent, or, in a dual-control world (τ² telecom), the user on their own tools (over
    MCP, a call whose `_meta` carries `ROLE_META_KEY`: "user"). It is written out only when it is the user's."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    role: Literal["assistant", "user"] = "assistant"

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> dict[str, Any]:
        out = handler(self)
        if out.get("role") == "assistant":
            del out["role"]
        return out


class TaskInfo(BaseModel):
    """What a client may know about a task before playing it (never the verifier)."""

    id: str
    instruction: str
    split: Literal["train", "test"] = "train"
    difficulty: Literal["easy", "medium", "hard"] = "easy"
    kind: Literal["answer", "state", "refusal"] | None = None  # told only to token holders
    solution: list[ToolCall] = Field(default_factory=list)
    answer: str | None = None
    rubric: list[str] = Field(default_factory=list)
    seed: int = 0  # the seed whose data the instruction and reference name (worlds rename ids by seed)
    provisional: bool = False  # judged by its own verifier alone, no reference yet (`run --include-provisional`)
