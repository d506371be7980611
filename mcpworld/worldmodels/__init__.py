"""World models for SWE work: SWT predicts what commands print, SWR judges patches like a test run.

Entry points: `SimulatedBackend` (the SWE `ExecutionBackend` with SWT behind it), `SWT`, `SWR` / `SWRScorer`,
`SWRReward` (trainer reward), `select_patch` / `SWRSelector` (best-of-N), `distill.collect` (distillation data),
`fidelity.evaluate` (fidelity), `world_model_servers` (MCP servers for `mcpworld up`), the click commands in `cli`.
Names are imported on first use so the command line starts fast.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SimulatedBackend": "backend", "simulated_backend": "backend",
    "Endpoint": "llm_pool", "ModelPool": "llm_pool", "SWR": "swr", "SWRResult": "swr", "SWRScorer": "swr",
    "SWT": "swt", "SimulatorError": "swt", "SWRReward": "reward",
    "SWRGrader": "grader", "SWRSelector": "bestofn", "select_patch": "bestofn",
    "WorldModelConfig": "servers", "world_model_servers": "servers", "running_world_models": "servers",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
