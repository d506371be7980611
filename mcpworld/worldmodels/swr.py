"""SWR: a virtual test runner that judges a patch with k samples, from an OpenAI-compatible model.

Per SWE-World: an empty patch scores 0 without asking the model; each of k samples (default 3) gives reasoning, a
pytest-style report and a 0/1 reward; invalid samples (endpoint failure, unparseable reply) are counted and left out
of the mean; when every sample is invalid the result is `invalid`, with no score, rather than an invented 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import anyio

from mcpworld.core.llm import LLMError
from mcpworld.swe.instances import Instance
from mcpworld.swe.workspace import WorkspacePool
from mcpworld.worldmodels.context import Budget, build_swr_context, swr_messages
from mcpworld.worldmodels.llm_pool import ModelPool
from mcpworld.worldmodels.parsing import Judgement, ParseError, parse_swr
from mcpworld.worldmodels.repo import instance_test_files

Status = Literal["ok", "invalid", "empty_patch"]
DEFAULT_K = 3


@dataclass
class SWRResult:
    """The SWR verdict on one patch: the mean reward over valid samples, or `invalid` with the reasons."""

    instance_id: str
    status: Status
    score: float | None
    samples: list[Judgement] = field(default_factory=list)
    invalid: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def valid(self) -> int:
        return len(self.samples)

    @property
    def resolved(self) -> bool | None:
        """The majority view: mean ≥ 0.5 (None when invalid)."""
        return None if self.score is None else self.score >= 0.5

    def to_dict(self) -> dict[str, Any]:
        return {"instance_id": self.instance_id, "status": self.status, "score": self.score, "valid": self.valid,
                "invalid": self.invalid, "errors": self.errors, "samples": [asdict(s) for s in self.samples]}


def summarize(instance_id: str, outcomes: list[Judgement | str]) -> SWRResult:
    """Fold k sample outcomes (a Judgement, or the reason a sample was invalid) into one result."""
    samples = [o for o in outcomes if isinstance(o, Judgement)]
    errors = [o for o in outcomes if isinstance(o, str)]
    if not samples:
        return SWRResult(instance_id, "invalid", None, [], len(errors), errors)
    return SWRResult(instance_id, "ok", sum(s.reward for s in samples) / len(samples), samples, len(errors), errors)


@dataclass
class SWR:
    """The reward world model behind a model pool (served as `swr`)."""

    models: ModelPool
    k: int = DEFAULT_K
    budget: Budget = field(default_factory=Budget)
    sampling: dict[str, Any] = field(default_factory=lambda: {"temperature": 0.7, "max_tokens": 4096})
    seed: int = 0

    async def sample(self, messages: list[dict[str, Any]], index: int) -> Judgement | str:
        """One sample: a Judgement, or why it is invalid."""
        try:
            completion = await self.models.complete(messages, seed=self.seed + index, **self.sampling)
        except LLMError as exc:
            return f"sample {index}: endpoint failed: {exc}"
        try:
            return parse_swr(completion.message.get("content") or "")
        except ParseError as exc:
            return f"sample {index}: {exc}"

    async def score(self, instance: Instance, patch: str | None, test_files: list[tuple[str, str]],
                    k: int | None = None) -> SWRResult:
        """Judge `patch`; `test_files` are (path, content) with the test patch applied (repo.instance_test_files)."""
        if not patch or not patch.strip():
            return SWRResult(instance.instance_id, "empty_patch", 0.0)
        messages = swr_messages(build_swr_context(instance, patch, test_files, self.budget))
        n = max(1, k if k is not None else self.k)
        outcomes: list[Judgement | str] = [""] * n

        async def one(i: int) -> None:
            outcomes[i] = await self.sample(messages, i)

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
        return summarize(instance.instance_id, outcomes)


@dataclass
class SWRScorer:
    """SWR over a set of instances: finds each instance's test files once (a checkout with the test patch)."""

    swr: SWR
    instances: dict[str, Instance]
    pool: WorkspacePool = field(default_factory=lambda: WorkspacePool(warm=0))
    _tests: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    @classmethod
    def of(cls, swr: SWR, instances: list[Instance], pool: WorkspacePool | None = None) -> SWRScorer:
        return cls(swr, {i.instance_id: i for i in instances}, pool or WorkspacePool(warm=0))

    def instance(self, instance_id: str) -> Instance:
        try:
            return self.instances[instance_id]
        except KeyError:
            raise KeyError(f"unknown instance {instance_id!r}") from None

    def test_files(self, instance: Instance) -> list[tuple[str, str]]:
        """Blocking (git): call from a worker thread."""
        if instance.instance_id not in self._tests:
            self._tests[instance.instance_id] = instance_test_files(instance, self.pool)
        return self._tests[instance.instance_id]

    async def score(self, instance: Instance | str, patch: str | None, k: int | None = None) -> SWRResult:
        inst = self.instance(instance) if isinstance(instance, str) else instance
        if not patch or not patch.strip():
            return SWRResult(inst.instance_id, "empty_patch", 0.0)
        tests = await anyio.to_thread.run_sync(self.test_files, inst)
        return await self.swr.score(inst, patch, tests, k)

    def close(self) -> None:
        self.pool.close_all()
