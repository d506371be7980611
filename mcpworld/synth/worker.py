"""Resource-limited worker processes for untrusted code (synthesized worlds, imported tool implementations).

Why a zygote: importing SQLModel takes about a second on a small machine, and a tool call must cost
milliseconds. So each `Worker` starts one `python -I` process (inside bubblewrap when it works, else
`unshare -rn`, else plain) with a scrubbed environment and address-space, file-size and open-file limits;
it pre-imports the trusted harness, then forks one child per job. The child gets its own CPU limit, its own
temporary directory as cwd and HOME, and its stdout/stderr captured; the zygote kills it (and its process
group) when the wall-clock limit passes. A zygote runs the trusted harness and, when warmed (`warm=`), the one
package it was started for (a synthesized or imported world's code, so its jobs fork with it imported): that
code runs under the same containment and limits as the jobs, and a warm zygote serves only its own package
(`shared_worker` keys zygotes by what they warm), so one world's code never sees another's jobs. If a zygote
dies, the next job starts a new one.

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
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import mcpworld
from mcpworld.core import contain

PACKAGE_ROOT = Path(mcpworld.__file__).resolve().parent  # .../mcpworld
SOURCE_ROOT = PACKAGE_ROOT.parent  # what goes on the worker's sys.path


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


# The zygote. It runs as `python -I -c BOOT CONFIG`; everything it imports is trusted mcpworld code.
BOOT = r'''
import json, os, resource, select, signal, sys, tempfile, time, traceback, shutil, importlib, ctypes
cfg = json.loads(sys.argv[1])
# Orphans a job leaves (double forks, setsid) are re-parented to this zygote, which kills them after the job.
try:
    SUBREAPER = ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
except (OSError, AttributeError):
    SUBREAPER = False

def my_children():
    kids = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                kids += [int(p) for p in f.read().split()]
    except OSError:
        me = os.getpid()
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rpartition(")")[2].split()[1]) == me:
                        kids.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return kids

def reap_all():
    """Kill and reap every process the job left behind (its group, and orphans re-parented to us)."""
    for _ in range(1000):
        kids = my_children()
        if not kids:
            break
        for kid in kids:
            for target in (lambda: os.killpg(kid, signal.SIGKILL), lambda: os.kill(kid, signal.SIGKILL)):
                try:
                    target()
                except OSError:
                    pass
        for kid in kids:
            try:
                os.waitpid(kid, 0)
            except ChildProcessError:
                pass
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break

for path in reversed(cfg["sys_path"]):
    sys.path.insert(0, path)
MB = 1024 * 1024
for name, value in (("RLIMIT_AS", cfg["memory_mb"] * MB), ("RLIMIT_FSIZE", cfg["file_mb"] * MB),
                    ("RLIMIT_NOFILE", cfg["open_files"]), ("RLIMIT_CORE", 0)):
    try:
        resource.setrlimit(getattr(resource, name), (value, value))
    except (ValueError, OSError):
        pass
for module in cfg["preload"]:
    importlib.import_module(module)
for entry, kwargs in cfg.get("warm", []):
    module, _, func = entry.partition(":")
    getattr(importlib.import_module(module), func)(**kwargs)
root = tempfile.mkdtemp(prefix="mcpworld-worker-")
proto_in = os.fdopen(os.dup(0), "rb")
proto_out = os.fdopen(os.dup(1), "wb")
devnull = os.open(os.devnull, os.O_RDWR)
os.dup2(devnull, 0)
os.dup2(2, 1)

def child(job, work, w):
    proto_in.close()
    proto_out.close()
    os.setpgid(0, 0)
    cpu = int(job["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    os.chdir(work)
    os.environ.update({"HOME": work, "TMPDIR": work})
    log = os.open(os.path.join(work, ".output"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    for rel, text in (job.get("files") or {}).items():
        path = os.path.join(work, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    try:
        module, _, func = job["entry"].partition(":")
        value = getattr(importlib.import_module(module), func)(**job["args"])
        out = {"ok": True, "value": value}
    except BaseException as exc:
        frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
        out = {"ok": False, "kind": "error", "error": f"{type(exc).__name__}: {exc}"[:4000],
               "traceback": "".join(frames)[-4000:]}
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    try:
        data = json.dumps(out, default=str).encode()
    except BaseException as exc:
        data = json.dumps({"ok": False, "kind": "error", "error": f"result is not JSON: {exc}"}).encode()
    view = memoryview(data)
    while view:
        view = view[os.write(w, view):]

def run(job):
    work = tempfile.mkdtemp(dir=root)
    r, w = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            child(job, work, w)
        finally:
            os._exit(0)
    os.close(w)
    chunks, reason, size, cap = [], None, 0, int(cfg["result_mb"]) * 1024 * 1024
    deadline = started + float(job["wall_s"])
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            reason = "timeout"
            break
        ready, _, _ = select.select([r], [], [], left)
        if ready:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            size += len(chunk)
            if size > cap:
                reason, chunks = "too_large", []
                break
            chunks.append(chunk)
    if reason:
        for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                target()
            except OSError:
                pass
    try:
        os.killpg(pid, signal.SIGKILL)  # background children of a finished job do not outlive it
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    os.close(r)
    reap_all()
    try:
        with open(os.path.join(work, ".output"), "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 2000))
            output = f.read().decode("utf-8", "replace")
    except OSError:
        output = ""
    shutil.rmtree(work, ignore_errors=True)
    elapsed = time.monotonic() - started
    if reason == "timeout":
        out = {"ok": False, "kind": "timeout", "error": f"timed out after {float(job['wall_s']):g}s (wall clock)"}
    elif reason == "too_large":
        out = {"ok": False, "kind": "error", "error": f"result too large: the job returned more than "
               f"{cfg['result_mb']} MB of JSON (Limits.result_mb); return a smaller value or a summary"}
    elif chunks and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and b"\n" not in b"".join(chunks):
        # Pass the child's JSON through without parsing it again (results can be large tables).
        meta = json.dumps({"output": output, "duration_s": round(elapsed, 4)}).encode()
        return meta[:-1] + b', "job": ' + b"".join(chunks) + b"}"
    elif chunks:
        out = {"ok": False, "kind": "killed", "error": "the job died while writing its result"}
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig in (signal.SIGXCPU, signal.SIGKILL) and elapsed < float(job["wall_s"]):
            out = {"ok": False, "kind": "cpu", "error": f"CPU time limit ({job['cpu_s']}s) exceeded"}
        else:
            out = {"ok": False, "kind": "killed", "error": f"killed by signal {signal.Signals(sig).name}"}
    else:
        code = os.WEXITSTATUS(status)
        out = {"ok": False, "kind": "killed", "error": f"the job exited with status {code} before returning "
               "(sys.exit, os._exit, or out of memory)"}
    return json.dumps({"output": output, "duration_s": round(elapsed, 4), "job": out}, default=str).encode()

proto_out.write(b'{"ready": true}\n')
proto_out.flush()
for line in proto_in:
    if not line.strip():
        continue
    reply = run(json.loads(line))
    proto_out.write(reply + b"\n")
    proto_out.flush()
shutil.rmtree(root, ignore_errors=True)
'''


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
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _contained: contain.Contained | None = field(default=None, init=False, repr=False)
    _buffer: bytearray = field(default_factory=bytearray, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    starts: int = field(default=0, init=False)

    def _command(self) -> list[str]:
        config = {"sys_path": [str(SOURCE_ROOT), *self.paths], "preload": list(self.preload),
                  "warm": [[entry, dict(kwargs)] for entry, kwargs in self.warm],
                  "memory_mb": self.limits.memory_mb, "file_mb": self.limits.file_mb,
                  "open_files": self.limits.open_files, "result_mb": self.limits.result_mb}
        python = [sys.executable, "-I", "-c", BOOT, json.dumps(config)]
        if sandbox_kind() == "unshare":
            return ["unshare", "-rn", "--pid", "--fork", "--kill-child", *python]
        return python

    def _start(self) -> subprocess.Popen[bytes]:
        self.close()
        kind = sandbox_kind()
        if kind == "none" and not contain.allow_uncontained() and os.environ.get("MCPWORLD_SANDBOX") != "none":
            contain.resolve(None, "synthesized code in a worker")  # raises ContainmentUnavailable, saying why
        self.starts += 1
        self._contained = contain.Contained(
            self._command(), contain=kind == "bwrap", env=_clean_env(), cwd="/", ro=self.binds, host_root=False,
            max_procs=self.limits.processes, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
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
            cpu_s: int | None = None, wall_s: float | None = None) -> JobResult:
        """Run `entry` ("package.module:function") with keyword `args` in a fresh child.

        `files` (relative path -> text) are written into the child's working directory first. The job
        is retried once only if the zygote died (it exited, or could not take the job): a reply that is late
        is an error, never a second run.
        """
        wall = float(wall_s or self.limits.wall_s)
        job = {"entry": entry, "args": args, "files": files or {},
               "cpu_s": cpu_s or self.limits.cpu_s, "wall_s": wall}
        line = json.dumps(job, default=str).encode() + b"\n"
        with self._lock:
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


_shared: dict[tuple[Any, ...], Worker] = {}
_shared_lock = threading.Lock()


Warm = tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]


def shared_worker(limits: Limits | None = None, preload: tuple[str, ...] = ("json",), paths: tuple[str, ...] = (),
                  binds: tuple[str, ...] = (), warm: Warm = ()) -> Worker:
    """One worker per configuration per process: tool proxies and checks reuse a warm zygote."""
    key = (limits or Limits(), preload, paths, binds, warm)
    with _shared_lock:
        worker = _shared.get(key)
        if worker is None:
            worker = _shared[key] = Worker(key[0], preload, paths, binds, warm)
        return worker
