"""Resource-limited worker processes for untrusted code (synthesized worlds, imported tool implementations).

Why a zygote: importing SQLModel takes about a second on a small machine, and a tool call must cost
milliseconds. So each `Worker` starts one `python -I zygote.py` process (inside bubblewrap when it works, else
`unshare -rn`, else plain) with a scrubbed environment and address-space, file-size and open-file limits;
it pre-imports the trusted harness, then forks one child per job. The child gets its own CPU limit, its own
temporary directory as cwd and HOME, and its stdout/stderr captured; the zygote kills it (and its process
group) when the wall-clock limit passes. A zygote runs the trusted harness and, when warmed (`warm=`), the one
package it was started for (a synthesized or imported world's code, so its jobs fork with it imported): that
code runs under the same containment and limits as the jobs, and a warm zygote serves only its own package
(`shared_worker` keys zygotes by what they warm), so one world's code never sees another's jobs. If a zygote
dies, the next job starts a new one.

Warm zygotes are pooled (`WorkerPool`, `POOL`): at most `MCPWORLD_WORKER_POOL` (default 32) of them live at once, so
a server with a thousand imported worlds holds the zygotes of the worlds in use, not one per world. A world's
zygote starts on its first job (a cold call); when one more would pass the bound, the least recently used idle
zygote is closed (its world's next job starts it again). A zygote running a job is never closed for another.

A job may name a `session` (an episode): it then runs in that session's long-lived child of the zygote, which keeps
what the job left loaded (an AWM episode's database) for the session's next job, under the same limits, and costs no
fork. Sessions are bounded the same way (at most the pool's size live, least recently used ended first) and end with
`Worker.end` (the episode closed), with their zygote, or when the zygote replaces one (zygote.py says when).

A worker may run another Python than this one (`Interpreter`: AWM's scenarios run under AWM's own library versions,
`importers.awm_runtime`): the same zygote file, started the same way under the same containment and limits, with the
interpreter's folders visible read-only and, on its path, a folder holding only the `mcpworld` package (the harness
imports the standard library only), never this Python's site-packages.

Limits (defaults in `Limits`): CPU seconds per job, wall-clock seconds per job, address space (memory) for
every process, the largest file a job may write, open files. Network: none under bubblewrap or unshare
(a fresh network namespace); with neither available the environment is scrubbed (no proxies, no keys)
but sockets still work: `sandbox_kind()` says which applies.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import mcpworld
from mcpworld.core import contain

PACKAGE_ROOT = Path(mcpworld.__file__).resolve().parent  # .../mcpworld
SOURCE_ROOT = PACKAGE_ROOT.parent  # what goes on the worker's sys.path
ZYGOTE = Path(__file__).resolve().with_name("zygote.py")  # the worker's program: under PACKAGE_ROOT, so visible


@dataclass(frozen=True)
class Limits:
    """Per-job resource limits. Memory and files apply to the whole worker; CPU and wall time per job."""

    cpu_s: int = 10
    wall_s: float = 20.0
    memory_mb: int = 1024
    file_mb: int = 16
    open_files: int = 64
    processes: int = 256  # the whole worker tree (threads count too): a pids cgroup where writable
    result_mb: int = 32  # a larger result is refused with a clear error (never buffered, never retried)


@dataclass(frozen=True)
class Interpreter:
    """A Python other than this one for a worker (an imported dataset's own library versions). `sys_path` replaces
    mcpworld's source root on the worker's path (a folder holding only the `mcpworld` package, so no site-packages
    of ours shadows the interpreter's own libraries); `binds` are the folders it needs visible in the sandbox."""

    python: str
    sys_path: tuple[str, ...]
    binds: tuple[str, ...]


@dataclass
class JobResult:
    """What a job returned, or why it did not: error kind is error | timeout | cpu | killed | worker."""

    ok: bool
    value: Any = None
    error: str | None = None
    kind: str | None = None
    output: str = ""
    duration_s: float = 0.0
    traceback: str = ""


class WorkerError(RuntimeError):
    """The worker process itself failed (could not start, or broke the protocol)."""


def _bwrap_args(extra: tuple[str, ...] = ()) -> list[str]:
    """bubblewrap: no network, private /tmp, read-only view of only the interpreter, mcpworld and `extra`."""
    return contain.bwrap_argv([], cwd="/tmp", ro=[str(PACKAGE_ROOT), *extra], host_root=False)


@lru_cache(maxsize=1)
def sandbox_kind() -> str:
    """Which isolation this machine gives workers: bwrap, unshare (network and PID only) or none.

    MCPWORLD_SANDBOX=bwrap|unshare|none forces one (a forced one that does not work is an error at start).
    Without bubblewrap, "unshare" or "none" is only used when the user opted out (MCPWORLD_ALLOW_UNCONTAINED=1
    or MCPWORLD_SANDBOX=none); otherwise starting a worker raises `contain.ContainmentUnavailable`.
    """
    forced = os.environ.get("MCPWORLD_SANDBOX", "auto")
    if forced != "auto":
        return forced
    probe = [sys.executable, "-I", "-c", "import socket"]
    if contain.bwrap_exe() is None and not contain.allow_uncontained():
        return "none"  # refused at start, with the reason
    unshare = ["unshare", "-rn", "--pid", "--fork", "--kill-child"]
    for kind, prefix in (("bwrap", _bwrap_args()), ("unshare", unshare)):
        if shutil.which(prefix[0]) is None:
            continue
        try:
            done = subprocess.run([*prefix, *probe], capture_output=True, timeout=20, env=_clean_env())
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return kind
    return "none"


def _clean_env() -> dict[str, str]:
    """No inherited variables: no proxies, tokens, keys or PYTHON* settings reach the worker."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": "/tmp",
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "TZ": "UTC", IN_WORKER: "1"}


IN_WORKER = "MCPWORLD_IN_WORKER"


def in_worker() -> bool:
    """True inside a worker process: packages that proxy generated code load it directly there."""
    return os.environ.get(IN_WORKER) == "1"


@dataclass
class Worker:
    """A zygote process that runs `module:function` jobs in limited, forked children. Thread-safe."""

    limits: Limits = field(default_factory=Limits)
    preload: tuple[str, ...] = ("json",)
    paths: tuple[str, ...] = ()  # extra sys.path entries
    binds: tuple[str, ...] = ()  # extra directories visible (read-only) inside the sandbox
    warm: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()  # entries the zygote runs once at start
    interpreter: Interpreter | None = None  # None: this Python, with mcpworld's source root on its path
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _contained: contain.Contained | None = field(default=None, init=False, repr=False)
    _buffer: bytearray = field(default_factory=bytearray, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _ending: list[str] = field(default_factory=list, init=False, repr=False)  # sessions to end once the lock is free
    starts: int = field(default=0, init=False)

    def _command(self) -> list[str]:
        own = self.interpreter
        config = {"sys_path": [*(own.sys_path if own else (str(SOURCE_ROOT),)), *self.paths],
                  "preload": list(self.preload),
                  "warm": [[entry, dict(kwargs)] for entry, kwargs in self.warm],
                  "memory_mb": self.limits.memory_mb, "file_mb": self.limits.file_mb,
                  "open_files": self.limits.open_files, "result_mb": self.limits.result_mb, "sessions": POOL.size}
        python = [own.python if own else sys.executable, "-I", str(ZYGOTE), json.dumps(config)]
        if sandbox_kind() == "unshare":
            return ["unshare", "-rn", "--pid", "--fork", "--kill-child", *python]
        return python

    def _start(self) -> subprocess.Popen[bytes]:
        self.close()
        kind = sandbox_kind()
        if kind == "none" and not contain.allow_uncontained() and os.environ.get("MCPWORLD_SANDBOX") != "none":
            contain.resolve(None, "synthesized code in a worker")  # raises ContainmentUnavailable, saying why
        self.starts += 1
        command = self._command()
        # Started from one long-lived thread: bubblewrap's --die-with-parent follows the *thread* that forked it, so
        # a zygote started from a pool thread died with that thread (a thousand-world server restarted zygotes
        # that were still in use, once per finished request thread).
        self._contained = _SPAWNER.submit(lambda: contain.Contained(
            command, contain=kind == "bwrap", env=_clean_env(), cwd="/",
            ro=(*self.binds, *(self.interpreter.binds if self.interpreter else ())), host_root=False,
            max_procs=self.limits.processes, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)).result()
        proc = self._contained.proc
        self._proc, self._buffer = proc, bytearray()
        try:
            ready = self._readline(time.monotonic() + 60)
        except WorkerError as exc:
            try:  # it closed its stdout: let it finish exiting, so its traceback can be read
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            err = proc.stderr.read().decode(errors="replace")[-2000:] if proc.poll() is not None and proc.stderr \
                else ""
            self.close()
            raise WorkerError(f"the worker did not start ({exc}): {err}") from None
        if json.loads(ready).get("ready") is not True:
            self.close()
            raise WorkerError(f"the worker said {ready[:200]!r} instead of ready")
        threading.Thread(target=_drain, args=(proc,), daemon=True).start()
        if self.warm:  # a world's own zygote: bounded with the others (least recently used closed first)
            POOL.admit(self)
        return proc

    def _readline(self, deadline: float) -> str:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerError("no reply in time")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise WorkerError(f"the worker exited (status {proc.poll()})")
                self._buffer += chunk
        cut = self._buffer.index(b"\n")
        line = bytes(self._buffer[:cut])
        del self._buffer[:cut + 1]
        return line.decode()

    def run(self, entry: str, args: dict[str, Any], *, files: dict[str, str] | None = None,
            cpu_s: int | None = None, wall_s: float | None = None, session: str | None = None) -> JobResult:
        """Run `entry` ("package.module:function") with keyword `args` in a fresh child (or `session`'s own).

        `files` (relative path -> text) are written into the child's working directory first. The job
        is retried once only if the zygote died (it exited, or could not take the job): a reply that is late
        is an error, never a second run.
        """
        wall = float(wall_s or self.limits.wall_s)
        job = {"entry": entry, "args": args, "files": files or {},
               "cpu_s": cpu_s or self.limits.cpu_s, "wall_s": wall, "session": session}
        line = json.dumps(job, default=str).encode() + b"\n"
        try:
            with self._lock:
                return self._run(line, wall, session)
        finally:
            self._end_pending()

    def end(self, session: str) -> None:
        """End a session's process: now, or right after the job that is running (never waiting for it)."""
        POOL.session_ended(self, session)
        self._ending.append(session)
        self._end_pending()

    def _end_pending(self) -> None:
        while self._ending and self._lock.acquire(blocking=False):
            try:
                ending = [self._ending.pop() for _ in range(len(self._ending))]  # (appends may go on meanwhile)
                proc = self._proc
                if proc is None or proc.poll() is not None:
                    continue  # its zygote is gone, and its sessions with it
                try:
                    assert proc.stdin is not None
                    proc.stdin.write(json.dumps({"end": ending}).encode() + b"\n")
                    proc.stdin.flush()
                    self._readline(time.monotonic() + 10)
                except (WorkerError, OSError):
                    self.close()  # the sure way: the zygote and every process under it
            finally:
                self._lock.release()

    def _run(self, line: bytes, wall: float, session: str | None) -> JobResult:
        if self.warm:
            POOL.touch(self)
        if session is not None:
            POOL.session_used(self, session)
        for attempt in (1, 2):
            proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
            try:
                assert proc.stdin is not None
                proc.stdin.write(line)
                proc.stdin.flush()
                raw = self._readline(time.monotonic() + wall + 10)
            except (WorkerError, OSError) as exc:
                try:  # did the zygote die (retry), or is the job just late (never run it twice)?
                    proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
                died = proc.poll() is not None
                self.close()
                if attempt == 2 or not died:
                    return JobResult(ok=False, kind="worker", error=f"worker failed: {exc}")
                continue
            try:
                reply = json.loads(raw)
                out = reply["job"]
            except (ValueError, KeyError, TypeError):  # the job wrote garbage on its result pipe
                return JobResult(ok=False, kind="error", error="the job returned an unreadable result")
            return JobResult(ok=bool(out.get("ok")), value=out.get("value"), error=out.get("error"),
                             kind=out.get("kind"), output=reply.get("output", ""),
                             duration_s=float(reply.get("duration_s", 0.0)), traceback=out.get("traceback", ""))
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.warm:
            POOL.forget(self)
        POOL.forget_sessions(self)
        proc, self._proc = self._proc, None
        contained, self._contained = self._contained, None
        if proc is None:
            return
        if contained is not None:
            contained.kill()  # the zygote, its jobs and everything they started (namespace / cgroup / group)
            contained.close()
        elif proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _drain(proc: subprocess.Popen[bytes]) -> None:
    """Read the zygote's stderr so a chatty import can never block it on a full pipe."""
    stream = proc.stderr
    if stream is None:
        return
    try:
        while stream.read(1 << 16):
            pass
    except (OSError, ValueError):
        pass


_SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="mcpworld-zygote-spawner")  # its thread never exits
POOL_ENV = "MCPWORLD_WORKER_POOL"
DEFAULT_POOL = 32


class WorkerPool:
    """The live warm zygotes, least recently used first, at most `size` of them (`MCPWORLD_WORKER_POOL`).

    Each warm `Worker` admits itself when its zygote starts and touches the pool on every job; admitting one past
    the bound closes the least recently used zygotes that are idle (a busy one is skipped, never interrupted).
    Memory is then about `size` zygotes, whatever the number of worlds installed or served.
    """

    def __init__(self, size: int | None = None):
        self._size = size
        self._live: OrderedDict[int, Worker] = OrderedDict()
        self._sessions: OrderedDict[tuple[int, str], Worker] = OrderedDict()  # live sessions, least recent first
        self._lock = threading.Lock()
        self.evictions = 0

    @property
    def size(self) -> int:
        if self._size is not None:
            return self._size
        try:
            return max(1, int(os.environ.get(POOL_ENV, DEFAULT_POOL)))
        except ValueError:
            return DEFAULT_POOL

    def resize(self, size: int | None) -> None:
        """Set the bound (None: from the environment again); closes idle zygotes over it now."""
        self._size = size
        self._evict(None)

    def live(self) -> list[Worker]:
        with self._lock:
            return list(self._live.values())

    def admit(self, worker: Worker) -> None:
        with self._lock:
            self._live[id(worker)] = worker
            self._live.move_to_end(id(worker))
        self._evict(worker)

    def touch(self, worker: Worker) -> None:
        with self._lock:
            if id(worker) in self._live:
                self._live.move_to_end(id(worker))
            over = len(self._live) > self.size  # left over the bound while the others were busy
        if over:
            self._evict(worker)

    def forget(self, worker: Worker) -> None:
        with self._lock:
            self._live.pop(id(worker), None)

    def session_used(self, worker: Worker, session: str) -> None:
        """A job for `session`: it is the most recent; past the bound the least recent others end."""
        with self._lock:
            self._sessions[(id(worker), session)] = worker
            self._sessions.move_to_end((id(worker), session))
            over = len(self._sessions) - self.size
            victims = list(self._sessions.items())[:max(0, over)]
        for (_, sid), owner in victims:
            owner.end(sid)

    def session_ended(self, worker: Worker, session: str) -> None:
        with self._lock:
            self._sessions.pop((id(worker), session), None)

    def forget_sessions(self, worker: Worker) -> None:
        with self._lock:
            for key in [k for k, w in self._sessions.items() if w is worker]:
                del self._sessions[key]

    def sessions(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _evict(self, keep: Worker | None) -> None:
        with self._lock:
            over = len(self._live) - self.size
            candidates = [w for w in self._live.values() if w is not keep] if over > 0 else []
        for victim in candidates:
            if over <= 0:
                break
            if not victim._lock.acquire(blocking=False):  # running a job: left alone
                continue
            try:
                victim.close()
                self.evictions += 1
                over -= 1
            finally:
                victim._lock.release()


POOL = WorkerPool()
_shared: dict[tuple[Any, ...], Worker] = {}
_shared_lock = threading.Lock()


Warm = tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]


def shared_worker(limits: Limits | None = None, preload: tuple[str, ...] = ("json",), paths: tuple[str, ...] = (),
                  binds: tuple[str, ...] = (), warm: Warm = (), interpreter: Interpreter | None = None) -> Worker:
    """One worker per configuration per process: tool proxies and checks reuse a warm zygote."""
    key = (limits or Limits(), preload, paths, binds, warm, interpreter)
    with _shared_lock:
        worker = _shared.get(key)
        if worker is None:
            worker = _shared[key] = Worker(key[0], preload, paths, binds, warm, interpreter)
        return worker
