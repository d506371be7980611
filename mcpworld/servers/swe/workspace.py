"""Per-episode repository checkouts: shared bare caches, cheap private clones, a warm pool, diffs and patching.

Each source (a git folder or an archive of one) is cloned bare once into $MCPWORLD_HOME/swe/repos. A workspace is
`git clone --shared` of that cache (objects are borrowed, never copied) checked out at the instance's base commit in
a private temp folder. Writing the files is the only cost left, so a small pool prepares checkouts in the background
and `acquire` hands one over in O(1).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
import zipfile
from collections import OrderedDict, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from mcpworld.paths import home

logger = logging.getLogger(__name__)

GIT_ENV = {
    "GIT_AUTHOR_NAME": "mcpworld", "GIT_AUTHOR_EMAIL": "swe@mcpworld.invalid",
    "GIT_COMMITTER_NAME": "mcpworld", "GIT_COMMITTER_EMAIL": "swe@mcpworld.invalid",
    "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GIT_ADVICE": "0",
}
EXCLUDES = "__pycache__/\n*.pyc\n.pytest_cache/\n.mypy_cache/\n*.egg-info/\n.ruff_cache/\n"


class WorkspaceError(RuntimeError):
    """A repository source, commit or patch problem; the message says which and why."""


def git(*args: str, cwd: str | Path | None = None, input: str | None = None, env: dict[str, str] | None = None,
        check: bool = True, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run git without user/system config surprises (no pager, no prompts, fixed identity)."""
    full_env = {**os.environ, **GIT_ENV, "HOME": str(home()), **(env or {})}
    proc = subprocess.run(["git", "-c", "core.hooksPath=/dev/null", "-c", "advice.detachedHead=false", *args],
                          cwd=cwd, input=input, env=full_env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise WorkspaceError(f"git {' '.join(args[:3])} failed: {(proc.stderr or proc.stdout).strip()[:2000]}")
    return proc


# -- repository caches ---------------------------------------------------------------------------------------

class RepoCache:
    """One bare clone per source, made on first use and refreshed when a commit is missing."""

    def __init__(self, root: Path | None = None):
        self.root = root or home() / "swe" / "repos"
        self._locks: dict[str, threading.Lock] = defaultdict(threading.Lock)
        self._ready: dict[str, Path] = {}

    def bare(self, source: str) -> Path:
        """The bare cache for `source`, cloned (or extracted and cloned) on first use."""
        src = Path(source)
        stat = src.stat() if src.exists() else None
        if stat is None:
            raise WorkspaceError(f"repository source {source} does not exist")
        key = hashlib.sha256(f"{src.resolve()}|{stat.st_size if src.is_file() else ''}|"
                             f"{stat.st_mtime_ns if src.is_file() else ''}".encode()).hexdigest()[:16]
        with self._locks[key]:
            if key in self._ready:
                return self._ready[key]
            dest = self.root / f"{src.name.split('.')[0]}-{key}.git"
            if not (dest / "HEAD").is_file():
                self.root.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=".clone-", dir=self.root))
                try:
                    origin = _extract(src, tmp / "x") if src.is_file() else _git_dir(src)
                    git("clone", "--bare", "--quiet", str(origin), str(tmp / "bare.git"))
                    try:
                        os.rename(tmp / "bare.git", dest)
                    except OSError:
                        if not (dest / "HEAD").is_file():  # another process won the race only if it finished
                            raise
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
            self._ready[key] = dest
            return dest

    def commit(self, source: str, ref: str) -> str:
        """The full commit id of `ref` in `source`, fetching from a folder source once if the cache lacks it."""
        bare = self.bare(source)
        proc = git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=bare, check=False)
        if proc.returncode != 0 and Path(source).is_dir():
            git("fetch", "--quiet", str(_git_dir(Path(source))), "+refs/*:refs/*", cwd=bare, check=False)
            proc = git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=bare, check=False)
        if proc.returncode != 0:
            raise WorkspaceError(f"base_commit {ref} not found in repository {source}")
        return proc.stdout.strip()

    def read_file(self, source: str, commit: str, path: str) -> str | None:
        """A file's text at `commit`, or None when it does not exist there."""
        proc = git("show", f"{commit}:{path}", cwd=self.bare(source), check=False)
        return proc.stdout if proc.returncode == 0 else None


def _git_dir(src: Path) -> Path:
    if (src / ".git").exists() or ((src / "HEAD").is_file() and (src / "objects").is_dir()):
        return src
    raise WorkspaceError(f"repository source {src} is not a git repository (no .git folder)")


def _extract(archive: Path, dest: Path) -> Path:
    """Unpack an archive safely (no absolute paths, no `..`, no links out) and find the repository in it."""
    dest.mkdir(parents=True)
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                for name in zf.namelist():
                    target = (dest / name).resolve()
                    if not target.is_relative_to(dest.resolve()):
                        raise WorkspaceError(f"archive {archive}: entry {name!r} points outside the archive")
                zf.extractall(dest)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(dest, filter="data")
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
        raise WorkspaceError(f"archive {archive}: cannot extract: {exc}") from None
    candidates = [dest, *sorted(p for p in dest.iterdir() if p.is_dir())]
    for candidate in candidates:
        try:
            return _git_dir(candidate)
        except WorkspaceError:
            continue
    raise WorkspaceError(f"archive {archive} holds no git repository (expected a .git folder at its top or one "
                         "level down)")


# -- workspaces ----------------------------------------------------------------------------------------------

@dataclass(eq=False)
class Workspace:
    """A private checkout: `root` is the repository the agent edits, `home` its commands' HOME."""

    root: Path
    base_commit: str
    parent: Path
    closed: bool = field(default=False)

    @property
    def home(self) -> Path:
        return self.parent / "home"

    def diff(self) -> str:
        """`git diff` of everything (new files included, build junk excluded) against the base commit.

        Staged into a throwaway index so the agent's own index is left as it was.
        """
        index = self.parent / "submit.index"
        real_index = self.root / ".git" / "index"
        if real_index.is_file():
            shutil.copy2(real_index, index)  # keep its mtime: git then re-reads "racily clean" files
        env = {"GIT_INDEX_FILE": str(index)}
        try:
            git("add", "-A", "--", ".", cwd=self.root, env=env)
            return git("diff", "--cached", "--binary", "--no-color", "--no-ext-diff", self.base_commit,
                       cwd=self.root, env=env).stdout
        finally:
            index.unlink(missing_ok=True)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            shutil.rmtree(self.parent, ignore_errors=True)


def checkout(bare: Path, commit: str, name: str, base_dir: str | None = None) -> Workspace:
    """A fresh private clone of `bare` at `commit`, in its own temp folder."""
    parent = Path(tempfile.mkdtemp(prefix="mcpworld-swe-", dir=base_dir))
    root = parent / name
    try:
        git("clone", "--shared", "--no-checkout", "--quiet", str(bare), str(root))
        git("checkout", "--quiet", "--detach", commit, cwd=root)
        (root / ".git" / "info").mkdir(exist_ok=True)
        (root / ".git" / "info" / "exclude").write_text(EXCLUDES)
        (parent / "home").mkdir()
    except BaseException:
        shutil.rmtree(parent, ignore_errors=True)
        raise
    return Workspace(root=root, base_commit=commit, parent=parent)


def apply_patch(root: Path, patch: str, what: str = "patch") -> None:
    """Apply a unified diff in `root`: `git apply`, then `patch --fuzz` like SWE-bench; raise with both errors."""
    if not patch.endswith("\n"):
        patch += "\n"
    first = git("apply", "--verbose", "--whitespace=nowarn", "-", cwd=root, input=patch, check=False)
    if first.returncode == 0:
        return
    errors = first.stderr.strip()
    if shutil.which("patch"):
        second = subprocess.run(["patch", "--batch", "--fuzz=5", "-p1", "--forward", "--no-backup-if-mismatch"],
                                cwd=root, input=patch, capture_output=True, text=True, timeout=60)
        if second.returncode == 0:
            return
        git("checkout", "--quiet", "--", ".", cwd=root, check=False)  # undo a half-applied fallback
        errors += "\n" + (second.stdout + second.stderr).strip()
    raise WorkspaceError(f"{what} does not apply: {errors[-3000:]}")


class WorkspacePool:
    """Hands out checkouts; keeps `warm` prepared ones per (source, commit) so acquiring costs a dict pop."""

    def __init__(self, cache: RepoCache | None = None, warm: int = 1, base_dir: str | None = None,
                 max_spares: int = 8):
        self.cache = cache or RepoCache()
        self.warm = warm
        self.base_dir = base_dir
        self.max_spares = max_spares  # prepared checkouts kept in all; the least recently used go first
        self._ready: OrderedDict[tuple[Path, str, str], list[Workspace]] = OrderedDict()
        self._lock = threading.Lock()
        self._pending: dict[tuple[Path, str, str], int] = defaultdict(int)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="swe-pool")
        self._closed = False
        self._live: set[Workspace] = set()

    def acquire(self, source: str, commit: str, name: str) -> Workspace:
        """A pristine checkout of `commit`; from the pool when one is ready, else made now."""
        bare = self.cache.bare(source)
        key = (bare, commit, name)
        with self._lock:
            spares = self._ready.setdefault(key, [])
            self._ready.move_to_end(key)
            ws = spares.pop() if spares else None
        if ws is None:
            ws = checkout(bare, commit, name, self.base_dir)
        self._refill(key)
        with self._lock:
            self._live.add(ws)
        return ws

    def release(self, ws: Workspace) -> None:
        with self._lock:
            self._live.discard(ws)
        ws.close()

    def prepare(self, source: str, commit: str, name: str) -> None:
        """Start warming checkouts for an instance before its first episode."""
        self._refill((self.cache.bare(source), commit, name))

    def _refill(self, key: tuple[Path, str, str]) -> None:
        evicted: list[Workspace] = []
        with self._lock:
            self._ready.setdefault(key, [])
            self._ready.move_to_end(key)
            missing = self.warm - len(self._ready[key]) - self._pending[key]
            if self._closed or missing <= 0:
                return
            total = sum(len(v) for v in self._ready.values()) + sum(self._pending.values())
            for other in list(self._ready):  # least recently used first
                while total + missing > self.max_spares and other != key and self._ready[other]:
                    evicted.append(self._ready[other].pop())
                    total -= 1
            missing = min(missing, self.max_spares - total)
            if missing <= 0:
                return
            self._pending[key] += missing
        for ws in evicted:
            self._executor.submit(ws.close)
        for _ in range(missing):
            self._executor.submit(self._make, key)

    def _make(self, key: tuple[Path, str, str]) -> None:
        try:
            ws = checkout(*key, base_dir=self.base_dir)
        except Exception:
            logger.exception("preparing a workspace failed")
            with self._lock:
                self._pending[key] -= 1
            return
        with self._lock:
            self._pending[key] -= 1
            if not self._closed:
                self._ready.setdefault(key, []).append(ws)
                return
        ws.close()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until no checkout is being prepared (benchmarks and tests)."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not any(self._pending.values()):
                    return
            time.sleep(0.005)

    def close_all(self) -> None:
        """Remove every workspace, live or prepared, and stop preparing more."""
        with self._lock:
            self._closed = True
            spare = [ws for lst in self._ready.values() for ws in lst] + list(self._live)
            self._ready.clear()
            self._live.clear()
        self._executor.shutdown(wait=True, cancel_futures=True)
        for ws in spare:
            ws.close()
