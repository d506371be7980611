"""SWT: predict what a command prints in a repository, from an OpenAI-compatible model.

A failed prediction (HTTP error, timeout, unparseable reply) raises `SimulatorError`; callers report it as a failure.
Output is never invented: an unknown result stays unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcpworld.core.llm import LLMError
from mcpworld.swe.shell import ExecResult
from mcpworld.worldmodels.context import SWTContext, swt_messages
from mcpworld.worldmodels.llm_pool import ModelPool
from mcpworld.worldmodels.parsing import ParseError, Prediction, parse_swt

SIMULATOR_FAILED_EXIT = 125


class SimulatorError(RuntimeError):
    """SWT gave no usable prediction; the message says why."""


@dataclass
class SWT:
    """The terminal world model behind a model pool (served as `swt` by `vllm serve --served-model-name swt`)."""

    models: ModelPool
    attempts: int = 1  # extra tries on an unparseable reply (endpoint errors are already retried by the pool)
    sampling: dict[str, Any] = field(default_factory=lambda: {"temperature": 0.0, "max_tokens": 4096})

    async def predict(self, ctx: SWTContext) -> Prediction:
        return await self.predict_messages(swt_messages(ctx))

    async def predict_messages(self, messages: list[dict[str, Any]]) -> Prediction:
        problems = []
        for _ in range(max(1, self.attempts)):
            try:
                completion = await self.models.complete(messages, **self.sampling)
            except LLMError as exc:
                raise SimulatorError(f"the SWT endpoint failed: {exc}") from None
            try:
                return parse_swt(completion.message.get("content") or "")
            except ParseError as exc:
                problems.append(str(exc))
        raise SimulatorError("SWT's reply could not be read: " + "; ".join(problems))


def failure_result(reason: str) -> ExecResult:
    """What the shell shows when SWT fails: a clear failure, exit code 125, no made-up output."""
    return ExecResult(stdout="", stderr=(f"[simulator failed] {reason}\nThe command was not executed and its output "
                                         "is unknown. Try again, or inspect files with read-only commands."),
                      exit_code=SIMULATOR_FAILED_EXIT)


def prediction_result(prediction: Prediction) -> ExecResult:
    return ExecResult(stdout=prediction.stdout, stderr=prediction.stderr, exit_code=prediction.exit_code)
