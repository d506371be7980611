"""Peer frameworks measured beside mcpworld, each in its own virtual environment (never in the project's).

`openenv-core` pulls gradio and fastmcp 3, which would break the project's `mcp` pin, so the OpenEnv peer runs
under `.bench/openenv-venv` (built by `python -m benchmarks.peers openenv --setup`) or `$MCPWORLD_OPENENV_PYTHON`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPENENV_VENV = ROOT / ".bench" / "openenv-venv"
OPENENV_PIN = "openenv-core==0.3.0"
OPENENV_SETUP = "python -m benchmarks.peers openenv --setup"
OPENENV_ENV_VAR = "MCPWORLD_OPENENV_PYTHON"


def openenv_python() -> Path | None:
    """The peer venv's interpreter, if one is set up (`$MCPWORLD_OPENENV_PYTHON` wins); else None."""
    named = os.environ.get(OPENENV_ENV_VAR)
    candidate = Path(named) if named else OPENENV_VENV / "bin" / "python"
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def openenv_missing() -> str:
    """Why the OpenEnv peer cannot run, and the command that fixes it."""
    named = os.environ.get(OPENENV_ENV_VAR)
    where = f"${OPENENV_ENV_VAR}={named} is not an executable file" if named else f"no {OPENENV_VENV}"
    return f"OpenEnv peer not set up ({where}); run `{OPENENV_SETUP}` (builds a separate venv with {OPENENV_PIN})"


def dir_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 2**20


def setup_openenv(venv: Path = OPENENV_VENV) -> dict[str, float]:
    """Build the peer venv: the pinned openenv-core, plus uvloop and httptools (uvicorn's C event loop and parser,
    which the mcpworld server runs on too, so neither side is slowed by pure-Python ones). Reports time and size."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, OPENENV_PIN, "uvloop", "httptools"], check=True)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "mib": dir_mib(venv)}
