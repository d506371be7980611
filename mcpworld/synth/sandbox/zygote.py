"""The zygote: the program a `Worker` runs inside its sandbox, as `python -I .../zygote.py CONFIG`.

It is run as a file, not imported: the sandbox shows it the interpreter and the mcpworld source tree read-only,
and `python -I` (which in 3.11+ also implies -P) puts neither the script's folder nor the environment on
`sys.path`. It uses the standard library only until CONFIG's `sys_path` is in place; only then does it import
what CONFIG names (`preload`, and the `warm` entries: a synthesized or imported world's package).

Protocol, over the pipes it was started with: one `{"ready": true}` line, then one JSON job per line on stdin
(`entry` "module:function", `args`, `files`, `cpu_s`, `wall_s`) and one reply per line on stdout
(`{"output", "duration_s", "job": {"ok", "value" | "kind", "error", "traceback"}}`). Each job runs in a forked
child with its own CPU limit, a private working directory as cwd and HOME, and its output captured; the zygote
kills the child (and its process group) when the wall clock passes, and reaps whatever it left behind. Importing
this module (to read or lint it) runs nothing.

A job with a `session` id runs instead in that session's long-lived child (forked on its first job, with the same
limits, and kept between jobs: an episode's state stays loaded, so a call costs no fork), one job at a time, with
the same wall-clock limit; what the job started is killed when it returns. A session is ended by an `{"end": [ids]}`
line, when it used a tenth of its CPU limit (so each job still gets nearly all of it: RLIMIT_CPU is per process),
past `sessions` live ones (the least recently used), when it breaks the protocol, and with the zygote.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, BinaryIO

MB = 1024 * 1024
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
RETIRE_CPU = 0.1  # a session that used this fraction of its CPU limit is replaced before its next job


def become_subreaper() -> bool:
    """Orphans a job leaves (double forks, setsid) are re-parented to this zygote, which kills them after the job."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def my_children() -> list[int]:
    """The pids of this process's children (from /proc/self/task/*/children, else by scanning /proc)."""
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


def kill_tree(pid: int) -> None:
    """SIGKILL a process's group, else the process alone."""
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except OSError:
            pass


def reap_all(spare: frozenset[int] = frozenset()) -> None:
    """Kill and reap every process the job left behind (its group, and orphans re-parented to us), but `spare`."""
    for _ in range(1000):
        kids = [kid for kid in my_children() if kid not in spare]
        if not kids:
            break
        for kid in kids:
            kill_tree(kid)
        for kid in kids:
            try:
                os.waitpid(kid, 0)
            except ChildProcessError:
                pass
    while not spare:  # (with sessions alive, their exits are collected by `Zygote.session`)
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break


def set_limits(cfg: dict[str, Any]) -> None:
    """Address space, file size and open files for the zygote and every job it forks; no core files."""
    for name, value in (("RLIMIT_AS", cfg["memory_mb"] * MB), ("RLIMIT_FSIZE", cfg["file_mb"] * MB),
                        ("RLIMIT_NOFILE", cfg["open_files"]), ("RLIMIT_CORE", 0)):
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError):
            pass


def warm_up(cfg: dict[str, Any]) -> None:
    """CONFIG's sys.path in place, its modules imported, its warm entries run once (jobs fork with them done)."""
    for path in reversed(cfg["sys_path"]):
        sys.path.insert(0, path)
    set_limits(cfg)
    for module in cfg["preload"]:
        importlib.import_module(module)
    for entry, kwargs in cfg.get("warm", []):
        module, _, func = entry.partition(":")
        getattr(importlib.import_module(module), func)(**kwargs)


def call_entry(job: dict[str, Any]) -> dict[str, Any]:
    """Run the job's `module:function` with its arguments: its value, or the error that stopped it."""
    try:
        module, _, func = job["entry"].partition(":")
        value = getattr(importlib.import_module(module), func)(**job["args"])
        return {"ok": True, "value": value}
    except BaseException as exc:
        frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
        return {"ok": False, "kind": "error", "error": f"{type(exc).__name__}: {exc}"[:4000],
                "traceback": "".join(frames)[-4000:]}


@dataclass
class Session:
    """A session's process, as its zygote sees it: its pipes, directory, output file and CPU limit."""

    pid: int
    to_child: int
    from_child: int
    work: str
    log: str
    cpu_s: int

    def fit(self, cpu_s: int) -> bool:
        """Alive, with this CPU limit, and under a tenth of it used (RLIMIT_CPU counts the process's life)."""
        try:
            if os.waitpid(self.pid, os.WNOHANG)[0] != 0:
                return False
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            used = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError, ChildProcessError):
            return False
        return cpu_s == self.cpu_s and used < RETIRE_CPU * self.cpu_s


def write_files(work: str, job: dict[str, Any]) -> None:
    for rel, text in (job.get("files") or {}).items():
        path = os.path.join(work, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def answer(job: dict[str, Any]) -> bytes:
    """Run the job; its result as JSON (what it printed flushed to its output first)."""
    out = call_entry(job)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    try:
        return json.dumps(out, default=str).encode()
    except BaseException as exc:
        return json.dumps({"ok": False, "kind": "error", "error": f"result is not JSON: {exc}"}).encode()


class Zygote:
    """Forks one limited child per job and turns how it ended into one reply line."""

    def __init__(self, cfg: dict[str, Any], root: str, proto_in: BinaryIO, proto_out: BinaryIO) -> None:
        self.cfg, self.root, self.proto_in, self.proto_out = cfg, root, proto_in, proto_out
        self.sessions: OrderedDict[str, Session] = OrderedDict()  # least recently used first

    def enter(self, cpu_s: int, work: str, log_path: str) -> None:
        """In a forked child: nothing of the zygote's (its pipes, the sessions'), its own group, limits, directory."""
        self.proto_in.close()
        self.proto_out.close()
        for other in self.sessions.values():
            for fd in (other.to_child, other.from_child):
                os.close(fd)
        os.setpgid(0, 0)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        os.chdir(work)
        os.environ.update({"HOME": work, "TMPDIR": work})
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)

    def child(self, job: dict[str, Any], work: str, w: int) -> None:
        """In the forked child: limits, a private directory, the job's files, the call, its JSON on `w`."""
        self.enter(int(job["cpu_s"]), work, os.path.join(work, ".output"))
        write_files(work, job)
        write_all(w, answer(job))

    def session_child(self, job: dict[str, Any], work: str, log_path: str, r: int, w: int) -> None:
        """A session's process: one job per line on `r`, each answered with one line on `w`, until `r` closes."""
        self.enter(int(job["cpu_s"]), work, log_path)
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # (it also ends when its pipe closes)
        lines = os.fdopen(r, "rb")
        for line in lines:
            data = answer(json.loads(line))
            for kid in my_children():  # what the job started ends with it, as in a one-job child
                kill_tree(kid)
                try:
                    os.waitpid(kid, 0)
                except ChildProcessError:
                    pass
            write_all(w, data + b"\n")

    def run(self, job: dict[str, Any]) -> bytes:
        """One job in a forked child, waited for up to its wall-clock limit: the reply line (without newline)."""
        work = tempfile.mkdtemp(dir=self.root)
        r, w = os.pipe()
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                self.child(job, work, w)
            finally:
                os._exit(0)
        os.close(w)
        chunks, reason = self.read_result(r, started + float(job["wall_s"]))
        if reason:
            kill_tree(pid)
        try:
            os.killpg(pid, signal.SIGKILL)  # background children of a finished job do not outlive it
        except OSError:
            pass
        _, status = os.waitpid(pid, 0)
        os.close(r)
        reap_all(self.spare())
        output = tail_output(os.path.join(work, ".output"))
        shutil.rmtree(work, ignore_errors=True)
        ok = bool(reason is None and chunks and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
                  and b"\n" not in b"".join(chunks))
        return self.reply(job, ok, chunks, reason, status, output, started)

    def reply(self, job: dict[str, Any], ok: bool, chunks: list[bytes], reason: str | None, status: int,
              output: str, started: float) -> bytes:
        """The reply line: the child's JSON passed through unparsed (results can be large tables), else why not."""
        elapsed = time.monotonic() - started
        if ok:
            meta = json.dumps({"output": output, "duration_s": round(elapsed, 4)}).encode()
            return meta[:-1] + b', "job": ' + b"".join(chunks) + b"}"
        out = self.failure(job, reason, chunks, status, elapsed)
        return json.dumps({"output": output, "duration_s": round(elapsed, 4), "job": out}, default=str).encode()

    def spare(self) -> frozenset[int]:
        return frozenset(s.pid for s in self.sessions.values())

    def session(self, job: dict[str, Any]) -> bytes:
        """One job in its session's process (started, or replaced, first when needed)."""
        sid, cpu = str(job["session"]), int(job["cpu_s"])
        current = self.sessions.pop(sid, None)
        if current is not None and not current.fit(cpu):
            self.end(current)
            current = None
        if current is None:
            while len(self.sessions) >= int(self.cfg.get("sessions", 32)):
                self.end(self.sessions.popitem(last=False)[1])
            current = self.start(job)
        self.sessions[sid] = current
        started = time.monotonic()
        write_files(current.work, job)
        try:
            write_all(current.to_child, json.dumps(job).encode() + b"\n")
        except OSError:
            pass  # it died: read_result sees the end of its pipe
        chunks, reason = self.read_result(current.from_child, started + float(job["wall_s"]), line=True)
        done = b"".join(chunks)
        output = tail_output(current.log, truncate=True)
        for entry in os.scandir(current.work):  # a job's files are its own, as in a one-job child's directory
            shutil.rmtree(entry.path, ignore_errors=True) if entry.is_dir() else os.unlink(entry.path)
        reap_all(self.spare())
        if reason is None and done.endswith(b"\n") and done.count(b"\n") == 1:
            return self.reply(job, True, [done[:-1]], None, 0, output, started)
        del self.sessions[sid]  # timed out, died, or broke the protocol: it ends, with why
        return self.reply(job, False, chunks, reason, self.end(current), output, started)

    def start(self, job: dict[str, Any]) -> Session:
        work = tempfile.mkdtemp(dir=self.root)
        log = work + ".output"
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(to_w)
            os.close(from_r)
            try:
                self.session_child(job, work, log, to_r, from_w)
            finally:
                os._exit(0)
        os.close(to_r)
        os.close(from_w)
        return Session(pid, to_w, from_r, work, log, int(job["cpu_s"]))

    def end(self, session: Session) -> int:
        """Close its pipes, kill its group, reap it and remove its files: its exit status."""
        for fd in (session.to_child, session.from_child):
            os.close(fd)
        kill_tree(session.pid)
        _, status = os.waitpid(session.pid, 0)
        shutil.rmtree(session.work, ignore_errors=True)
        try:
            os.unlink(session.log)
        except OSError:
            pass
        return status

    def read_result(self, r: int, deadline: float, line: bool = False) -> tuple[list[bytes], str | None]:
        """The child's result bytes (up to its pipe's end, or its first newline when `line`), or why reading
        stopped: "timeout" or "too_large" (then no bytes)."""
        chunks: list[bytes] = []
        size, cap = 0, int(self.cfg["result_mb"]) * MB
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return chunks, "timeout"
            ready, _, _ = select.select([r], [], [], left)
            if ready:
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    return chunks, None
                size += len(chunk)
                if size > cap:
                    return [], "too_large"
                chunks.append(chunk)
                if line and b"\n" in chunk:
                    return chunks, None

    def failure(self, job: dict[str, Any], reason: str | None, chunks: list[bytes], status: int,
                elapsed: float) -> dict[str, Any]:
        """Why a job returned no result: timeout, too large, died mid-write, CPU limit, a signal, or an exit."""
        if reason == "timeout":
            return {"ok": False, "kind": "timeout", "error": f"timed out after {float(job['wall_s']):g}s (wall clock)"}
        if reason == "too_large":
            return {"ok": False, "kind": "error", "error": f"result too large: the job returned more than "
                    f"{self.cfg['result_mb']} MB of JSON (Limits.result_mb); return a smaller value or a summary"}
        if chunks:
            return {"ok": False, "kind": "killed", "error": "the job died while writing its result"}
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig in (signal.SIGXCPU, signal.SIGKILL) and elapsed < float(job["wall_s"]):
                return {"ok": False, "kind": "cpu", "error": f"CPU time limit ({job['cpu_s']}s) exceeded"}
            return {"ok": False, "kind": "killed", "error": f"killed by signal {signal.Signals(sig).name}"}
        code = os.WEXITSTATUS(status)
        return {"ok": False, "kind": "killed", "error": f"the job exited with status {code} before returning "
                "(sys.exit, os._exit, or out of memory)"}

    def serve(self) -> None:
        """Say ready, then answer one job (or list of sessions to end) per line until stdin closes."""
        self.proto_out.write(b'{"ready": true}\n')
        self.proto_out.flush()
        for line in self.proto_in:
            if not line.strip():
                continue
            job = json.loads(line)
            if "end" in job:
                ended = [self.end(self.sessions.pop(sid)) for sid in job["end"] if sid in self.sessions]
                reply = json.dumps({"ended": len(ended)}).encode()
            else:
                reply = self.session(job) if job.get("session") else self.run(job)
            self.proto_out.write(reply + b"\n")
            self.proto_out.flush()
        for session in self.sessions.values():
            self.end(session)


def tail_output(path: str, truncate: bool = False) -> str:
    """The last 2,000 bytes a job printed (stdout and stderr), as text; `truncate` empties the file for the next."""
    try:
        with open(path, "r+b" if truncate else "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 2000))
            text = f.read().decode("utf-8", "replace")
            if truncate:
                f.truncate(0)
            return text
    except OSError:
        return ""


def main(config: str) -> None:
    """Start the zygote: warm up, keep the protocol pipes for itself, point jobs' stdio away from them, serve."""
    cfg = json.loads(config)
    become_subreaper()
    warm_up(cfg)
    root = tempfile.mkdtemp(prefix="mcpworld-worker-")
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    Zygote(cfg, root, proto_in, proto_out).serve()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1])
