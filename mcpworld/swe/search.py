"""`search`: grep file contents or find files by name inside the workspace, without a shell.

Done in Python over the checkout (hidden folders, caches and binary files skipped) so it needs no execution
backend and can never reach outside the repository. Bounded, since the agent writes both the pattern and the
files: a pattern runs on the `regex` engine with the GIL released and a deadline (a backtracking `(a+)+$` once
froze every server of the process), and only regular files are read, never a FIFO or a device (a FIFO once
blocked the search, and its thread, forever).
"""

from __future__ import annotations

import fnmatch
import os
import stat
import time
from pathlib import Path

import regex

from mcpworld.swe.paths import PathRefused, resolve_path, shown

MAX_FILE_BYTES = 2 * 1024 * 1024
SEARCH_TIMEOUT_S = 5.0  # one content search, every file together
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
           ignore_case: bool = False, fixed_strings: bool = False, max_results: int = 100,
           timeout_s: float = SEARCH_TIMEOUT_S) -> str:
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
        flags = regex.IGNORECASE if ignore_case else 0
        try:
            rx = regex.compile(regex.escape(pattern) if fixed_strings else pattern, flags | regex.VERSION0)
        except (regex.error, ValueError) as exc:
            raise SearchError(f"Invalid regular expression {pattern!r}: {exc}. Escape special characters or pass "
                              "fixed_strings=true.") from None
        deadline = time.monotonic() + timeout_s
        try:
            for f in files:
                if len(hits) > max_results:
                    break
                hits += _grep(f, rx, shown(root, f), max_results + 1 - len(hits), deadline)
        except TimeoutError:
            raise SearchError(f"The search for {pattern!r} took longer than {timeout_s:g}s and was stopped: simplify "
                              "the pattern (nested repeats such as (a+)+ backtrack without end), narrow `path` or "
                              "`include`, or pass fixed_strings=true.") from None
    else:
        raise SearchError(f"Unknown kind {kind!r}: use 'content' (grep) or 'files' (find by name).")
    if not hits:
        return f'No matches found for "{pattern}" in {label}'
    more = len(hits) > max_results
    body = "\n".join(hits[:max_results])
    tail = f"\n[more than {max_results} matches; narrow the search with `path` or `include`]" if more else ""
    return f'Found {min(len(hits), max_results)}{"+" if more else ""} matches for "{pattern}" in {label}:\n{body}{tail}'


def _read_regular(path: Path) -> bytes | None:
    """The file's bytes when it is a regular file of at most MAX_FILE_BYTES, opened without blocking (a FIFO
    opened for reading waits for a writer) and checked on the open descriptor; None for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]
    except OSError:
        return None
    finally:
        os.close(fd)


def _grep(path: Path, rx: regex.Pattern[str], label: str, limit: int, deadline: float) -> list[str]:
    data = _read_regular(path)
    if data is None:
        return []
    if b"\0" in data[:1024]:
        return []
    out = []
    for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if rx.search(line, concurrent=True, timeout=left):  # the GIL released while it matches
            out.append(f"{label}:{n}:{line[:240]}")
            if len(out) >= limit:
                break
    return out
