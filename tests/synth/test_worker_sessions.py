"""Worker sessions: a job naming a session runs in that session's long-lived process (no fork per job), with the
limits of a one-job child; what a job starts dies with the job; a session ends with `Worker.end`, on a timeout,
and past the pool's bound (least recently used first), and every process under it goes."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from mcpworld.synth.sandbox.worker import POOL, Limits, Worker

CALL = "mcpworld.synth.sandbox.jobs:call_function"
PID = "import os\ndef f():\n    return os.getpid()"
# a module-level counter: it survives between a session's jobs, and not between one-job children
COUNT = "import sys\ndef f():\n    sys.counter = getattr(sys, 'counter', 0) + 1\n    return sys.counter"


@pytest.fixture
def worker() -> Iterator[Worker]:
    w = Worker(Limits(cpu_s=2, wall_s=2.0, memory_mb=512), preload=("json", "mcpworld.synth.sandbox.jobs"))
    yield w
    w.close()


def run(worker: Worker, source: str, session: str | None = None):  # noqa: ANN201
    result = worker.run(CALL, {"source": source, "name": "f", "args": {}}, session=session)
    assert result.ok, result.error
    return result.value


def descendants(pid: int) -> int:
    """How many processes run under `pid` (its children, theirs, ...)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents.setdefault(int(f.read().rpartition(")")[2].split()[1]), []).append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    todo, seen = [pid], 0
    while todo:
        kids = parents.get(todo.pop(), [])
        seen += len(kids)
        todo += kids
    return seen


def under(worker: Worker) -> int:
    assert worker._proc is not None
    return descendants(worker._proc.pid)


def test_a_session_keeps_its_process_and_state_between_jobs(worker: Worker) -> None:
    assert run(worker, COUNT) == run(worker, COUNT) == 1  # one-job children: a fresh copy each time
    first = run(worker, PID, "a")
    assert run(worker, PID, "a") == first and run(worker, COUNT, "a") == 1 and run(worker, COUNT, "a") == 2
    assert run(worker, PID, "b") != first and run(worker, COUNT, "b") == 1  # another session: its own process


def test_ending_a_session_kills_its_process(worker: Worker) -> None:
    run(worker, PID)
    alone = under(worker)
    run(worker, PID, "a")
    assert under(worker) == alone + 1
    worker.end("a")
    assert under(worker) == alone
    assert run(worker, COUNT, "a") == 1  # a later job of that session starts it afresh


def test_what_a_session_job_starts_dies_with_the_job(worker: Worker) -> None:
    run(worker, PID, "a")
    with_session = under(worker)
    started = run(worker, "import subprocess\ndef f():\n    return subprocess.Popen(['sleep', '60']).pid", "a")
    assert started and under(worker) == with_session


def test_a_session_past_its_wall_clock_is_killed_and_replaced(worker: Worker) -> None:
    first = run(worker, PID, "a")
    began = time.monotonic()
    late = worker.run(CALL, {"source": "import time\ndef f():\n    time.sleep(30)", "name": "f", "args": {}},
                      session="a")
    assert late.kind == "timeout" and time.monotonic() - began < 10
    assert run(worker, PID, "a") != first


def test_sessions_past_the_pool_bound_end_least_recent_first(worker: Worker) -> None:
    POOL.resize(2)
    try:
        run(worker, PID)
        alone = under(worker)
        pids = {s: run(worker, PID, s) for s in ("a", "b")}
        assert run(worker, PID, "a") == pids["a"]  # a is now the most recent: b is the least
        run(worker, PID, "c")
        assert POOL.sessions() == 2 and under(worker) == alone + 2
        assert run(worker, PID, "a") == pids["a"] and run(worker, PID, "b") != pids["b"]
    finally:
        POOL.resize(None)


def test_closing_the_worker_kills_every_session(worker: Worker) -> None:
    for s in ("a", "b"):
        run(worker, PID, s)
    assert worker._proc is not None
    zygote = worker._proc.pid
    worker.close()
    assert descendants(zygote) == 0 and POOL.sessions() == 0


def test_a_jobs_files_are_its_own_in_a_session_too(worker: Worker) -> None:
    read = "import os\ndef f():\n    return sorted(os.listdir('.')), open('note.txt').read()"
    for session in (None, "a"):
        done = worker.run(CALL, {"source": read, "name": "f", "args": {}}, files={"note.txt": "hi"}, session=session)
        assert done.ok and "note.txt" in done.value[0] and done.value[1] == "hi", done
    left = "import os\ndef f():\n    return os.listdir('.')"
    assert run(worker, left, "a") == []  # the last job's file went with it
