"""The servers the serving benchmarks load, each in its own process, and the figures a server that fell over gets.

Shared by `benchmarks.serving` and the peers beside it (`benchmarks.peers.openenv`): a server of one kind is
started (`mcpworld serve worlds`, or `python -m benchmarks.serving serve KIND PORT` for the SDK's world, the echo
server and the bare handler), waited for, and stopped.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mcpworld.core.testing import free_port, mcpworld_cmd, stop, wait_http

PATH = "/worlds/airline/mcp"
FAILED = {"rate": float("nan"), "p50_ms": float("nan"), "p99_ms": float("nan"), "cpu_us": float("nan"), "failed": True}


@contextmanager
def server(kind: str, workers: int = 1) -> Iterator[dict[str, Any]]:
    """One server process (kind: world, sdk-world, echo, bare); yields its URL and worker pids."""
    port = free_port()
    if kind == "world":
        cmd = mcpworld_cmd("serve", "worlds", "--only", "airline", "--port", str(port), "--max-episodes", "8192",
                           "--workers", str(workers))
    else:
        cmd = [sys.executable, "-m", "benchmarks.serving", "serve", kind, str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def drain() -> None:  # read the server's stderr as it comes, so it never blocks on a full pipe
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "workers ready" in line:
                ready.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        pids = [proc.pid]
        if workers > 1:
            if not ready.wait(180):
                raise RuntimeError("workers did not start: " + "".join(lines[-20:]))
            match = re.search(r"workers ready .*\(pids ([\d, ]+)\)", next(x for x in lines if "workers ready" in x))
            assert match is not None
            pids = [int(p) for p in match.group(1).split(", ")]
        probe = f"http://127.0.0.1:{port}" + ("/healthz" if kind in ("world", "bare") else "/mcp")
        wait_http(probe, proc)
        path = "/mcp" if kind == "echo" else PATH
        yield {"url": f"http://127.0.0.1:{port}{path}", "pids": pids}
    finally:
        stop(proc)
