"""Per-episode repository checkouts: shared bare caches, cheap private clones, a warm pool, diffs and patching.

Each source (a git folder or an archive of one) is cloned bare once into $MCPWORLD_HOME/swe/repos. A workspace is
`git clone --shared` of that cache (objects are borrowed, never copied) checked out at the instance's base commit in
a private temp folder. Writing the files is the only cost left, so a small pool prepares checkouts in the background
and `acquire` hands one over in O(1).
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
import threading
import zipfile
from collections import OrderedDict, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from mcpworld.core.paths import home

logger = logging.getLogger(__name__)

GIT_ENV = {
    "GIT_AUTHOR_NAME": "mcpworld", "GIT_AUTHOR_EMAIL": "swe@mcpworld.invalid",
    "GIT_COMMITTER_NAME": "mcpworld", "GIT_COMMITTER_EMAIL": "swe@mcpworld.invalid",
    "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GIT_ADVICE": "0",
    # no system or user config, no system attributes: only the repository's own config is read, and defused below
    "GIT_CONFIG_SYSTEM": os.devnull, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_ATTR_NOSYSTEM": "1",
    "GIT_PAGER": "cat", "GIT_EDITOR": "true", "GIT_SEQUENCE_EDITOR": "true",
}
EXCLUDES = "__pycache__/\n*.pyc\n.pytest_cache/\n.mypy_cache/\n*.egg-info/\n.ruff_cache/\n"
# Command-line config outranks the repository's, so these hold whatever .git/config (which the agent can write)
# says. Each names a setting that makes git run a program during the commands the server uses.
SAFE_CONFIG = (
    ("core.fsmonitor", "false"),             # a hook command run by add/diff/status/checkout
    ("core.hooksPath", os.devnull),          # post-checkout, pre-commit, reference-transaction, post-index-change...
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    ("core.sshCommand", "false"),
    ("core.alternateRefsCommand", "true"),   # run on fetches from repositories with alternates
    ("credential.helper", ""),               # an empty value clears the helper list
    ("protocol.allow", "never"),             # no ext::, ssh, http: the server only ever reads local paths
    ("protocol.file.allow", "always"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("commit.gpgSign", "false"),             # gpg.program would run otherwise
    ("tag.gpgSign", "false"),
    ("gc.auto", "0"),                        # no background gc/maintenance processes
    ("maintenance.auto", "false"),
    ("advice.detachedHead", "false"),
)
# Subcommands that diff: an external diff (diff.external, diff.<driver>.command) or a textconv filter could run.
# Empty values for those settings make git fail ("cannot run"), so they are switched off by flags instead.
_DIFFING = {"diff", "show", "log", "format-patch"}
_FILTER_KEY = re.compile(r"^filter\.(.+)\.(clean|smudge|process|required)$", re.IGNORECASE)
_git_home: list[str] = []


class WorkspaceError(RuntimeError):
    """A repository source, commit or patch problem; the message says which and why."""


def _empty_home() -> str:
    """A private empty directory for git's HOME/XDG_CONFIG_HOME (no ~/.gitconfig, ~/.config/git/attributes)."""
    if not _git_home:
        path = tempfile.mkdtemp(prefix="mcpworld-git-home-")
        atexit.register(shutil.rmtree, path, True)
        _git_home.append(path)
    return _git_home[0]


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """git's whole environment: PATH, an empty HOME, a locale, fixed identity. Nothing else from ours (no GIT_*
    variables, no tokens or keys), so even a program git were made to run would learn no secret."""
    env = {"PATH": os.environ.get("PATH") or os.defpath, "HOME": _empty_home(), "XDG_CONFIG_HOME": _empty_home(),
           "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", **GIT_ENV}
    if os.environ.get("TMPDIR"):
        env["TMPDIR"] = os.environ["TMPDIR"]
    return {**env, **(extra or {})}


def _config_env(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """GIT_CONFIG_COUNT/KEY/VALUE: command-line config without `-c`'s parsing of '=' and '.' in names."""
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env


def _repo_args(cwd: str | Path | None) -> list[str]:
    """For a checkout, name its git dir and work tree explicitly (a `core.worktree` in its config can't move it)."""
    if cwd is not None and (Path(cwd) / ".git").exists():
        return [f"--git-dir={Path(cwd) / '.git'}", f"--work-tree={cwd}"]
    return []


def _filter_overrides(repo: list[str], cwd: str | Path | None, env: dict[str, str]) -> list[tuple[str, str]]:
    """Empty every filter driver (`filter.<name>.clean/smudge/process`) the repository's config defines: a
    .gitattributes line `* filter=<name>` would otherwise run it on add/checkout/diff/apply."""
    if cwd is None:
        return []
    proc = subprocess.run(["git", *repo, "config", "--null", "--list"], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=30)
    drivers: dict[str, None] = {}
    for entry in proc.stdout.split(b"\0"):
        key = entry.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
        match = _FILTER_KEY.match(key)
        if match:
            drivers[match.group(1)] = None
    return [(f"filter.{name}.{var}", "false" if var == "required" else "")
            for name in drivers for var in ("clean", "smudge", "process", "required")]


def git(*args: str, cwd: str | Path | None = None, input: str | None = None, env: dict[str, str] | None = None,
        check: bool = True, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run git as the server's own tool, whatever the repository's config says (the only way the SWE server runs
    git: workspace, grading, builder, world models).

    A scrubbed environment (`git_env`); no system/user config; `SAFE_CONFIG` and emptied filter drivers outrank
    the repository's config; diffs without external diff or textconv; no pager, prompts or stdin; an explicit
    git dir and work tree for checkouts. `env` adds trusted variables (GIT_INDEX_FILE, fixed dates).
    """
    base_env = git_env(env)
    repo = _repo_args(cwd)
    pairs = [*SAFE_CONFIG, *_filter_overrides(repo, cwd, base_env)]
    command = list(args)
    if command and command[0] in _DIFFING:
        command[1:1] = ["--no-ext-diff", "--no-textconv"]
    proc = subprocess.run(["git", "--no-pager", *repo, *command], cwd=cwd, input=input, env={**base_env,
                          **_config_env(pairs)}, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL if input is None else None)
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

    def at(self, source: str, commit: str) -> Path:
        """A bare repository holding only `commit` and its history (one branch, no tags, no other refs): what
        workspaces clone, so nothing after the base commit (the fix, later tags) is in their objects."""
        bare = self.bare(source)
        dest = self.root / f"{bare.name.removesuffix('.git')}-at-{commit[:16]}.git"
        with self._locks[str(dest)]:
            if (dest / "HEAD").is_file():
                return dest
            tmp = Path(tempfile.mkdtemp(prefix=".at-", dir=self.root))
            try:
                ref = f"refs/mcpworld/base-{commit}"
                git("update-ref", ref, commit, cwd=bare)
                git("init", "--bare", "--quiet", "--initial-branch=main", str(tmp / "at.git"))
                git("fetch", "--quiet", "--no-tags", str(bare), f"{ref}:refs/heads/main", cwd=tmp / "at.git")
                git("update-ref", "-d", ref, cwd=bare)
                try:
                    os.rename(tmp / "at.git", dest)
                except OSError:
                    if not (dest / "HEAD").is_file():
                        raise
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
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
    left_out: list[str] = field(default_factory=list)  # what the last diff left out (special or huge files)

    @property
    def home(self) -> Path:
        return self.parent / "home"

    def diff(self) -> str:
        """`git diff` of everything (new files included, build junk excluded) against the base commit.

        Bounded: files that are not regular (a FIFO, a device) or larger than MAX_DIFF_FILE_BYTES (a sparse 1 GiB
        file once took git 38 s and 1 GB) are left out and listed in `left_out`; a diff over MAX_PATCH_BYTES is
        refused with what to remove.

        Staged into a throwaway index so the agent's own index is left as it was. The throwaway index lives in a
        folder of the server's own (the workspace's parent is the sandbox's to write: a link planted there once
        made this copy write, or read, any host file as root), and the agent's index is read only when it is a
        regular file, never through a link.
        """
        private = Path(tempfile.mkdtemp(prefix="mcpworld-index-"))  # 0700, the server's
        index = private / "index"
        self.left_out = _unstageable(self.root)
        try:
            _copy_regular(self.root / ".git" / "index", index)
            env = {"GIT_INDEX_FILE": str(index)}
            git("add", "-A", "--", ".", *(f":(exclude,literal){p}" for p in self.left_out), cwd=self.root, env=env)
            patch = git("diff", "--cached", "--binary", "--no-color", "--no-ext-diff", self.base_commit,
                        cwd=self.root, env=env).stdout
        finally:
            shutil.rmtree(private, ignore_errors=True)
        if len(patch) > MAX_PATCH_BYTES:
            raise WorkspaceError(f"the change is {len(patch) / 2**20:.1f} MiB as a patch; at most "
                                 f"{MAX_PATCH_BYTES // 2**20} MiB can be submitted: remove generated or binary files")
        return patch

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            _BORROWED.pop(self.root.resolve(), None)
            shutil.rmtree(self.parent, ignore_errors=True)


MAX_INDEX_BYTES = 256 * 1024 * 1024
MAX_DIFF_FILE_BYTES = 8 * 1024 * 1024  # a file larger than this is no source change: left out of the diff
MAX_PATCH_BYTES = 16 * 1024 * 1024


def _unstageable(root: Path) -> list[str]:
    """Worktree paths a diff leaves out: anything but a regular file or a link (FIFOs, sockets, devices), and
    regular files over MAX_DIFF_FILE_BYTES. Read with lstat: nothing is opened, no link followed."""
    out: list[str] = []
    for folder, dirs, files in os.walk(root):  # os.walk does not follow links to folders
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                continue  # git keeps a link as a link
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_DIFF_FILE_BYTES:
                out.append(os.path.relpath(path, root))
    return sorted(out)


def _copy_regular(source: Path, target: Path) -> None:
    """Copy `source` to `target` (with its times: git then re-reads "racily clean" files) only if it is a regular
    file reached without following a link; anything else (missing, a link, a FIFO, a device, too large) is not
    copied, and git builds a fresh index instead."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_INDEX_BYTES:
            return
        with open(target, "xb") as out:
            while chunk := os.read(fd, 1 << 20):
                out.write(chunk)
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
    finally:
        os.close(fd)


_BORROWED: dict[Path, tuple[str, ...]] = {}  # a workspace's root -> the object folders its clone borrows


def borrowed_objects(path: Path) -> tuple[str, ...]:
    """The object folders `checkout` cloned the workspace holding `path` to borrow, as the server recorded them:
    what a sandboxed command may see read-only. Never read from the workspace, whose alternates file the agent
    can write (it once chose its own mounts that way: the registry token, other episodes, the host's /proc)."""
    path = path.resolve()
    for candidate in (path, *path.parents):
        if candidate in _BORROWED:
            return _BORROWED[candidate]
    return ()


def checkout(bare: Path, commit: str, name: str, base_dir: str | None = None) -> Workspace:
    """A fresh private clone of `bare` at `commit`, in its own temp folder."""
    parent = Path(tempfile.mkdtemp(prefix="mcpworld-swe-", dir=base_dir))
    root = parent / name
    try:
        git("clone", "--shared", "--no-checkout", "--quiet", str(bare), str(root))
        git("checkout", "--quiet", "--detach", commit, cwd=root)
        git("remote", "remove", "origin", cwd=root)  # no remote-tracking refs: only HEAD at the base commit
        for name in ("logs", "packed-refs", "FETCH_HEAD", "ORIG_HEAD"):  # no reflog naming where it came from
            target = root / ".git" / name
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
        (root / ".git" / "info").mkdir(exist_ok=True)
        (root / ".git" / "info" / "exclude").write_text(EXCLUDES)
        (parent / "home").mkdir()
        try:  # read once, before any command runs in the workspace
            alternates = (root / ".git" / "objects" / "info" / "alternates").read_text().splitlines()
        except OSError:
            alternates = []
        _BORROWED[root.resolve()] = tuple(line.strip() for line in alternates if line.strip().startswith("/"))
    except BaseException:
        shutil.rmtree(parent, ignore_errors=True)
        raise
    return Workspace(root=root, base_commit=commit, parent=parent)


_PATCH_PATHS = re.compile(r"^(?:diff --git (.+)|--- (.+)|\+\+\+ (.+)|(?:rename|copy) (?:from|to) (.+))$", re.MULTILINE)


def _unquote(path: str) -> str:
    """A path as git or diff wrote it: C-quoted ("a/\\056git/x") or plain, then without a tab-separated date."""
    path = path.strip()
    if path.startswith('"'):
        end = path.find('"', 1)
        while end > 0 and path[end - 1] == "\\":
            end = path.find('"', end + 1)
        raw = path[1:end if end > 0 else None]
        try:
            return raw.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1").decode(
                "utf-8", "replace")
        except (UnicodeError, ValueError):
            return raw
    return path.split("\t", 1)[0]


def patch_path_problems(patch: str) -> list[str]:
    """Paths in a patch that must never be written: anything under a `.git` folder (its config could make git
    run commands), absolute paths and `..` escapes. `git apply` refuses some of these, `patch` not all.

    `---`/`+++` lines are checked for `.git` only: inside a hunk they may be content ("-- comment" removed).
    """
    bad = []
    for match in _PATCH_PATHS.finditer(patch):
        text = next(g for g in match.groups() if g is not None)
        header = match.group(2) is None and match.group(3) is None  # diff --git / rename / copy: never content
        paths = [text] if not match.group(1) else re.findall(r'"(?:[^"\\]|\\.)*"|\S+', text)
        for path in map(_unquote, paths):
            if path == "/dev/null":
                continue
            parts = re.split(r"[/\\]", path)
            dotgit = {part.rstrip(". ").lower() for part in parts if part not in (".", "..")}  # ".GIT." too
            if ".git" in dotgit or (header and (path.startswith(("/", "\\")) or ".." in parts)):
                bad.append(path)
    return sorted(set(bad))


def apply_patch(root: Path, patch: str, what: str = "patch") -> None:
    """Apply a unified diff in `root`: `git apply`, then `patch --fuzz` like SWE-bench; raise with both errors.

    A patch that touches `.git/` (or escapes the checkout) is refused before anything is applied.
    """
    if not patch.endswith("\n"):
        patch += "\n"
    refused = patch_path_problems(patch)
    if refused:
        raise WorkspaceError(f"{what} refused: it writes outside the repository's files ({', '.join(refused[:5])})")
    first = git("apply", "--verbose", "--whitespace=nowarn", "-", cwd=root, input=patch, check=False)
    if first.returncode == 0:
        return
    errors = first.stderr.strip()
    if shutil.which("patch"):
        # -u: read only unified hunks (never an ed script, which `patch` would hand to ed); git's clean env
        second = subprocess.run(["patch", "-u", "--batch", "--fuzz=5", "-p1", "--forward",
                                 "--no-backup-if-mismatch"], cwd=root, input=patch, capture_output=True, text=True,
                                timeout=60, env=git_env())
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
        self._discarded: set[Workspace] = set()

    def acquire(self, source: str, commit: str, name: str, refill: bool = True) -> Workspace:
        """A pristine checkout of `commit`; from the pool when one is ready, else made now.

        `refill=False` leaves preparing the next one to the caller (`prepare`), e.g. after a test run, so the
        background checkout does not compete with it for the CPU."""
        bare = self.cache.at(source, commit)
        key = (bare, commit, name)
        with self._lock:
            spares = self._ready.setdefault(key, [])
            self._ready.move_to_end(key)
            ws = spares.pop() if spares else None
        if ws is None:
            ws = checkout(bare, commit, name, self.base_dir)
        if refill:
            self._refill(key)
        with self._lock:
            self._live.add(ws)
        return ws

    def release(self, ws: Workspace) -> None:
        with self._lock:
            self._live.discard(ws)
        ws.close()

    def discard(self, ws: Workspace) -> None:
        """Release `ws` and remove its files in the background (grading does not wait for the deletion)."""
        with self._lock:
            self._live.discard(ws)
            if self._closed:
                ws.close()
                return
            self._discarded.add(ws)
        self._executor.submit(self._remove, ws)

    def _remove(self, ws: Workspace) -> None:
        ws.close()
        with self._lock:
            self._discarded.discard(ws)

    def prepare(self, source: str, commit: str, name: str) -> None:
        """Start warming checkouts for an instance before its first episode."""
        self._refill((self.cache.at(source, commit), commit, name))

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
            spare = [ws for lst in self._ready.values() for ws in lst] + list(self._live) + list(self._discarded)
            self._ready.clear()
            self._live.clear()
            self._discarded.clear()
        self._executor.shutdown(wait=True, cancel_futures=True)
        for ws in spare:
            ws.close()
