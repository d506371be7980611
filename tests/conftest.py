"""Shared fixtures: real world servers started as processes, free ports, isolated MCPWORLD_HOME."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("mcpworld-home")
    monkeypatch.setenv("MCPWORLD_HOME", str(home))
    return home


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise RuntimeError(f"server exited with {proc.returncode}: {out}")
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


def mcpworld_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcpworld", *args]


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
