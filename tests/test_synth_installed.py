"""World packages installed before `mcpworld.synth` had subpackages keep loading: their `__init__.py` and
`tasks.py` import `mcpworld.synth.sandboxed`, `.awm`, `.agent_world` and `.taskspec` (a package on a user's disk is
a file format)."""

from __future__ import annotations

import importlib

import pytest

from mcpworld.synth import INSTALLED_IMPORTS


@pytest.mark.parametrize("old", sorted(INSTALLED_IMPORTS))
def test_an_old_import_path_gives_the_same_objects(old: str) -> None:
    legacy, real = importlib.import_module(old), importlib.import_module(INSTALLED_IMPORTS[old])
    names = [n for n in vars(real) if not n.startswith("_")]
    assert names and all(getattr(legacy, n) is getattr(real, n) for n in names)


def test_the_lines_old_packages_hold_still_run() -> None:
    namespace: dict = {}
    exec("from mcpworld.synth.sandboxed import load_package\n"  # synthesized worlds' __init__.py
         "from mcpworld.synth.awm import load_package as awm\n"  # AWM imports
         "from mcpworld.synth.agent_world import load_package as agent_world\n"  # Agent-World imports
         "from mcpworld.synth.taskspec import load_synthesized, load_task_file\n", namespace)  # their tasks.py
    assert callable(namespace["load_package"]) and callable(namespace["load_task_file"])
