"""Where mcpworld keeps its files: one data directory, overridable with MCPWORLD_HOME."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def home() -> Path:
    """The data directory (registry database, user worlds, run state). Created on first use."""
    path = Path(os.environ.get("MCPWORLD_HOME") or Path.home() / ".mcpworld")
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True, mode=0o700)  # the token and the registry live here: ours alone
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
    try:  # private from its first byte: created 0600, never written readable and narrowed after
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it between our check and now: use theirs
        return path.read_text().strip(), False
    with os.fdopen(fd, "w") as fh:
        fh.write(token)
    return token, True


def forget_token(token: str) -> None:
    """Remove the saved token if it is still `token` (a failed `up` made it and never showed it)."""
    path = home() / "registry.token"
    if path.is_file() and path.read_text().strip() == token:
        path.unlink()


def up_state_file() -> Path:
    """Where a running `mcpworld up` records its pid and URL (so clients find it on any --port)."""
    return home() / "up.json"


def running_up_url() -> str | None:
    """The URL of the `mcpworld up` running for this MCPWORLD_HOME, if its process is alive; else None."""
    import json

    try:
        state = json.loads(up_state_file().read_text())
        pid, url = int(state["pid"]), str(state["url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # a stale file from an `up` that was killed
    except PermissionError:
        pass  # alive, another user's
    return url.rstrip("/")


def runs_dir() -> Path:
    """Where `mcpworld run` writes trajectories when no --output is given: $MCPWORLD_HOME/runs."""
    path = home() / "runs"
    path.mkdir(parents=True, exist_ok=True)
    return path
