"""Shell backends: timeouts kill the whole process group, output caps, refusals, scrubbed env, isolation."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from mcpworld.swe.backends import make_backend
from mcpworld.swe.shell import (
    BackendUnavailable,
    ExecResult,
    ExecutionBackend,
    Limits,
    LocalBackend,
    ThreadShell,
    bwrap_works,
    format_result,
    refusal,
    scrubbed_env,
)


@pytest.fixture(params=[False, True], ids=["plain", "bwrap"])
def backend(request: pytest.FixtureRequest) -> LocalBackend:
    if request.param and not bwrap_works():
        pytest.skip("bubblewrap is not usable here")
    return LocalBackend(isolate=request.param)


def _alive(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def test_runaway_command_and_its_children_are_killed_on_time(backend: LocalBackend, tmp_path: Path) -> None:
    marker = f"sleep 1{os.getpid() % 1000:03d}"  # a unique duration so only our sleeps match
    command = f"({marker}; echo child-done) & {marker}; echo parent-done"
    start = time.monotonic()
    result = backend.run(command, tmp_path, timeout=1, env=scrubbed_env(tmp_path))
    elapsed = time.monotonic() - start
    assert result.timed_out and elapsed < 5
    assert "done" not in result.stdout
    time.sleep(0.2)
    assert _alive(marker) == []
    text = format_result(result, 1)
    assert text.startswith("[command timed out after 1 seconds and was killed")


def test_exit_code_stderr_and_env_scrubbed(backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    monkeypatch.setenv("MCPWORLD_SECRET_TOKEN", "hunter2")
    result = backend.run("echo out; echo err >&2; env; exit 3", tmp_path, 10, env=scrubbed_env(tmp_path / "h"))
    assert result.exit_code == 3 and not result.timed_out
    assert "hunter2" not in result.stdout and f"HOME={tmp_path / 'h'}" in result.stdout
    text = format_result(result, 10)
    assert text.startswith("out\n") and "err" in text and text.endswith("[exit code: 3]")


def test_background_jobs_end_with_the_call(backend: LocalBackend, tmp_path: Path) -> None:
    marker = f"sleep 2{os.getpid() % 1000:03d}"
    result = backend.run(f"{marker} & echo started", tmp_path, 10)
    assert result.exit_code == 0 and "started" in result.stdout and result.duration_s < 5
    time.sleep(0.2)
    assert _alive(marker) == []


def test_output_is_capped_head_and_tail(tmp_path: Path) -> None:
    backend = LocalBackend(limits=Limits(output_bytes=10_000), isolate=False)
    result = backend.run("seq 1 200000", tmp_path, 20)
    assert result.stdout.startswith("1\n2\n") and result.stdout.rstrip().endswith("200000")
    assert "bytes omitted" in result.stdout and len(result.stdout) < 11_000
    text = format_result(ExecResult("A" * 30_000 + "END", "", 0), 5, limit=1000)
    assert text.startswith("A" * 500) and "output truncated" in text and "END" in text and len(text) < 1200


def test_file_size_limit_applies(tmp_path: Path) -> None:
    backend = LocalBackend(limits=Limits(file_size_bytes=100_000), isolate=False)
    result = backend.run("head -c 1000000 /dev/zero > big.bin; echo rc=$?", tmp_path, 10)
    assert (tmp_path / "big.bin").stat().st_size <= 100_000
    assert "rc=0" not in result.stdout


def test_ansi_codes_are_stripped() -> None:
    text = format_result(ExecResult("\x1b[31mred\x1b[0m \x1b]0;title\x07plain\r\n", "", 0), 5)
    assert text == "red plain\n[exit code: 0]"


@pytest.mark.parametrize("command", ["vim a.py", "less README", "top", "python", "python3", "ipython",
                                     "cd x && nano f", "git log | less", "FOO=1 python3 -i", "bash", "tail -f log",
                                     "man ls", "watch ls"])
def test_interactive_programs_refused(command: str) -> None:
    assert refusal(command) and "Interactive command refused" in refusal(command)  # type: ignore[operator]


@pytest.mark.parametrize("command", ["python -c 'print(1)'", "python script.py", "git log --oneline | head",
                                     "grep -rn less src/", "echo vim", "python -m pytest -q", "bash -c 'ls'"])
def test_ordinary_commands_pass(command: str) -> None:
    assert refusal(command) is None


@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap is not usable here")
def test_bwrap_keeps_the_rest_of_the_filesystem_read_only(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    probe = Path("/usr/local/mcpworld-bwrap-probe")
    result = LocalBackend(isolate=True).run(
        f"echo ok > inside.txt; echo owned > {outside}; touch {probe}; echo rc=$?", ws, 10, writable=ws)
    assert (ws / "inside.txt").read_text() == "ok\n"
    assert outside.read_text() == "keep\n"  # /tmp is private to the sandbox
    assert not probe.exists() and "rc=1" in result.stdout and "Read-only file system" in result.stderr


def test_docker_backend_refuses_clearly_without_an_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(BackendUnavailable, match=r"^docker backend unavailable: "):
        make_backend("docker", [])
    with pytest.raises(BackendUnavailable, match="unknown backend"):
        make_backend("podman", [])


def test_backends_satisfy_the_seam() -> None:
    class Simulated:
        name = "simulated"

        def run(self, command: str, cwd: Path, timeout: float, env: dict[str, str] | None = None,
                writable: Path | None = None) -> ExecResult:
            return ExecResult("predicted\n", "", 0)

        def for_episode(self, instance: object) -> ThreadShell:
            return ThreadShell(self)

    class RunOnly:  # no episode shell: not a backend the SWE server could give an episode
        name = "run-only"

        def run(self, command: str, cwd: Path, timeout: float, env: dict[str, str] | None = None,
                writable: Path | None = None) -> ExecResult:
            return ExecResult("", "", 0)

    assert isinstance(LocalBackend(isolate=False), ExecutionBackend)
    assert isinstance(Simulated(), ExecutionBackend)
    assert not isinstance(RunOnly(), ExecutionBackend)


@pytest.mark.anyio
async def test_an_episode_shell_runs_off_the_event_loop(tmp_path: Path) -> None:
    """A blocking backend's episode shell runs each command in a worker thread, so the loop keeps serving: here
    the command waits for a file that only the event loop writes while the command runs."""
    import anyio

    shell = LocalBackend(isolate=False).for_episode(None)  # type: ignore[arg-type]

    async def release() -> None:
        await anyio.sleep(0)
        (tmp_path / "go").write_text("")

    async with anyio.create_task_group() as tg:
        tg.start_soon(release)
        result = await shell.run("until [ -f go ]; do sleep 0.01; done; echo done", tmp_path, 20)
    assert (result.stdout, result.exit_code, result.timed_out) == ("done\n", 0, False)
