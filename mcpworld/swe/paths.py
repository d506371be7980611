"""Agent-given paths to real paths inside one workspace, or a refusal that says why.

Every tool that touches files (editor, search, LSP) goes through `resolve_path`, so `..`, absolute paths elsewhere
and symbolic links pointing out of the repository are refused in one place.
"""

from __future__ import annotations

import os
from pathlib import Path


class PathRefused(ValueError):
    """A path the agent may not use; the message is shown to the agent as is."""


def resolve_path(root: Path, path: object, *, write: bool = False) -> Path:
    """The real path for `path` (absolute, or relative to `root`), guaranteed inside `root`.

    Symbolic links are resolved before the check, so a link inside the repository that points outside is refused.
    Writes into `.git` are refused too: the repository's history is not the agent's to edit.
    """
    if not isinstance(path, str) or not path.strip():
        raise PathRefused("Parameter `path` is required: an absolute path inside the repository "
                          f"(the repository is at {root}).")
    if "\0" in path:
        raise PathRefused(f"The path {path!r} contains a NUL byte.")
    real_root = Path(os.path.realpath(root))
    given = Path(path) if os.path.isabs(path) else root / path
    lexical = Path(os.path.normpath(given))
    if not (lexical == root or lexical.is_relative_to(root) or lexical.is_relative_to(real_root)):
        raise PathRefused(f"The path {path} is outside the repository {root}; only paths inside it can be used.")
    real = Path(os.path.realpath(lexical))
    if not (real == real_root or real.is_relative_to(real_root)):
        raise PathRefused(f"The path {path} is a symbolic link (or goes through one) to {real}, outside the "
                          f"repository {root}; refused.")
    if write and ".git" in real.relative_to(real_root).parts:
        raise PathRefused(f"The path {path} is inside .git; the repository's git data cannot be edited.")
    return real


def shown(root: Path, real: Path) -> str:
    """How a real path is shown to the agent: under the workspace root as the agent knows it."""
    real_root = Path(os.path.realpath(root))
    try:
        return str(root / real.relative_to(real_root)) if real != real_root else str(root)
    except ValueError:
        return str(real)
