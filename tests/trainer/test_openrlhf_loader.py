"""The OpenRLHF bridge loads through OpenRLHF's own loader (issue 29).

`train_ppo_ray --agent_func_path mcpworld/trainer/openrlhf_agent.py` loads the file with OpenRLHF's
`_load_agent_executor`: `spec_from_file_location("agent_module", path)` and `exec_module`, without registering the
module in `sys.modules`. Its module (`openrlhf.trainer.ray.vllm_engine`) imports vLLM, which a CPU machine lacks,
so the test runs that function's own source, read from the installed OpenRLHF: not a copy, and a change to it in
OpenRLHF is what runs here. Before the fix the bridge died there at start-up (a module-level `@dataclass` looks
its module up in `sys.modules`).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the OpenRLHF bridge needs torch (installed by .ci/run)")
agent_base = pytest.importorskip("openrlhf.utils.agent", reason="install openrlhf --no-deps (see .ci/run)")

BRIDGE = Path(__file__).resolve().parents[2] / "mcpworld" / "trainer" / "openrlhf_agent.py"


def openrlhf_loader() -> Any:
    """OpenRLHF's `_load_agent_executor`, compiled from the installed package's source."""
    spec = importlib.util.find_spec("openrlhf")
    assert spec is not None and spec.submodule_search_locations
    source_file = Path(spec.submodule_search_locations[0]) / "trainer" / "ray" / "vllm_engine.py"
    source = source_file.read_text()
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)
                and n.name == "_load_agent_executor")
    namespace: dict[str, Any] = {"AgentExecutorBase": agent_base.AgentExecutorBase}
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(source_file), "exec"), namespace)
    return namespace["_load_agent_executor"]


def test_the_bridge_loads_through_openrlhfs_own_loader() -> None:
    before = set(sys.modules)
    executor = openrlhf_loader()(str(BRIDGE))
    assert isinstance(executor, agent_base.MultiTurnAgentExecutor)
    assert type(executor).__module__ == "agent_module" and "agent_module" not in set(sys.modules) - before
    # what `execute` builds per rollout works in a module nobody registered
    module_globals = type(executor).__init__.__globals__
    made = module_globals["Rollout"](module_globals["CHATML"], 1)
    assert (made.attempt, made.last, made.agent) == (1, None, None)
