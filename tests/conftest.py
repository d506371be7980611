"""Shared fixtures: real world servers started as processes, free ports, isolated MCPWORLD_HOME."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpworld.core import contain
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http

# One registry token for the test process and every server it starts (each has its own MCPWORLD_HOME):
# the oracle policy presents it to fetch reference solutions, which servers give no one else.
os.environ.setdefault("MCPWORLD_REGISTRY_TOKEN", "test-registry-token")

# Where bubblewrap cannot run, the suite's untrusted commands (SWE bash, workers) run uncontained: the user
# running the tests opts out explicitly here, and tests/core/test_contain.py skips saying why.
if contain.bwrap_exe() is None:
    os.environ.setdefault(contain.ALLOW_ENV, "1")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("mcpworld-home")
    monkeypatch.setenv("MCPWORLD_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def worlds_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mcpworld serve worlds` running as a real process; yields its base URL."""
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp_path_factory.mktemp("served-home"))}
    proc = subprocess.Popen(mcpworld_cmd("serve", "worlds", "--port", str(port), "--max-episodes", "512"),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/healthz", proc)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def swebench() -> Callable[[str], Any]:
    """Import a module of the official `swebench` package (the oracle our SWE grading is checked against).

    `swebench.harness` and `swebench.image_builder` import Docker, datasets and Modal in their `__init__`; the
    parsers, grading and image specs need none of those, so those packages are registered without running it.
    """
    try:
        import swebench as package
    except ImportError:
        pytest.skip("the official swebench package is not installed: pip install --no-deps swebench==5.0.2 unidiff")
    for sub in ("harness", "image_builder"):
        if f"swebench.{sub}" not in sys.modules:
            module = types.ModuleType(f"swebench.{sub}")
            module.__path__ = [str(Path(package.__file__).parent / sub)]
            sys.modules[f"swebench.{sub}"] = module
    return importlib.import_module
