"""Peer frameworks measured beside mcpworld, each in its own virtual environment (never in the project's).

`openenv-core` pulls gradio and fastmcp 3, which would break the project's `mcp` pin, so the OpenEnv peer runs
under `.bench/openenv-venv` (built by `python -m benchmarks.peers openenv --setup`) or `$MCPWORLD_OPENENV_PYTHON`.
mcpworld itself goes in there too (editable, no dependencies, plus the ORM it runs on), so one peer environment
can run our own `WorldRuntime` behind OpenEnv's stack: the serving stacks compared on equal environment code.
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
RUNTIME_DEPS = ("sqlmodel", "SQLAlchemy")  # what mcpworld.worlds.runtime needs beyond openenv's (mcp, pydantic)
RUNTIME_CHECK = "from mcpworld.worlds.host import load_runtime; load_runtime('airline')"


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


def has_runtime(python: Path) -> bool:
    """Whether `python` can load the airline world's runtime (run outside the checkout: the install, not the cwd)."""
    done = subprocess.run([str(python), "-c", RUNTIME_CHECK], cwd="/", capture_output=True, timeout=300)
    return done.returncode == 0


def runtime_requirements() -> list[str]:
    """The ORM packages at the versions this (the project's) venv runs, so both sides run the same tool code."""
    from importlib.metadata import version

    return [f"{name}=={version(name)}" for name in RUNTIME_DEPS]


def setup_openenv(venv: Path = OPENENV_VENV) -> dict[str, float]:
    """Build or complete the peer venv (idempotent: what is there stays): the pinned openenv-core, uvloop and
    httptools (uvicorn's C event loop and parser, which the mcpworld server runs on too, so neither side is slowed
    by pure-Python ones), aiohttp (the load generator's client for our side), then mcpworld (editable,
    `--no-deps`) and the ORM its runtime needs. Reports the seconds of each part and the venv's size; raises if
    the runtime still does not load."""
    t = time.perf_counter()
    python = venv / "bin" / "python"
    if not python.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    # aiohttp: benchmarks.loadgen's client, so one generator there loads both servers in turn (openenv_load --pairs)
    subprocess.run([*pip, OPENENV_PIN, "uvloop", "httptools", "aiohttp"], check=True)  # a no-op once satisfied
    t_runtime = time.perf_counter()
    if not has_runtime(python):
        subprocess.run([*pip, "--no-deps", "-e", str(ROOT)], check=True)
        subprocess.run([*pip, *runtime_requirements()], check=True)
        if not has_runtime(python):
            raise RuntimeError(f"{python} still cannot run `{RUNTIME_CHECK}`; run it there to see why")
    done = time.perf_counter()
    return {"seconds": done - t, "runtime_seconds": done - t_runtime, "mib": dir_mib(venv)}
