"""Helpers for tests and benchmarks that start real mcpworld processes on this machine."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time

import httpx


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mcpworld_cmd(*args: str) -> list[str]:
    """The command line that runs `mcpworld ARGS` with this interpreter."""
    return [sys.executable, "-m", "mcpworld", *args]


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Wait until `url` answers, failing early (with the process output) if `proc` exits."""
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


def read_until(proc: subprocess.Popen, pattern: str, timeout: float = 120.0) -> re.Match[str]:
    """Read a server's stderr (text mode) until a line matches (the process is the clock, not a sleep)."""
    deadline = time.monotonic() + timeout
    assert proc.stderr is not None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            raise AssertionError(f"the server exited with {proc.returncode} before {pattern!r}")
        if match := re.search(pattern, line):
            return match
    raise AssertionError(f"no line matching {pattern!r} within {timeout}s")


def stop(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """Stop a server started for a test or benchmark as Ctrl-C would; kill it if it has not exited in time."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
