"""The sandboxed worker: results, limits that kill runaways, a zygote that survives them, no network; the same
under another interpreter (AWM's runtime), which sees the `mcpworld` package but none of this Python's libraries."""

from __future__ import annotations

import sys
import time

import pytest

from mcpworld.synth.sandbox.worker import SOURCE_ROOT, Limits, Worker, sandbox_kind

CALL = "mcpworld.synth.sandbox.jobs:call_function"


@pytest.fixture(scope="module", params=["this-python", "awm-runtime"])
def worker(request: pytest.FixtureRequest):
    """Every guarantee holds for this Python and for another one (AWM's runtime: `awm_runtime`)."""
    own = request.getfixturevalue("awm_runtime") if request.param == "awm-runtime" else None
    w = Worker(Limits(cpu_s=1, wall_s=2.5, memory_mb=512), preload=("json", "mcpworld.synth.sandbox.jobs"),
               interpreter=own)
    yield w
    w.close()


def snippet(worker: Worker, source: str, **args):
    return worker.run(CALL, {"source": source, "name": "f", "args": args})


def test_runs_code_and_captures_output(worker: Worker) -> None:
    result = snippet(worker, "def f(x):\n    print('side note')\n    return {'double': x * 2}", x=21)
    assert result.ok and result.value == {"double": 42}
    assert "side note" in result.output


def test_errors_come_back_with_their_traceback(worker: Worker) -> None:
    result = snippet(worker, "def f():\n    return undefined_name + 1")
    assert not result.ok and result.kind == "error"
    assert "NameError" in result.error and "undefined_name" in result.traceback


def test_runaway_loop_is_killed_and_the_worker_survives(worker: Worker) -> None:
    began = time.monotonic()
    result = snippet(worker, "def f():\n    while True:\n        pass")
    elapsed = time.monotonic() - began
    assert not result.ok and result.kind in ("cpu", "timeout"), result
    assert elapsed < 4.0
    sleeper = snippet(worker, "import time\ndef f():\n    time.sleep(60)")
    assert sleeper.kind == "timeout" and "2.5s" in sleeper.error
    starts = worker.starts
    assert snippet(worker, "def f():\n    return 'still here'").value == "still here"
    assert worker.starts == starts  # the zygote itself never died


def test_memory_limit(worker: Worker) -> None:
    result = snippet(worker, "def f():\n    return len('x' * (2 * 1024 ** 3))")
    assert not result.ok and ("MemoryError" in (result.error or "") or result.kind == "killed")


def test_exit_does_not_take_the_worker_down(worker: Worker) -> None:
    result = snippet(worker, "import os\ndef f():\n    os._exit(3)")
    assert not result.ok and "status 3" in result.error
    assert snippet(worker, "def f():\n    return 1").value == 1


def test_environment_is_scrubbed_and_cwd_is_private(worker: Worker, monkeypatch: pytest.MonkeyPatch) -> None:
    result = snippet(worker, "import os\ndef f():\n    return dict(os.environ), os.getcwd()")
    env, cwd = result.value
    assert not {"OPENAI_API_KEY", "MCPWORLD_HOME", "HTTP_PROXY"} & set(env)
    assert env["HOME"] == cwd and "mcpworld-worker-" in cwd
    files = snippet(worker, "import os\ndef f():\n    open('scratch.txt', 'w').write('x')\n    return os.listdir('.')")
    assert "scratch.txt" in files.value
    assert "scratch.txt" not in snippet(worker, "import os\ndef f():\n    return os.listdir('.')").value


@pytest.mark.skipif(sandbox_kind() == "none", reason="neither bubblewrap nor unshare works here: no network "
                                                     "namespace (documented in docs/synthesis.md)")
def test_no_network(worker: Worker) -> None:
    result = snippet(worker, "import socket\ndef f():\n    socket.create_connection(('1.1.1.1', 53), timeout=2)")
    assert not result.ok and ("unreachable" in result.error.lower() or "OSError" in result.error)


@pytest.mark.skipif(sandbox_kind() != "bwrap", reason="file-system isolation needs bubblewrap")
def test_host_files_are_invisible_and_read_only(worker: Worker, tmp_path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    result = snippet(worker, f"import os\ndef f():\n    return os.path.exists({str(secret)!r})")
    assert result.ok and result.value is False
    write = snippet(worker, "def f():\n    open('/usr/evil', 'w').write('x')")
    assert not write.ok and ("Read-only" in write.error or "Permission" in write.error)


def test_another_interpreter_runs_isolated_with_only_the_mcpworld_package(worker: Worker) -> None:
    """`python -I`, and on its path mcpworld's package alone: never a folder of this Python's libraries."""
    result = snippet(worker, "import sys, importlib.util\ndef f():\n    return sys.flags.isolated, sys.executable, "
                             "sys.path, importlib.util.find_spec('mcpworld') is not None")
    isolated, executable, path, has_mcpworld = result.value
    assert isolated == 1 and has_mcpworld
    if worker.interpreter is not None:
        assert executable == worker.interpreter.python
        assert not [p for p in path if p.startswith(sys.prefix) or p == str(SOURCE_ROOT)]


def test_the_zygote_is_a_module_the_worker_runs_as_a_file() -> None:
    """Importing the zygote (to read, lint, type-check it) runs nothing; the worker starts that very file."""
    from pathlib import Path

    from mcpworld.synth.sandbox import worker as worker_mod
    from mcpworld.synth.sandbox import zygote

    assert worker_mod.ZYGOTE == Path(zygote.__file__).resolve()
    assert str(worker_mod.ZYGOTE) in Worker()._command()
    assert zygote.call_entry({"entry": "json:loads", "args": {"s": "[1]"}}) == {"ok": True, "value": [1]}
    failed = zygote.call_entry({"entry": "json:loads", "args": {"s": "{"}})
    assert failed["ok"] is False and failed["kind"] == "error" and failed["error"].startswith("JSONDecodeError")
