"""Where mcpworld keeps its files: one data directory, overridable with MCPWORLD_HOME."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def home() -> Path:
    """The data directory (registry database, user worlds, run state). Created on first use."""
    path = Path(os.environ.get("MCPWORLD_HOME") or Path.home() / ".mcpworld")
    path.mkdir(parents=True, exist_ok=True)
    return path


def user_worlds_dir() -> Path:
    return home() / "worlds"


def registry_token(given: str | None = None) -> tuple[str, bool]:
    """The local secret: given, from MCPWORLD_REGISTRY_TOKEN, saved from an earlier run, or new (saved 0600).

    It authorizes registry writes and the privileged reads of world servers (reference solutions).
    Returns the token and whether it was just created.
    """
    token = given or os.environ.get("MCPWORLD_REGISTRY_TOKEN")
    if token:
        return token, False
    path = home() / "registry.token"
    if path.is_file():
        return path.read_text().strip(), False
    token = secrets.token_urlsafe(24)
    path.write_text(token)
    path.chmod(0o600)
    return token, True
