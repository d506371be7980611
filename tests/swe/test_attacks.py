"""The SWE sandbox against an agent that seeks root (issue 28): the two critical attacks, reproduced.

1. The workspace's parent folder is the sandbox's to write. `diff` (what `submit` grades) copied `.git/index` to
   `../submit.index` with the server's privileges, following a link the agent planted there: any host file
   written (or, through `.git/index`, read) as root.
2. Every folder listed in `.git/objects/info/alternates`, which the agent can write, was mounted into the next
   command: the agent chose its own mounts.
Each test failed on the code before the fix.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mcpworld.swe.shell import LocalBackend, bwrap_works
from mcpworld.swe.workspace import Workspace, borrowed_objects, checkout


def run(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    source = tmp_path / "src"
    source.mkdir()
    run("init", "-q", "-b", "main", cwd=source)
    (source / "app.py").write_text("def add(a, b):\n    return a - b\n")
    run("add", ".", cwd=source)
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base", cwd=source)
    bare = tmp_path / "bare.git"
    run("clone", "-q", "--bare", str(source), str(bare), cwd=tmp_path)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True).stdout.strip()
    ws = checkout(bare, commit, "repo", base_dir=str(tmp_path))
    yield ws
    ws.close()


def test_diff_never_writes_through_a_link_planted_beside_the_workspace(workspace: Workspace, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("the host's file\n")
    (workspace.parent / "submit.index").symlink_to(victim)  # where the server's throwaway index used to go
    (workspace.root / "app.py").write_text("def add(a, b):\n    return a + b\n")
    diff = workspace.diff()
    assert "+    return a + b" in diff
    assert victim.read_text() == "the host's file\n"  # before the fix: overwritten with a git index, as root


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_diff_never_reads_the_agents_index_through_a_link_or_a_special_file(workspace: Workspace, tmp_path: Path,
                                                                           kind: str) -> None:
    secret = tmp_path / "registry.token"
    secret.write_text("s3cret-token\n")
    index = workspace.root / ".git" / "index"
    index.unlink()
    if kind == "symlink":
        index.symlink_to(secret)  # before the fix: the secret was copied and fed to git (and the read hung on a FIFO)
    else:
        os.mkfifo(index)
    (workspace.root / "app.py").write_text("def add(a, b):\n    return a + b\n")
    diff = workspace.diff()  # a fresh index instead: the same diff, nothing read through the link
    assert "+    return a + b" in diff and "s3cret" not in diff


def test_mounts_come_from_the_servers_record_not_the_agents_alternates(workspace: Workspace, tmp_path: Path) -> None:
    recorded = borrowed_objects(workspace.root)
    assert recorded and all(Path(p).is_dir() for p in recorded)  # the bare repository's objects
    hidden = tmp_path / "another-episode"
    hidden.mkdir()
    (hidden / "gold.patch").write_text("the answer\n")
    alternates = workspace.root / ".git" / "objects" / "info" / "alternates"
    alternates.write_text(alternates.read_text() + f"{hidden}\n/proc\n")
    assert borrowed_objects(workspace.root) == recorded  # what the agent wrote changes nothing
    assert borrowed_objects(workspace.root / "sub" / "dir") == recorded


@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot make namespaces here")
def test_a_contained_command_cannot_see_a_path_it_listed_in_alternates(workspace: Workspace, tmp_path: Path) -> None:
    hidden = tmp_path / "another-episode"
    hidden.mkdir()
    (hidden / "gold.patch").write_text("the answer\n")
    alternates = workspace.root / ".git" / "objects" / "info" / "alternates"
    alternates.write_text(alternates.read_text() + f"{hidden}\n")
    result = LocalBackend(isolate=True).run(f"cat {hidden}/gold.patch; git log --oneline | wc -l",
                                            workspace.root, 30, writable=workspace.parent)
    assert "the answer" not in result.stdout  # before the fix: mounted, and readable
    assert result.stdout.strip().endswith("1")  # git still works on the objects the server recorded


@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot make namespaces here")
def test_a_contained_command_cannot_read_the_projects_answers(workspace: Workspace) -> None:
    """mcpworld's package data (every shipped gold patch, every world's tasks) was readable from the shell."""
    import mcpworld

    package = Path(mcpworld.__file__).resolve().parent
    gold = next(package.glob("swe/data/repos/*/instances/*/gold.patch"))
    tasks = package / "worlds" / "catalog" / "airline" / "tasks.py"
    assert gold.read_text() and tasks.read_text()  # the server itself reads them
    result = LocalBackend(isolate=True).run(f"cat {gold} {tasks}; ls {package} | wc -l; python -c 'print(1 + 1)'",
                                            workspace.root, 30, writable=workspace.parent)
    assert "diff --git" not in result.stdout and "Task(" not in result.stdout
    assert result.stdout.split()[-2:] == ["0", "2"]  # an empty folder; Python itself still runs


@pytest.mark.skipif(not bwrap_works(), reason="bubblewrap cannot make namespaces here")
def test_a_contained_command_reaches_no_host_socket_and_no_root_only_file(workspace: Workspace) -> None:
    """The network namespace does not cover filesystem sockets: one under /run was reachable, as root."""
    import socket
    import uuid

    path = Path("/run") / f"mcpworld-test-{uuid.uuid4().hex[:8]}.sock"
    if not os.access("/run", os.W_OK):
        pytest.skip("cannot create a socket under /run here")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    try:
        connect = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); print('connected')"
        probe = f'python -c "{connect}"; ls /run | wc -l; cat /etc/shadow 2>/dev/null | wc -c'

        result = LocalBackend(isolate=True).run(probe, workspace.root, 30, writable=workspace.parent)
        assert "connected" not in result.stdout, result.stdout  # before: connected, and the peer saw uid 0
        assert result.stdout.split()[-2:] == ["0", "0"]  # /run is empty; nothing of /etc/shadow is read
    finally:
        server.close()
        path.unlink(missing_ok=True)


def test_search_skips_fifos_and_devices_instead_of_blocking(workspace: Workspace) -> None:
    """A FIFO in the checkout made `search` block forever on it, holding its thread and the episode."""
    import threading

    from mcpworld.swe.search import search

    os.mkfifo(workspace.root / "pipe.py")
    (workspace.root / "dev.py").symlink_to("/dev/zero")  # a device behind a link (outside the checkout: skipped)
    done: list[str] = []
    worker = threading.Thread(target=lambda: done.append(search(workspace.root, "return")), daemon=True)
    worker.start()
    worker.join(timeout=60)  # a condition, not a timing: before the fix this thread never ended
    assert done and "app.py:2:" in done[0] and "pipe.py" not in done[0]


def test_a_pathological_pattern_stops_at_its_deadline_without_freezing_the_process(workspace: Workspace) -> None:
    """`(a|aa)+$` on a long line backtracks without end; with `re` it held the GIL: every world stopped."""
    import threading

    from mcpworld.swe.search import SearchError, search

    (workspace.root / "big.txt").write_text("a" * 60 + "b\n")
    outcome: list[BaseException | str] = []

    def run() -> None:
        try:
            outcome.append(search(workspace.root, "(a|aa)+$", timeout_s=2.0))
        except SearchError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    ticks = 0
    while worker.is_alive():  # this thread keeps running while the pattern is matched: the GIL is free
        ticks += 1
    worker.join()
    assert isinstance(outcome[0], SearchError) and "took longer than 2s" in str(outcome[0])
    assert ticks > 10_000


def test_diff_leaves_out_special_and_huge_files_and_stays_bounded(workspace: Workspace) -> None:
    """Three sparse 1 GiB files made the server's git take 38 s and 1 GB and send an 18 MB reply; a FIFO in the
    checkout could not be staged at all."""
    import threading

    for i in range(3):
        with open(workspace.root / f"big{i}.bin", "wb") as fh:
            fh.truncate(1 << 30)  # sparse: no disk used, but git would hash every byte
    os.mkfifo(workspace.root / "pipe")
    (workspace.root / "app.py").write_text("def add(a, b):\n    return a + b\n")
    done: list[str] = []
    worker = threading.Thread(target=lambda: done.append(workspace.diff()), daemon=True)
    worker.start()
    worker.join(timeout=120)  # a condition: the diff finishes (it never reads the big files)
    assert done and "+    return a + b" in done[0] and "big0.bin" not in done[0] and "pipe" not in done[0]
    assert workspace.left_out == ["big0.bin", "big1.bin", "big2.bin", "pipe"]
