"""`search`: grep file contents or find files by name inside the workspace, without a shell.

Done in Python over the checkout (hidden folders, caches and binary files skipped) so it needs no execution
backend and can never reach outside the repository.
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

from mcpworld.swe.paths import PathRefused, resolve_path, shown

MAX_FILE_BYTES = 2 * 1024 * 1024
SKIP_DIRS = {"__pycache__", "node_modules", ".git", ".tox", ".venv", "venv", ".mypy_cache", ".pytest_cache"}


class SearchError(ValueError):
    """A bad pattern or path; the message is shown to the agent."""


def _files(top: Path, real_root: Path) -> list[Path]:
    """Files under `top`; links whose target is outside the repository are skipped (os.walk never follows
    folder links)."""
    if top.is_file():
        return [top]
    out = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
        for f in sorted(files):
            path = Path(folder, f)
            if f.startswith(".") or (path.is_symlink() and not Path(os.path.realpath(path)).is_relative_to(real_root)):
                continue
            out.append(path)
    return out


def search(root: Path, pattern: str, path: str | None = None, kind: str = "content", include: str | None = None,
           ignore_case: bool = False, fixed_strings: bool = False, max_results: int = 100) -> str:
    """Matches as `path:line:text` (kind=content, a regex) or file paths (kind=files, a glob on the name)."""
    if not pattern:
        raise SearchError("Parameter `pattern` is required.")
    try:
        top = resolve_path(root, path or str(root))
    except PathRefused as exc:
        raise SearchError(str(exc)) from None
    label = shown(root, top)
    if not top.exists():
        raise SearchError(f"The path {label} does not exist. Please provide a valid path.")
    max_results = max(1, min(int(max_results), 1000))
    real_root = Path(os.path.realpath(root))
    files = [f for f in _files(top, real_root) if include is None or fnmatch.fnmatch(f.name, include)]
    hits: list[str] = []
    if kind == "files":
        for f in files:
            rel = str(f.relative_to(real_root))
            if fnmatch.fnmatch(f.name, pattern) or fnmatch.fnmatch(rel, pattern):
                hits.append(shown(root, f))
    elif kind == "content":
        flags = re.IGNORECASE if ignore_case else 0
        try:
            rx = re.compile(re.escape(pattern) if fixed_strings else pattern, flags)
        except re.error as exc:
            raise SearchError(f"Invalid regular expression {pattern!r}: {exc}. Escape special characters or pass "
                              "fixed_strings=true.") from None
        for f in files:
            if len(hits) > max_results:
                break
            hits += _grep(f, rx, shown(root, f), max_results + 1 - len(hits))
    else:
        raise SearchError(f"Unknown kind {kind!r}: use 'content' (grep) or 'files' (find by name).")
    if not hits:
        return f'No matches found for "{pattern}" in {label}'
    more = len(hits) > max_results
    body = "\n".join(hits[:max_results])
    tail = f"\n[more than {max_results} matches; narrow the search with `path` or `include`]" if more else ""
    return f'Found {min(len(hits), max_results)}{"+" if more else ""} matches for "{pattern}" in {label}:\n{body}{tail}'


def _grep(path: Path, rx: re.Pattern[str], label: str, limit: int) -> list[str]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return []
        data = path.read_bytes()
    except OSError:
        return []
    if b"\0" in data[:1024]:
        return []
    out = []
    for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if rx.search(line):
            out.append(f"{label}:{n}:{line[:240]}")
            if len(out) >= limit:
                break
    return out
