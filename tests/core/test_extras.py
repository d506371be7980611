"""A command whose extra is missing says what to install (`mcpworld/core/extras.py`): `train grpo` without torch
printed a `ModuleNotFoundError: torch` traceback (issue 35). Run for real in a fresh interpreter where the
modules cannot be imported."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import mcpworld.trainer.toy_world as toy

HIDE = "import sys\nfor m in {modules!r}: sys.modules[m] = None\nfrom mcpworld.app.cli import main\n" \
       "main(args={args!r}, prog_name='mcpworld')\n"


@pytest.mark.parametrize(("modules", "args", "extra"), [
    (("torch", "transformers"), ["train", "grpo", "--world", os.path.dirname(toy.__file__), "--tiny"], "train"),
    (("textual",), ["tui"], "tui"),
])
def test_a_missing_extra_is_named_with_the_command_that_installs_it(modules: tuple[str, ...], args: list[str],
                                                                    extra: str) -> None:
    run = subprocess.run([sys.executable, "-c", HIDE.format(modules=modules, args=args)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1
    assert f"pip install 'mcpworld[{extra}]'" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and "ModuleNotFoundError" not in run.stderr
