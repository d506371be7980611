"""Where mcpworld keeps its files: one data directory, overridable with MCPWORLD_HOME."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """The data directory (registry database, user worlds, run state). Created on first use."""
    path = Path(os.environ.get("MCPWORLD_HOME") or Path.home() / ".mcpworld")
    path.mkdir(parents=True, exist_ok=True)
    return path


def user_worlds_dir() -> Path:
    return home() / "worlds"
