"""The simulated backend on a real shipped-instance workspace, with SWT served by the replay server.

Real: read-only commands and file edits. Answered: pip install. Refused: destructive commands. Predicted: code
execution, from a context that carries the executed files, the originals and the agent's patch. Failures of the
model (HTTP 500, timeout, garbage) come back as exit code 125, never as output.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpworld.core.llm import LLMError
from mcpworld.core.llm_replay import ReplayLLM, serve
from mcpworld.core.testing import free_port
from mcpworld.swe.builder import build_instances
from mcpworld.swe.instances import Instance, load_instances
from mcpworld.swe.shell import EpisodeShell, ExecResult, LocalBackend, format_result
from mcpworld.swe.workspace import Workspace, WorkspacePool
from mcpworld.worldmodels.backend import SimulatedBackend
from mcpworld.worldmodels.llm_pool import Endpoint, ModelPool
from mcpworld.worldmodels.repo import patched_checkout
from mcpworld.worldmodels.swt import SWT
from mcpworld.worldmodels.testing import swt_reply

TEST_CMD = "```bash\nPYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest"  # the Command section, not the analysis


@pytest.fixture(scope="module")
def instances(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Instance]:
    return {i.instance_id: i for i in load_instances(build_instances(tmp_path_factory.mktemp("swe-built")))}


@pytest.fixture
def workspace(instances: dict[str, Instance]) -> Iterator[Workspace]:
    pool = WorkspacePool(warm=0)
    instance = instances["mcpworld__minicalc-1"]
    with patched_checkout(instance, instance.patch, pool) as ws:  # the agent's work so far: the gold fix
        yield ws
    pool.close_all()


class Recorder:
    """A real backend that remembers what it was asked to run."""

    name = "recorder"

    def __init__(self) -> None:
        self.inner, self.commands = LocalBackend(isolate=False), []

    def run(self, command: str, cwd: Path, timeout: float, env: dict[str, str] | None = None,
            writable: Path | None = None) -> ExecResult:
        self.commands.append(command)
        return self.inner.run(command, cwd, timeout, env, writable)


SCRIPTS = {
    f"{TEST_CMD} -rA -v -p no:cacheprovider tests/test_stats.py": [
        swt_reply("tests/test_stats.py::test_mean PASSED\n===== 5 passed in 0.01s =====\n", "", 0, think="gold fix")],
    "```bash\npython fenced.py": [{"role": "assistant", "content": "Sure:\n```json\n"
                                   '{"stdout": "FENCED\\n", "stderr": "", "exit_code": 3}\n```'}],
    "```bash\npython garbage.py": [{"role": "assistant", "content": "It would print hello, I think."}],
    "```bash\npython http500.py": [{"status": 500}],
    "```bash\npython slow.py": [{"sleep": 1.5}],
    "```bash\npython raw.py": [{"raw": "<html>not json</html>"}],
}


@pytest.fixture
def replay() -> Iterator[tuple[ReplayLLM, str]]:
    llm = ReplayLLM(SCRIPTS)
    with serve(llm, free_port()) as url:
        yield llm, url


def _backend(url: str, instance: Instance) -> tuple[SimulatedBackend, EpisodeShell, Recorder]:
    """The backend, and the shell of an episode on `instance` (what the SWE server gives each episode)."""
    real = Recorder()
    backend = SimulatedBackend(SWT(ModelPool.from_urls(url, "swt", timeout_s=0.5, retries=0)), real=real)
    return backend, backend.for_episode(instance), real


@pytest.mark.anyio
async def test_tests_are_predicted_from_a_full_context(replay: tuple[ReplayLLM, str], workspace: Workspace,
                                                 instances: dict[str, Instance]) -> None:
    llm, url = replay
    instance = instances["mcpworld__minicalc-1"]
    backend, shell, real = _backend(url, instance)
    result = await shell.run(instance.test_command(), workspace.root, 30)
    assert (result.stdout, result.exit_code) == ("tests/test_stats.py::test_mean PASSED\n===== 5 passed in 0.01s "
                                                 "=====\n", 0)
    assert real.commands == []  # nothing ran: the output is SWT's
    body = llm.requests[-1]
    assert body["model"] == "swt" and body["temperature"] == 0.0
    prompt = body["messages"][1]["content"]
    assert instance.problem_statement.strip() in prompt
    assert "## tests/test_stats.py\n" in prompt and "## minicalc/stats.py\n" in prompt  # executed files
    assert "## minicalc/util.py\n" in prompt  # ... and what they import
    assert "Original content of the files the agent modified" in prompt
    assert prompt.count("return (items[middle - 1] + items[middle]) / 2") == 2  # current file + the patch
    assert "+        return (items[middle - 1] + items[middle]) / 2" in prompt
    assert "Definitions of names in the issue: minicalc/stats.py:12 median" in prompt  # the analysis
    assert "gold patch" not in prompt  # not unless asked
    assert str(workspace.root) in prompt


@pytest.mark.anyio
async def test_malformed_and_failed_predictions_are_failures(replay: tuple[ReplayLLM, str], workspace: Workspace,
                                                       instances: dict[str, Instance]) -> None:
    _, url = replay
    backend, shell, real = _backend(url, instances["mcpworld__minicalc-1"])
    fenced = await shell.run("python fenced.py", workspace.root, 30)
    assert (fenced.stdout, fenced.exit_code) == ("FENCED\n", 3)
    for command, reason in [("python garbage.py", "could not be read"), ("python http500.py", "HTTP 500"),
                            ("python slow.py", "timed out"), ("python raw.py", "SWT endpoint failed"),
                            ("python unscripted.py", "HTTP 404")]:
        result = await shell.run(command, workspace.root, 30)
        assert result.exit_code == 125 and result.stdout == "", command
        assert "[simulator failed]" in result.stderr and reason in result.stderr, (command, result.stderr)
        assert "not executed" in format_result(result, 30)
    assert real.commands == []


@pytest.mark.anyio
async def test_read_only_and_file_commands_run_for_real(replay: tuple[ReplayLLM, str], workspace: Workspace,
                                                  instances: dict[str, Instance]) -> None:
    llm, url = replay
    backend, shell, real = _backend(url, instances["mcpworld__minicalc-1"])
    (workspace.root / "notes.txt").write_text("only-on-this-disk 4711\n")
    assert (await shell.run("cat notes.txt", workspace.root, 30)).stdout == "only-on-this-disk 4711\n"
    assert "notes.txt" in (await shell.run("ls", workspace.root, 30)).stdout
    assert (await shell.run("grep -n 'middle - 1' minicalc/stats.py", workspace.root, 30)).stdout.startswith("17:")
    assert "minicalc/stats.py" in (await shell.run("git status --short", workspace.root, 30)).stdout
    assert (await shell.run("sed -n 2p notes.txt; wc -l < notes.txt", workspace.root, 30)).stdout == "1\n"
    assert (await shell.run("echo made > new.txt && mkdir -p d", workspace.root, 30)).exit_code == 0
    assert (workspace.root / "new.txt").read_text() == "made\n" and (workspace.root / "d").is_dir()
    assert len(real.commands) == 6 and llm.requests == []


@pytest.mark.anyio
async def test_pip_install_is_answered_without_running(replay: tuple[ReplayLLM, str], workspace: Workspace,
                                                 instances: dict[str, Instance]) -> None:
    llm, url = replay
    backend, shell, real = _backend(url, instances["mcpworld__minicalc-1"])
    result = await shell.run("pip install no-such-package-mcpworld==9.9", workspace.root, 30)
    assert (result.exit_code, result.stdout) == (0, "Successfully installed no-such-package-mcpworld==9.9\n")
    assert (await shell.run("python -m pip install -e .", workspace.root, 30)).exit_code == 0
    assert real.commands == [] and llm.requests == []
    assert backend.routes["pip"] == 2


@pytest.mark.anyio
async def test_destructive_commands_are_refused_and_never_run(replay: tuple[ReplayLLM, str], workspace: Workspace,
                                                        instances: dict[str, Instance]) -> None:
    llm, url = replay
    backend, shell, real = _backend(url, instances["mcpworld__minicalc-1"])
    for command in ("rm -rf /", "rm -rf ~", "git push origin main", ":(){ :|:& };:", "ls; dd if=/dev/zero of=/dev/sda"):
        result = await shell.run(command, workspace.root, 30)
        assert result.exit_code == 1 and result.stderr.startswith("Refused:"), command
    assert real.commands == [] and llm.requests == []
    assert (workspace.root / "minicalc").is_dir()


def test_grading_seam_answers_and_runs_but_never_guesses(replay: tuple[ReplayLLM, str], workspace: Workspace) -> None:
    """The blocking `run` (what grading calls) has no episode: real commands run, predictions fail clearly."""
    llm, url = replay
    backend = SimulatedBackend(SWT(ModelPool.from_urls(url, "swt")), real=LocalBackend(isolate=False))
    result = backend.run("python -m pytest", workspace.root, 30)
    assert result.exit_code == 125 and "only in an episode's shell" in result.stderr and llm.requests == []
    assert "minicalc" in backend.run("ls", workspace.root, 30).stdout
    assert backend.run("rm -rf ~", workspace.root, 30).stderr.startswith("Refused:")


@pytest.mark.anyio
async def test_model_pool_round_robin_and_failover() -> None:
    a, b = ReplayLLM({"hi": [{"role": "assistant", "content": "A"}]}), ReplayLLM({"hi": [{"status": 503}]})
    with serve(a, free_port()) as url_a, serve(b, free_port()) as url_b:
        pool = ModelPool([Endpoint(url_a, "swt"), Endpoint(url_b, "swt")], retries=0, timeout_s=5)
        answers = [(await pool.complete([{"role": "user", "content": "hi"}])).message["content"] for _ in range(4)]
        assert answers == ["A"] * 4  # b fails every time: its turns fail over to a
        assert len(a.requests) == 4 and len(b.requests) == 2  # round robin: b was tried first twice
        dead = ModelPool([Endpoint(url_b, "swt")], retries=1, timeout_s=5)
        with pytest.raises(LLMError, match="HTTP 503"):
            await dead.complete([{"role": "user", "content": "hi"}])
        assert len(b.requests) == 4  # one try and one retry
        random_pool = ModelPool.from_urls(f"{url_a}, {url_a}", "swt", strategy="random", seed=3)
        assert (await random_pool.complete([{"role": "user", "content": "hi"}])).message["content"] == "A"
        await pool.aclose()
    assert json.loads(json.dumps(a.requests[0]))["model"] == "swt"
