"""One containment layer for every untrusted command: SWE bash and grading commands, synthesis worker processes.

`Contained(argv, ...)` starts a process the way the rest of mcpworld must start untrusted code:

* **bubblewrap** (when `bwrap` runs here): a fresh user, mount, network, PID, IPC and UTS namespace; a private
  /tmp; tmpfs over /root, /home and the mcpworld data directory (so `registry.token` and other users' files are
  unreadable); the whole filesystem read-only except the folders passed as `rw`; no network (only a loopback of
  its own); `--die-with-parent`, and the namespace's init dies with the outer bwrap, so `kill()` ends every
  descendant, `setsid` and double forks included.
* **a process cap that holds for root**: a pids cgroup (`pids.max`, cgroup v2 or the v1 `pids` controller,
  whichever is writable here). Where neither is: `RLIMIT_NPROC` inside the user namespace for a non-root user (the
  kernel ignores it for root), else a watchdog that counts the process tree every 50 ms and kills it all over the
  cap (best effort: a fast burst can pass the cap briefly). `Contained.cap` says which applied.
* **a scrubbed environment** is the caller's (`env`): the process gets exactly that, never the server's own.

Without bubblewrap, untrusted code is refused (`ContainmentUnavailable`, which says what is lost and how to
install bubblewrap) unless the user opts out: `MCPWORLD_ALLOW_UNCONTAINED=1` or `isolate=False` in code. Even then
the command runs in its own session and process group, that whole group is killed on timeout, and the env is the
scrubbed one — but it runs as the server's user, with the network and the server's files.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

ALLOW_ENV = "MCPWORLD_ALLOW_UNCONTAINED"

INSTALL_HINT = ("install bubblewrap (`apt-get install -y bubblewrap`, `dnf install bubblewrap`, `apk add "
                "bubblewrap`) and make sure it may create namespaces here (`bwrap --unshare-all --die-with-parent "
                "--ro-bind / / true` must succeed; containers may need --privileged or a seccomp/AppArmor profile "
                "that allows user namespaces)")
LOST = ("without it the command would run as the server's own user: it could read the server's secrets "
        "(/proc/<pid>/environ), the registry token and other users' files, reach the network, write outside the "
        "workspace, escape the kill-on-timeout with setsid or a double fork, and (as root) ignore the process cap")


class ContainmentUnavailable(RuntimeError):
    """Untrusted code was about to run without containment, and nobody opted out."""


def allow_uncontained() -> bool:
    return os.environ.get(ALLOW_ENV, "").strip().lower() in ("1", "true", "yes")


@lru_cache(maxsize=1)
def bwrap_exe() -> str | None:
    """bubblewrap's path when it is installed and allowed to create every namespace we use; else None."""
    exe = shutil.which("bwrap")
    if not exe:
        return None
    try:
        done = subprocess.run([exe, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
                               "--dev", "/dev", "--tmpfs", "/tmp", "true"], capture_output=True, timeout=20,
                              env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return exe if done.returncode == 0 else None


def resolve(isolate: bool | None, what: str = "untrusted commands") -> bool:
    """Whether to contain: True (bubblewrap) or False (the user opted out). Raises when neither is possible.

    `isolate`: True demands containment, False opts out, None means contain, or refuse unless
    MCPWORLD_ALLOW_UNCONTAINED=1.
    """
    if isolate is False:
        return False
    if bwrap_exe():
        return True
    if isolate is None and allow_uncontained():
        return False
    raise ContainmentUnavailable(
        f"refusing to run {what} without containment: bubblewrap is missing or cannot create namespaces here. "
        f"{LOST[0].upper()}{LOST[1:]}. To fix: {INSTALL_HINT}. To run anyway, uncontained and at your own risk: set "
        f"{ALLOW_ENV}=1 (or pass isolate=False)."
    )


def data_home() -> str:
    """The mcpworld data directory (without creating it): hidden from contained commands."""
    return os.path.realpath(os.environ.get("MCPWORLD_HOME") or os.path.join(os.path.expanduser("~"), ".mcpworld"))


SECRET_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")  # root-only host files: empty in a host-root sandbox
PRIVATE_ROOTS = ("/etc", "/var", "/opt", "/srv", "/usr/local/etc")  # where the host keeps what others may not read


@lru_cache(maxsize=1)
def private_paths() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(files, folders) under PRIVATE_ROOTS that other users may not read: a host-root sandbox shows them empty.

    Why not a list: the sandbox's uid is the host's own, so every such file was readable in it, and a fixed list
    missed /etc/shadow- (the password hashes' backup), /var/cache/debconf/passwords.dat, pg_hba.conf... The scan
    (about 75 ms) runs once per process; `private_paths.cache_clear()` rescans."""
    import stat

    def mode(path: str) -> int:
        try:
            return os.lstat(path).st_mode
        except OSError:
            return 0  # gone meanwhile: neither a folder nor a file

    files: list[str] = []
    folders: list[str] = []
    for top in PRIVATE_ROOTS:
        for root, dirs, names in os.walk(top):
            depth = root.count("/") - top.count("/")
            for name in list(dirs):
                path = os.path.join(root, name)
                if stat.S_ISDIR(m := mode(path)) and m & 0o005 != 0o005:
                    folders.append(path)
                    dirs.remove(name)
            files += [p for p in (os.path.join(root, n) for n in names)
                      if stat.S_ISREG(m := mode(p)) and not m & 0o004]
            if top != "/etc" and depth >= 2:  # /etc whole; the others' secrets sit near their top
                dirs[:] = []
    return tuple(files), tuple(folders)


def package_dir() -> str:
    """mcpworld's own package folder: its data holds every shipped SWE instance's gold and test patches and every
    world's tasks (references included), so no host-root sandbox (an agent's shell) may read it."""
    import mcpworld  # the package root; core may import its own package

    return os.path.realpath(Path(mcpworld.__file__).parent)


def hidden_paths(hidden: Sequence[str] = ()) -> list[str]:
    """Folders replaced by an empty tmpfs in a host-root sandbox: homes, the data dir (registry.token), mcpworld's
    package (its answers), and the folders among `hidden` (real paths: what the sandbox's creator hides)."""
    paths = ["/root", "/home", data_home(), os.path.realpath(os.path.expanduser("~")), package_dir(),
             "/run",  # the host's Unix sockets (docker.sock, the system D-Bus): the net namespace does not cover them
             *(p for p in hidden if not _under(p, "/tmp"))]  # /tmp is private already
    out: list[str] = []
    for path in paths:
        if path not in out and path != "/" and os.path.isdir(path):
            out.append(path)
    return out


def runtime_paths() -> list[str]:
    """What a contained Python needs to see (read-only): this interpreter, its site-packages, mcpworld's source."""
    source = os.path.dirname(package_dir())
    paths = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, os.path.dirname(sys.executable), source)}
    paths |= {os.path.realpath(p) for p in sys.path if p and ("site-packages" in p or "dist-packages" in p)}
    return sorted(p for p in paths if os.path.isdir(p))


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def bwrap_argv(inner: Sequence[str], *, cwd: str | None = None, rw: Sequence[str] = (), ro: Sequence[str] = (),
               host_root: bool = True, hidden: Sequence[str | Path] = ()) -> list[str]:
    """The bubblewrap command line around `inner`.

    host_root=True: the host's filesystem read-only, minus `hidden_paths()`, with `ro` and `rw` put back.
    `hidden`: more files and folders the command must not read (an SWE instances file holds the gold patches, a
    source repository its future history): folders become empty, files read as empty.
    host_root=False: only system folders, the runtime and `ro` (read-only) and `rw` exist.
    Both: private /tmp, own /proc and /dev, every namespace unshared (so no network), new session.
    """
    exe = bwrap_exe() or "bwrap"
    # --cap-drop ALL: run by root, bubblewrap otherwise keeps every capability inside its user namespace, and
    # `mount -o remount,rw,bind /` then made the host's read-only filesystem writable (issue 28)
    args = [exe, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if host_root:
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        asked = list(dict.fromkeys(os.path.realpath(p) for p in hidden))
        folders_hidden = hidden_paths(asked)
        for path in folders_hidden:
            args += ["--tmpfs", path]
        back = [p for p in dict.fromkeys([*runtime_paths(), *ro]) if os.path.exists(p)]
        for path in back:
            args += ["--ro-bind", path, path]
        for path in folders_hidden:  # a runtime folder that contains the data dir must not bring it back
            if any(_under(path, b) and path != b for b in back):
                args += ["--tmpfs", path]
        for path in ro:  # but what was asked for explicitly stays visible
            if any(_under(path, h) for h in folders_hidden) and os.path.exists(path):
                args += ["--ro-bind", path, path]
        files, folders = private_paths()
        for path in folders:  # but never one that holds, or is, a folder this sandbox is given
            if os.path.isdir(path) and not any(_under(path, b) or _under(b, path) for b in [*back, *rw]):
                args += ["--tmpfs", path]
        for path in dict.fromkeys([*SECRET_FILES, *files, *asked]):  # hidden files read as empty
            if os.path.isfile(path) and not _under(path, "/tmp"):
                args += ["--ro-bind", "/dev/null", path]
    else:
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        keep = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/alternatives",
                "/etc/ld.so.cache", "/etc/localtime", *runtime_paths(), *ro]
        seen: list[str] = []
        for path in sorted(dict.fromkeys(keep), key=len):
            if not path or any(_under(path, s) for s in seen) or not os.path.lexists(path):
                continue
            seen.append(path)
            if os.path.islink(path) and path.count("/") == 1:  # merged-/usr systems: /lib -> usr/lib
                args += ["--symlink", os.readlink(path), path]
            else:
                args += ["--ro-bind", path, path]
    for path in rw:
        args += ["--bind", path, path]
    if cwd:
        args += ["--chdir", cwd]
    return [*args, *inner]


# -- the process cap -------------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _pids_parent() -> tuple[str, str] | None:
    """A writable pids cgroup folder to make per-command children in, and which kind: ('v2'|'v1', path)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    mine = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            mine[c] = path
    candidates = []
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if "" in mine and os.path.exists(os.path.join(root, "cgroup.controllers")):
            candidates.append(("v2", os.path.join(root, mine[""].lstrip("/"))))
    if "pids" in mine:
        candidates.append(("v1", os.path.join("/sys/fs/cgroup/pids", mine["pids"].lstrip("/"))))
    for kind, parent in candidates:
        probe = os.path.join(parent, f"mcpworld-probe-{os.getpid()}-{uuid.uuid4().hex[:6]}")
        try:
            os.mkdir(probe)
        except OSError:
            continue
        try:
            ok = os.path.exists(os.path.join(probe, "pids.max"))
            if ok:
                with open(os.path.join(probe, "pids.max"), "w") as f:
                    f.write("100")
        except OSError:
            ok = False
        finally:
            try:
                os.rmdir(probe)
            except OSError:
                pass
        if ok:
            return kind, parent
    return None


def cap_kind() -> str:
    """How a process cap is enforced here: cgroup-v2 | cgroup-v1 | rlimit (not for root) + watchdog."""
    parent = _pids_parent()
    if parent:
        return f"cgroup-{parent[0]}"
    return "watchdog" if os.geteuid() == 0 else "rlimit"


_live_cgroups: set[_PidsCgroup] = set()
_swept: list[bool] = []


def sweep_cgroups() -> None:
    """Remove the empty per-command cgroups of mcpworld processes that are gone (a crash, a kill -9)."""
    parent = _pids_parent()
    if parent is None:
        return
    try:
        names = os.listdir(parent[1])
    except OSError:
        return
    for name in names:
        owner = name.split("-")[1] if name.startswith("mcpworld-") and name.count("-") >= 2 else ""
        path = os.path.join(parent[1], name)
        try:
            if owner.isdigit() and not os.path.exists(f"/proc/{owner}") and time.time() - os.stat(path).st_mtime > 60:
                os.rmdir(path)  # only an empty cgroup can be removed
        except OSError:
            pass


@atexit.register
def _remove_live_cgroups() -> None:
    for cgroup in list(_live_cgroups):
        cgroup.remove()


class _PidsCgroup:
    def __init__(self, limit: int):
        kind_parent = _pids_parent()
        assert kind_parent is not None
        if not _swept:
            _swept.append(True)
            sweep_cgroups()
        self.path = os.path.join(kind_parent[1], f"mcpworld-{os.getpid()}-{uuid.uuid4().hex[:10]}")
        os.mkdir(self.path)
        _live_cgroups.add(self)
        with open(os.path.join(self.path, "pids.max"), "w") as f:
            f.write(str(limit))
        self.procs = os.path.join(self.path, "cgroup.procs")

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in Path(self.procs).read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self) -> None:
        kill_file = os.path.join(self.path, "cgroup.kill")
        if os.path.exists(kill_file):
            try:
                Path(kill_file).write_text("1")
            except OSError:
                pass
        for _ in range(200):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.005)

    def remove(self) -> None:
        _live_cgroups.discard(self)
        self.kill_all()
        for _ in range(200):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid`, found by walking /proc's parent links."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


# -- the process ------------------------------------------------------------------------------------------------

class Contained:
    """An untrusted process, started contained (or, opted out, in its own session); `kill()` ends all of it.

    `inner`: the command. `contain`: from `resolve()`. `rw`/`ro`: folders it may write / read (bubblewrap).
    `hidden`: files and folders it must not read, beyond what every sandbox hides (`bwrap_argv`).
    `max_procs`: the process cap (None: none). `rlimits`: (resource, soft, hard) set in the child before exec.
    Other keywords go to `subprocess.Popen` (stdin, stdout, stderr...). `env` is the child's whole environment.
    """

    def __init__(self, inner: Sequence[str], *, contain: bool, env: dict[str, str], cwd: str | Path | None = None,
                 rw: Sequence[str] = (), ro: Sequence[str] = (), host_root: bool = True, max_procs: int | None = None,
                 rlimits: Sequence[tuple[int, int, int]] = (), hidden: Sequence[str | Path] = (), **popen: Any):
        import resource

        self.contained = contain
        self.cgroup: _PidsCgroup | None = None
        self.cap = "none"
        if max_procs is not None and _pids_parent() is not None:
            try:
                self.cgroup = _PidsCgroup(max_procs)
                self.cap = cap_kind()
            except OSError:
                self.cgroup = None
        limits = list(rlimits)
        # Without a pids cgroup: inside bubblewrap's user namespace RLIMIT_NPROC counts that namespace's processes
        # (set by the wrapper below), but the kernel ignores it for root; outside it would count every process
        # of the user. So root, or no namespace, gets the watchdog instead (a counting poll: best effort).
        watch = max_procs is not None and self.cgroup is None and (os.geteuid() == 0 or not contain)
        if max_procs is not None and self.cgroup is None:
            self.cap = "watchdog" if watch else "rlimit"
        procs_file = self.cgroup.procs.encode() if self.cgroup else None

        def preexec() -> None:  # between fork and exec: raw syscalls only
            if procs_file:
                fd = os.open(procs_file, os.O_WRONLY)
                os.write(fd, b"0")
                os.close(fd)
            for res, soft, hard in limits:
                resource.setrlimit(res, (soft, hard))

        argv = list(inner)
        if contain:
            if max_procs is not None and self.cgroup is None:
                argv = ["/bin/sh", "-c", f'ulimit -u {int(max_procs)} 2>/dev/null; exec "$@"', "sh", *argv]
            argv = bwrap_argv(argv, cwd=str(cwd) if cwd else None, rw=rw, ro=ro, host_root=host_root,
                              hidden=hidden)
        try:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, start_new_session=True, preexec_fn=preexec,
                                         **popen)
        except BaseException:
            if self.cgroup:
                self.cgroup.remove()
            raise
        self.pid = self.proc.pid
        self.over_cap = False
        self._done = threading.Event()
        if watch:
            threading.Thread(target=self._watch, args=(max_procs,), daemon=True).start()

    def _watch(self, cap: int) -> None:
        """Root without a pids cgroup: count the tree and kill it all once it passes the cap."""
        while not self._done.is_set() and self.proc.poll() is None:
            try:
                count = 1 + len(descendants(self.pid))
            except OSError:
                count = 0
            if count > cap:
                self.over_cap = True
                self.kill()
                return
            self._done.wait(0.05)

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout=timeout)

    def poll(self) -> int | None:
        return self.proc.poll()

    def kill(self) -> None:
        """SIGKILL the process, its process group, its cgroup and (uncontained) every descendant still found."""
        strays = descendants(self.pid) if self.proc.poll() is None and not self.contained else []
        _killpg(self.pid)
        _kill(self.pid)  # bubblewrap: the namespace's init dies with it (--die-with-parent), and with it the rest
        for pid in strays:  # uncontained: children that moved to another session or group
            _kill(pid)
        if self.cgroup:
            self.cgroup.kill_all()

    def close(self) -> None:
        """After the command: kill whatever it left behind, reap it, remove its cgroup."""
        self._done.set()
        if self.proc.poll() is None or not self.contained:
            _killpg(self.pid)
        if self.proc.poll() is None:
            self.kill()
        self.proc.wait()
        if self.cgroup:
            self.cgroup.remove()
            self.cgroup = None


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, step: float = 0.02) -> bool:
    """Poll `predicate` until it holds or `timeout` passes (for tests and cleanup): no fixed sleeps."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
