"""`mcpworld run` (`mcpworld/agent/cli.py`) stopped with Ctrl-C says where the finished episodes are and how to
play the rest (`--resume`), instead of a bare KeyboardInterrupt (issue 35)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from mcpworld.core.contain import wait_until
from mcpworld.core.testing import mcpworld_cmd


def test_ctrl_c_on_run_names_the_file_and_resume(worlds_url: str, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    proc = subprocess.Popen(mcpworld_cmd("run", "--server", f"{worlds_url}/worlds/airline/mcp", "--policy", "oracle",
                                         "--samples", "40", "--concurrency", "2", "-o", str(out)),
                            env={**os.environ, "MCPWORLD_HOME": str(tmp_path)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: out.exists() and out.read_text().count("\n") >= 2 or proc.poll() is not None,
                          timeout=120)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert f"--resume -o {out}" in err and "Traceback" not in err, err
