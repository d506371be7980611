"""Where `bash` commands run: execution backends behind one seam, and the shell tool's output policy.

`ExecutionBackend.run(command, cwd, timeout) -> ExecResult` runs one command (grading uses it), and
`ExecutionBackend.for_episode(instance)` gives one episode's `EpisodeShell`, whose async `run` the bash tool awaits:
it knows its episode, so a simulated backend (SWT, an LLM that predicts output) plugs in beside `LocalBackend`
(contained by `mcpworld.core.contain`) and `DockerBackend` (Docker SDK, when an engine answers) with nothing to look
up. File operations never go through a backend: they are real.
"""

from __future__ import annotations

import os
import re
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import anyio.to_thread

from mcpworld.core import contain
from mcpworld.swe.workspace import borrowed_objects

if TYPE_CHECKING:
    from mcpworld.swe.instances import Instance

MAX_OUTPUT_CHARS = 16000
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
INTERACTIVE = {
    "vim", "vi", "nvim", "nano", "emacs", "pico", "ed", "less", "more", "most", "top", "htop", "btop", "man",
    "watch", "ssh", "telnet", "ftp", "sftp", "screen", "tmux", "mysql", "psql", "sqlite3", "irb", "ghci", "gdb",
    "pdb", "ipython", "jupyter",
}
NEEDS_ARGS = {"python", "python3", "python2", "node", "bash", "sh", "zsh", "fish", "R", "julia", "lua", "perl",
              "ruby", "php", "sqlite3"}
_SEGMENT = re.compile(r"\|\||&&|[;|&\n]")


@dataclass
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    duration_s: float = 0.0


class EpisodeShell(Protocol):
    """Where one episode's bash commands run; made by `ExecutionBackend.for_episode`, so it knows its instance."""

    async def run(self, command: str, cwd: Path, timeout: float, env: dict[str, str] | None = None,
                  writable: Path | None = None) -> ExecResult:
        """Run `command` as `ExecutionBackend.run` does, without blocking the event loop."""
        ...


@runtime_checkable
class ExecutionBackend(Protocol):
    """Runs one shell command in a workspace folder. Implementations: local, docker, simulated (world models)."""

    name: str

    def run(self, command: str, cwd: Path, timeout: float, env: dict[str, str] | None = None,
            writable: Path | None = None) -> ExecResult:
        """Run `command` with bash in `cwd`, killing everything it started after `timeout` seconds.

        `writable` is the folder the command may write (the workspace); isolating backends keep the rest read-only.
        """
        ...

    def for_episode(self, instance: Instance) -> EpisodeShell:
        """The shell of an episode on `instance` (a blocking backend: `ThreadShell(self)`)."""
        ...


@dataclass(frozen=True)
class ThreadShell:
    """An episode's shell on a blocking backend: each command in a worker thread, so the server keeps serving."""

    backend: ExecutionBackend

    async def run(self, command: str, cwd: Path, timeout: float, env: dict[str, str] | None = None,
                  writable: Path | None = None) -> ExecResult:
        return await anyio.to_thread.run_sync(lambda: self.backend.run(command, cwd, timeout, env, writable))


class BackendUnavailable(RuntimeError):
    """A backend that cannot run here (no engine, no SDK); the message starts with what to fix."""


# -- local -----------------------------------------------------------------------------------------------------

@dataclass
class Limits:
    """Resource limits applied to every command (setrlimit in the child before exec)."""

    cpu_s: int = 600
    address_space_bytes: int = 8 * 1024**3
    file_size_bytes: int = 1024**3
    processes: int = 4096
    output_bytes: int = 8 * 1024**2


def scrubbed_env(home: Path | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A minimal environment: no tokens or keys from the server's own environment reach the agent's commands."""
    bindir = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{bindir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(home or tempfile.gettempdir()), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb",
        "PAGER": "cat", "GIT_PAGER": "cat", "MANPAGER": "cat", "GIT_EDITOR": "true", "EDITOR": "true",
        "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "PIP_NO_INPUT": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1", "DEBIAN_FRONTEND": "noninteractive", "TMPDIR": "/tmp",
    }
    return {**env, **(extra or {})}


def bwrap_works() -> bool:
    """Whether bubblewrap is installed and allowed to make namespaces here (containers often forbid it)."""
    return contain.bwrap_exe() is not None


@dataclass
class LocalBackend:
    """Subprocess in the workspace, through the one containment layer (`mcpworld.core.contain`).

    Contained (bubblewrap): the filesystem is read-only except the workspace folder and a private /tmp; /root,
    /home and the mcpworld data dir are empty; no network; a PID namespace that dies whole on timeout; a process
    cap that holds for root (pids cgroup when writable). Without bubblewrap, construction raises
    BackendUnavailable unless the user opted out (`isolate=False` or MCPWORLD_ALLOW_UNCONTAINED=1): then the
    command runs as the server's user in its own process group, which is killed on timeout: a convenience, not a
    security boundary. `hidden`: files and folders its commands never read, given by whoever owns the instances
    (`instances.answer_paths`: the instances files and source repositories).
    """

    limits: Limits = field(default_factory=Limits)
    isolate: bool | None = None  # None: contain, or refuse unless MCPWORLD_ALLOW_UNCONTAINED=1; False: opt out
    name: str = "local"
    hidden: Sequence[str] = ()

    def __post_init__(self) -> None:
        try:
            self.isolate = contain.resolve(self.isolate, "agent shell commands")
        except contain.ContainmentUnavailable as exc:
            raise BackendUnavailable(str(exc)) from None

    def describe(self) -> str:
        return "local (bubblewrap-isolated)" if self.isolate else "local (NOT isolated: opted out)"

    def for_episode(self, instance: Instance) -> EpisodeShell:
        return ThreadShell(self)

    def run(self, command: str, cwd: Path, timeout: float, env: dict[str, str] | None = None,
            writable: Path | None = None) -> ExecResult:
        limits = self.limits
        cpu = max(1, min(limits.cpu_s, int(timeout) + 5))
        rlimits = [(resource.RLIMIT_CPU, cpu, cpu + 5),
                   (resource.RLIMIT_AS, limits.address_space_bytes, limits.address_space_bytes),
                   (resource.RLIMIT_FSIZE, limits.file_size_bytes, limits.file_size_bytes)]
        env = env if env is not None else scrubbed_env(None)
        start = time.monotonic()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = contain.Contained(["bash", "-c", command], contain=bool(self.isolate), env=env, cwd=cwd,
                                     rw=[str(writable or cwd)], ro=list(borrowed_objects(cwd)),
                                     max_procs=limits.processes, hidden=self.hidden,
                                     rlimits=rlimits, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
            timed_out = False
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                proc.kill()
            proc.close()  # also ends background children the command left behind
            duration = time.monotonic() - start
            stdout, stderr = _read_capped(out, limits.output_bytes), _read_capped(err, limits.output_bytes)
        code = proc.proc.returncode
        if proc.over_cap:
            stderr += f"\n[killed: more than {limits.processes} processes]"
        return ExecResult(stdout, stderr, -signal.SIGKILL if timed_out else code, timed_out, duration)


def _read_capped(fh: object, cap: int) -> str:
    """The output file's head and tail when it is over `cap` bytes, decoded leniently."""
    f = fh  # a binary temp file
    size = f.seek(0, os.SEEK_END)  # type: ignore[attr-defined]
    f.seek(0)  # type: ignore[attr-defined]
    if size <= cap:
        data = f.read()  # type: ignore[attr-defined]
    else:
        head = f.read(cap // 2)  # type: ignore[attr-defined]
        f.seek(size - cap // 2)  # type: ignore[attr-defined]
        data = head + f"\n[... {size - cap} bytes omitted ...]\n".encode() + f.read()  # type: ignore[attr-defined]
    return data.decode("utf-8", errors="replace")


# -- docker ----------------------------------------------------------------------------------------------------

class DockerBackend:
    """Runs commands in a container per workspace (the workspace bind-mounted at the same path, no network).

    Needs the Docker SDK and a reachable engine; otherwise construction raises BackendUnavailable with the reason.
    """

    name = "docker"

    def __init__(self, image: str | None = None, mem_limit: str = "4g"):
        try:
            import docker  # type: ignore[import-untyped]
        except ImportError:
            raise BackendUnavailable("docker backend unavailable: the Docker SDK is not installed "
                                     "(pip install docker)") from None
        try:
            self.client = docker.from_env(timeout=5)
            self.client.ping()
        except Exception as exc:  # the SDK raises several types for "no engine"
            raise BackendUnavailable(f"docker backend unavailable: no Docker engine answers ({exc})") from None
        self.image = image
        self.mem_limit = mem_limit
        self._containers: dict[str, object] = {}

    def for_episode(self, instance: Instance) -> EpisodeShell:
        """The episode's shell, in the instance's own image (`image_for`) unless one image was given for all."""
        return ThreadShell(_ImageBackend(self, self.image or image_for(instance)))

    def run(self, command: str, cwd: Path, timeout: float, env: dict[str, str] | None = None,
            writable: Path | None = None) -> ExecResult:
        return self.run_in(self.image or "python:3.11-slim", command, cwd, timeout, env, writable)

    def _container(self, image: str, cwd: Path, writable: Path) -> object:
        key = str(writable)
        if key not in self._containers:
            self._containers[key] = self.client.containers.run(
                image, ["sleep", "infinity"], detach=True, remove=True, network_disabled=True,
                mem_limit=self.mem_limit, working_dir=str(cwd), volumes={key: {"bind": key, "mode": "rw"}},
            )
        return self._containers[key]

    def run_in(self, image: str, command: str, cwd: Path, timeout: float, env: dict[str, str] | None = None,
               writable: Path | None = None) -> ExecResult:
        """Run `command` in the workspace's container, started from `image` on its first command."""
        container = self._container(image, cwd, writable or cwd)
        wrapped = f"timeout -s KILL {max(1, int(timeout))} bash -c {shlex.quote(command)}"
        start = time.monotonic()
        code, (out, err) = container.exec_run(["bash", "-c", wrapped], workdir=str(cwd), demux=True,  # type: ignore[attr-defined]
                                              environment={k: v for k, v in (env or {}).items() if k != "PATH"})
        timed_out = code in (124, 137) and time.monotonic() - start >= timeout - 0.5
        return ExecResult((out or b"").decode(errors="replace"), (err or b"").decode(errors="replace"), code,
                          timed_out, time.monotonic() - start)

    def close(self, writable: Path) -> None:
        container = self._containers.pop(str(writable), None)
        if container is not None:
            try:
                container.kill()  # type: ignore[attr-defined]
            except Exception:
                pass


def image_for(instance: Instance) -> str:
    """The SWE-bench harness's image for an instance: the record's own (`image`, SWE-rebench's `docker_image`)
    when it names one, else the harness's `sweb.eval.<arch>.<id>` name."""
    from mcpworld.swe.envs import harness_image

    given = instance.extra.get("image") or instance.extra.get("docker_image") or ""
    return harness_image(instance.instance_id, str(given))


@dataclass
class _ImageBackend:
    """The docker backend seen through one image: what an episode's shell runs on."""

    docker: DockerBackend
    image: str
    name = "docker"

    def run(self, command: str, cwd: Path, timeout: float, env: dict[str, str] | None = None,
            writable: Path | None = None) -> ExecResult:
        return self.docker.run_in(self.image, command, cwd, timeout, env, writable)

    def close(self, writable: Path) -> None:
        self.docker.close(writable)

    def for_episode(self, instance: Instance) -> EpisodeShell:
        return self.docker.for_episode(instance)


# -- the bash tool's policy ------------------------------------------------------------------------------------

def refusal(command: str) -> str | None:
    """Why `command` is refused (it needs a terminal, or is empty), or None to run it."""
    if not command.strip():
        return "No command given: pass one shell command in `command`."
    for segment in _SEGMENT.split(command):
        try:
            words = shlex.split(segment, comments=True)
        except ValueError:
            words = segment.split()
        while words and re.match(r"^\w+=", words[0]):  # VAR=value prefixes
            words = words[1:]
        while words and words[0] in ("sudo", "exec", "env", "nohup", "time", "command"):
            words = words[1:]
        if not words:
            continue
        prog = os.path.basename(words[0])
        if prog in INTERACTIVE:
            return (f"Interactive command refused: `{prog}` needs a terminal, and this shell has none. Use "
                    "str_replace_editor to view and edit files, and `cat`, `head`, `grep` or `sed -n` to read.")
        base = re.sub(r"[\d.]+$", "", prog)
        if base in NEEDS_ARGS and (len(words) == 1 or words[1:] in (["-i"], ["-"])):
            return (f"Interactive command refused: `{' '.join(words)}` would wait for input from a terminal. Pass a "
                    f"script or file, e.g. `{prog} -c '...'` or `{prog} script.py`.")
        if prog == "tail" and any(w in ("-f", "-F", "--follow") for w in words[1:]):
            return "Interactive command refused: `tail -f` never ends; use `tail -n 50 FILE`."
    return None


def format_result(result: ExecResult, timeout: float, limit: int = MAX_OUTPUT_CHARS) -> str:
    """The observation: stdout and stderr (ANSI stripped, head+tail truncated), then the exit code or timeout."""
    out = ANSI.sub("", result.stdout).replace("\r\n", "\n")
    err = ANSI.sub("", result.stderr).replace("\r\n", "\n")
    text = out + (("\n" if out and not out.endswith("\n") else "") + err if err else "")
    if len(text) > limit:
        half = limit // 2
        text = (f"{text[:half]}\n\n[... output truncated: {len(text) - limit} characters omitted ...]\n\n"
                f"{text[-half:]}")
    text = text.rstrip("\n")
    if result.timed_out:
        note = (f"[command timed out after {timeout:g} seconds and was killed, with every process it started; "
                "try a smaller input or a narrower selection, or pass a larger `timeout`]")
    else:
        note = f"[exit code: {result.exit_code}]"
    return f"{text}\n{note}" if text else note
