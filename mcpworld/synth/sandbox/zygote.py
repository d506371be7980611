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
from typing import Any, BinaryIO

MB = 1024 * 1024
PR_SET_CHILD_SUBREAPER = 36


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


def reap_all() -> None:
    """Kill and reap every process the job left behind (its group, and orphans re-parented to us)."""
    for _ in range(1000):
        kids = my_children()
        if not kids:
            break
        for kid in kids:
            kill_tree(kid)
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


class Zygote:
    """Forks one limited child per job and turns how it ended into one reply line."""

    def __init__(self, cfg: dict[str, Any], root: str, proto_in: BinaryIO, proto_out: BinaryIO) -> None:
        self.cfg, self.root, self.proto_in, self.proto_out = cfg, root, proto_in, proto_out

    def child(self, job: dict[str, Any], work: str, w: int) -> None:
        """In the forked child: limits, a private directory, the job's files, the call, its JSON on `w`."""
        self.proto_in.close()
        self.proto_out.close()
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
        out = call_entry(job)
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
        reap_all()
        output = tail_output(os.path.join(work, ".output"))
        shutil.rmtree(work, ignore_errors=True)
        elapsed = time.monotonic() - started
        if reason is None and chunks and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 \
                and b"\n" not in b"".join(chunks):
            # Pass the child's JSON through without parsing it again (results can be large tables).
            meta = json.dumps({"output": output, "duration_s": round(elapsed, 4)}).encode()
            return meta[:-1] + b', "job": ' + b"".join(chunks) + b"}"
        out = self.failure(job, reason, chunks, status, elapsed)
        return json.dumps({"output": output, "duration_s": round(elapsed, 4), "job": out}, default=str).encode()

    def read_result(self, r: int, deadline: float) -> tuple[list[bytes], str | None]:
        """The child's result bytes, or why reading stopped: "timeout" or "too_large" (then no bytes)."""
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
        """Say ready, then answer one job per line until stdin closes."""
        self.proto_out.write(b'{"ready": true}\n')
        self.proto_out.flush()
        for line in self.proto_in:
            if not line.strip():
                continue
            reply = self.run(json.loads(line))
            self.proto_out.write(reply + b"\n")
            self.proto_out.flush()


def tail_output(path: str) -> str:
    """The last 2,000 bytes a job printed (stdout and stderr), as text."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 2000))
            return f.read().decode("utf-8", "replace")
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
