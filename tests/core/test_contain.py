"""The containment layer (mcpworld.core.contain) against the attacks it exists for.

Each attack runs through the real SWE backend (`LocalBackend`, which bash and grading commands use) or the real
synthesis worker. With bubblewrap missing or unable to create namespaces here, the contained tests skip with that
reason (docs/security.md, "Containment"); the refusal tests run everywhere.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpworld.core import contain
from mcpworld.core.contain import wait_until
from mcpworld.swe.shell import BackendUnavailable, Limits, LocalBackend, scrubbed_env
from mcpworld.synth.sandbox import worker as worker_mod
from mcpworld.synth.sandbox.worker import Worker

NO_BWRAP = "bubblewrap is missing or cannot create namespaces on this machine (see docs/security.md, Containment)"
needs_bwrap = pytest.mark.skipif(contain.bwrap_exe() is None, reason=NO_BWRAP)
CALL = "mcpworld.synth.sandbox.jobs:call_function"


def _marker() -> str:
    """A unique `sleep` duration, so a process scan finds only what this test started."""
    return f"{9000 + uuid.uuid4().int % 900000}"


def _running(marker: str) -> list[int]:
    """Host pids whose command line is `sleep <marker>` (zombies excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if argv[:2] == [b"sleep", marker.encode()] and state != "Z":
            found.append(int(entry))
    return found


@pytest.fixture
def workspace() -> Iterator[Path]:
    """A workspace folder outside /tmp (so only the sandbox's own rules, not its private /tmp, keep things out)."""
    parent = Path(tempfile.mkdtemp(prefix="mcpworld-contain-", dir="/var/tmp"))
    (parent / "repo").mkdir()
    (parent / "home").mkdir()
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def backend() -> LocalBackend:
    if contain.bwrap_exe() is None:
        pytest.skip(NO_BWRAP)
    return LocalBackend()


def run(backend: LocalBackend, ws: Path, command: str, timeout: float = 20):
    return backend.run(command, ws / "repo", timeout, env=scrubbed_env(ws / "home"), writable=ws)


# -- SWE bash / grading commands -----------------------------------------------------------------------------

SERVER = """
import sys
from pathlib import Path
from mcpworld.swe.shell import LocalBackend, scrubbed_env
ws = Path(sys.argv[1])
result = LocalBackend().run(sys.argv[2], ws / "repo", 20, env=scrubbed_env(ws / "home"), writable=ws)
sys.stdout.write(result.stdout + result.stderr)
"""


def test_server_secrets_are_not_readable(workspace: Path) -> None:
    if contain.bwrap_exe() is None:
        pytest.skip(NO_BWRAP)
    secret = f"fake-secret-{uuid.uuid4().hex}"
    # A real server process with the secret in its environment from the start (what /proc/PID/environ shows).
    env = {**os.environ, "MCPWORLD_TEST_SECRET": secret}
    command = ("cat /proc/$PPID/environ; echo; env; cat /proc/1/environ; "
               "for f in /proc/[0-9]*/environ; do cat $f; echo; done; echo END")
    done = subprocess.run([sys.executable, "-c", SERVER, str(workspace), command], env=env, capture_output=True,
                          text=True, timeout=60)
    assert "END" in done.stdout, done
    assert secret not in done.stdout
    assert "test-registry-token" not in done.stdout  # the token conftest puts in the environment
    assert f"HOME={workspace / 'home'}" in done.stdout


def test_no_network_even_to_a_local_listener(backend: LocalBackend, workspace: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(5)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        code = (f"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=5); "
                "s.sendall(b'hi'); print('CONNECTED')")
        result = run(backend, workspace, f"python -c \"{code}\"")
        assert "CONNECTED" not in result.stdout and result.exit_code != 0, result
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected


def test_writes_outside_the_workspace_fail(backend: LocalBackend, workspace: Path) -> None:
    outside = Path(tempfile.mkdtemp(prefix="mcpworld-outside-", dir="/var/tmp"))
    try:
        result = run(backend, workspace, f"echo x > {outside}/pwned; echo x > /var/tmp/pwned-{outside.name}; "
                                         "echo x > inside; echo x > ../home/ok; echo done")
        assert "done" in result.stdout
        assert not (outside / "pwned").exists() and not Path(f"/var/tmp/pwned-{outside.name}").exists()
        assert (workspace / "repo" / "inside").exists() and (workspace / "home" / "ok").exists()
    finally:
        shutil.rmtree(outside, ignore_errors=True)
        Path(f"/var/tmp/pwned-{outside.name}").unlink(missing_ok=True)


def test_remounting_the_host_writable_fails_even_for_root(backend: LocalBackend, workspace: Path) -> None:
    """Issue 28: run by root, bubblewrap kept every capability inside its user namespace: `mount -o remount,rw,bind
    /` made the host's read-only filesystem writable (a file appeared in the host's /usr/local). The sandbox now
    drops every capability."""
    target = Path("/usr/local") / f".mcpworld-remount-{uuid.uuid4().hex}"
    try:
        result = run(backend, workspace, "grep CapEff /proc/self/status; mount -o remount,rw,bind / ; "
                                         f"mount -o remount,rw,bind /usr ; echo x > {target}; echo done")
        assert "done" in result.stdout and "CapEff:\t0000000000000000" in result.stdout, result.stdout
        assert not target.exists(), "the sandbox wrote the host's /usr"
        # the host's whole filesystem, read-only (how workers and checks run): / itself must stay read-only
        shown = contain.Contained(["sh", "-c", f"mount -o remount,rw,bind / ; echo x > {target}"], contain=True,
                                  env={"PATH": "/usr/bin:/bin"}, host_root=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shown.wait(timeout=20)
        assert not target.exists(), "the sandbox remounted the host's / writable and wrote it"
    finally:
        target.unlink(missing_ok=True)


def test_registry_token_and_other_users_tmp_files_are_unreadable(backend: LocalBackend, workspace: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    data = Path(tempfile.mkdtemp(prefix="mcpworld-data-", dir="/var/tmp"))  # outside /tmp: hidden on purpose
    other = Path(tempfile.mkdtemp(prefix="someone-else-"))  # under the host's /tmp
    try:
        monkeypatch.setenv("MCPWORLD_HOME", str(data))
        token = f"tok-{uuid.uuid4().hex}"
        (data / "registry.token").write_text(token)
        (other / "notes.txt").write_text(f"private-{token}")
        result = run(backend, workspace, f"cat {data}/registry.token; cat {other}/notes.txt; "
                                         "cat ~/.mcpworld/registry.token /root/.mcpworld/registry.token; echo END")
        assert "END" in result.stdout
        assert token not in result.stdout
        assert (data / "registry.token").read_text() == token  # hidden, not touched
    finally:
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)


# A double fork whose grandchild leaves the process group (so a process-group kill alone misses it).
DOUBLE_FORK = ("python -c \"import os; os._exit(0) if os.fork() else os.setpgid(0, 0); "
               "os._exit(0) if os.fork() else os.execvp('sleep', ['sleep', '{marker}'])\"; echo forked")


@pytest.mark.parametrize("how", ["setsid", "double-fork"])
def test_nothing_outlives_a_timeout(backend: LocalBackend, workspace: Path, how: str) -> None:
    marker = _marker()
    escape = {"setsid": f"setsid sh -c 'sleep {marker} & echo $!'",
              "double-fork": DOUBLE_FORK.format(marker=marker)}[how]
    result = run(backend, workspace, f"{escape}; sleep 5{marker}", timeout=2)
    assert result.timed_out
    assert result.stdout.strip(), "the escape never started"
    assert wait_until(lambda: not _running(marker), timeout=10), _running(marker)


def test_nothing_outlives_a_command_that_finished(backend: LocalBackend, workspace: Path) -> None:
    marker = _marker()
    result = run(backend, workspace, f"setsid sh -c 'sleep {marker} &'; (sleep {marker} &); echo started")
    assert result.exit_code == 0 and "started" in result.stdout
    assert wait_until(lambda: not _running(marker), timeout=10), _running(marker)


def test_process_cap_holds_even_for_root(workspace: Path) -> None:
    if contain.bwrap_exe() is None:
        pytest.skip(NO_BWRAP)
    backend = LocalBackend(limits=Limits(processes=20))
    marker = _marker()
    code = ("import subprocess\nkids = []\nfor i in range(50):\n    try:\n"
            f"        kids.append(subprocess.Popen(['sleep', '{marker}']))\n"
            "    except OSError:\n        break\nprint('STARTED', len(kids), flush=True)\n"
            "for k in kids:\n    k.kill()\n")
    (workspace / "repo" / "bomb.py").write_text(code)
    result = run(backend, workspace, "python bomb.py", timeout=30)
    started = [int(line.split()[1]) for line in result.stdout.splitlines() if line.startswith("STARTED")]
    # Either the cap refused the forks (cgroup pids.max / rlimit), or the watchdog killed the tree.
    assert (started and started[0] < 20) or (not started and "more than 20 processes" in result.stderr), \
        (contain.cap_kind(), result)
    assert wait_until(lambda: not _running(marker), timeout=10)


# -- without bubblewrap: refuse unless the user opts out --------------------------------------------------------

@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(contain, "bwrap_exe", lambda: None)
    monkeypatch.delenv(contain.ALLOW_ENV, raising=False)
    monkeypatch.delenv("MCPWORLD_SANDBOX", raising=False)
    worker_mod.sandbox_kind.cache_clear()
    yield
    worker_mod.sandbox_kind.cache_clear()


def test_uncontained_shell_is_refused_with_the_reason(no_bwrap: None) -> None:
    with pytest.raises(BackendUnavailable) as err:
        LocalBackend()
    text = str(err.value)
    assert "bubblewrap" in text and "apt-get install -y bubblewrap" in text
    assert "network" in text and "registry token" in text and contain.ALLOW_ENV in text


def test_uncontained_worker_is_refused(no_bwrap: None) -> None:
    w = Worker()
    try:
        with pytest.raises(contain.ContainmentUnavailable, match="bubblewrap"):
            w.run(CALL, {"source": "def f():\n    return 1", "name": "f", "args": {}})
    finally:
        w.close()


def test_opted_out_shell_still_kills_its_group_and_scrubs_env(no_bwrap: None, workspace: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(contain.ALLOW_ENV, "1")
    monkeypatch.setenv("MCPWORLD_TEST_SECRET", "opted-out-secret")
    backend = LocalBackend()
    assert not backend.isolate and "NOT isolated" in backend.describe()
    marker = _marker()
    result = run(backend, workspace, f"env; (sleep {marker}; echo late) & sleep 5{marker}", timeout=1)
    assert result.timed_out and "opted-out-secret" not in result.stdout
    assert wait_until(lambda: not _running(marker), timeout=10), _running(marker)


# -- synthesis workers -----------------------------------------------------------------------------------------

@pytest.fixture
def worker() -> Iterator[Worker]:
    if worker_mod.sandbox_kind() == "none" and not contain.allow_uncontained():
        pytest.skip(NO_BWRAP)
    w = Worker(preload=("json", "mcpworld.synth.sandbox.jobs"))
    yield w
    w.close()


def test_worker_job_children_do_not_outlive_the_job(worker: Worker) -> None:
    marker = _marker()
    source = ("import os, subprocess\ndef f():\n"
              f"    subprocess.Popen(['setsid', 'sh', '-c', 'sleep {marker} &']).wait()\n"
              "    if os.fork() == 0:\n"
              "        if os.fork() == 0:\n"
              "            os.setsid()\n"
              f"            os.execvp('sleep', ['sleep', '{marker}'])\n"
              "        os._exit(0)\n"
              "    os.wait()\n"
              f"    subprocess.Popen(['sleep', '{marker}'])\n"
              "    return 'spawned'\n")
    result = worker.run(CALL, {"source": source, "name": "f", "args": {}})
    assert result.ok and result.value == "spawned", result
    assert wait_until(lambda: not _running(marker), timeout=10), _running(marker)
    assert worker.run(CALL, {"source": "def f():\n    return 2", "name": "f", "args": {}}).value == 2


def test_worker_refuses_a_huge_result_once(worker: Worker) -> None:
    source = "def f():\n    return 'x' * (100 * 1024 * 1024)"
    result = worker.run(CALL, {"source": source, "name": "f", "args": {}})
    assert not result.ok and result.kind == "error", result
    assert "result too large" in (result.error or "") and "result_mb" in (result.error or "")
    assert worker.starts == 1  # no timeout, no restart, no second run
    assert worker.run(CALL, {"source": "def f():\n    return 3", "name": "f", "args": {}}).value == 3
    assert worker.starts == 1


def test_files_other_users_may_not_read_are_empty_in_the_sandbox(backend: LocalBackend, workspace: Path) -> None:
    """Issue 28: the sandbox's uid is the host's, so a fixed list of secrets missed the rest: /etc/shadow- (the
    password hashes' backup) was readable from the shell tool. Every file under /etc, /var, /opt, /srv that
    other users may not read now reads as empty, whatever its name."""
    planted = Path("/etc") / f"mcpworld-secret-{uuid.uuid4().hex}"
    planted.write_text("host-secret-value\n")
    planted.chmod(0o600)
    contain.private_paths.cache_clear()
    try:
        result = run(backend, workspace, f"cat {planted}; cat /etc/shadow- /etc/gshadow- 2>/dev/null; echo done")
        assert "done" in result.stdout and "host-secret-value" not in result.stdout
        assert "root:" not in result.stdout, result.stdout
    finally:
        planted.unlink()
        contain.private_paths.cache_clear()
