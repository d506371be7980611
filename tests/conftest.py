"""Shared fixtures: real world servers started as processes, free ports, isolated MCPWORLD_HOME."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpworld.core import contain
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http

# One registry token for the test process and every server it starts (each has its own MCPWORLD_HOME):
# the oracle policy presents it to fetch reference solutions, which servers give no one else.
os.environ.setdefault("MCPWORLD_REGISTRY_TOKEN", "test-registry-token")

# Where bubblewrap cannot run, the suite's untrusted commands (SWE bash, workers) run uncontained: the user
# running the tests opts out explicitly here, and tests/test_containment.py skips saying why.
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
