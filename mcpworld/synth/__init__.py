"""World synthesis: worlds from a scenario (the AWM pipeline), tool-graph and programmatic tasks, imported worlds
(AWM, Agent-World), and the arena that targets a policy's weak spots.

Subpackages, lowest first: `sandbox` (workers that run generated and imported code contained, and the proxy
tools and packages that reach them), `tasks` (synthesized tasks as data, and the tool-graph and programmatic
task generators), `importers` (AWM and Agent-World datasets served as worlds, and installing a package),
`synthesis` (the LLM pipeline, scenario expansion, twins of real MCP servers), `arena`. `chat` holds what every
model conversation shares; `cli` is `mcpworld synth`. Generated and imported code never runs in the caller's
interpreter: see `sandbox.worker`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType
from typing import Any

# Where installed world packages written before the subpackages import from (their `__init__.py` and `tasks.py`
# name these modules, and a package on a user's disk is a file format: it must keep loading).
INSTALLED_IMPORTS = {"mcpworld.synth.sandboxed": "mcpworld.synth.sandbox.packages",
                     "mcpworld.synth.awm": "mcpworld.synth.importers.awm",
                     "mcpworld.synth.agent_world": "mcpworld.synth.importers.agent_world",
                     "mcpworld.synth.taskspec": "mcpworld.synth.tasks.taskspec"}


class _InstalledImports(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves `INSTALLED_IMPORTS`' old names to the modules that now hold them (the same objects)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        return importlib.util.spec_from_loader(name, self) if name in INSTALLED_IMPORTS else None

    def create_module(self, spec: Any) -> ModuleType:
        return ModuleType(spec.name)

    def exec_module(self, module: ModuleType) -> None:
        real = importlib.import_module(INSTALLED_IMPORTS[module.__name__])
        module.__dict__.update({k: v for k, v in vars(real).items() if not k.startswith("__")})


if not any(isinstance(f, _InstalledImports) for f in sys.meta_path):
    sys.meta_path.append(_InstalledImports())
