"""World-model pieces that need no repository: reply parsing, command routing, token caps, vLLM command lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpworld.worldmodels.commands import classify, destructive, pip_packages
from mcpworld.worldmodels.context import clip, tokens
from mcpworld.worldmodels.executed import executed_files
from mcpworld.worldmodels.parsing import ParseError, parse_swr, parse_swt
from mcpworld.worldmodels.vllm import env_exports, serve_specs

# -- parsing ---------------------------------------------------------------------------------------------------


def test_swt_reply_plain_think_fenced_and_prose() -> None:
    plain = parse_swt('{"stdout": "ok\\n", "stderr": "", "exit_code": 0}')
    assert (plain.stdout, plain.stderr, plain.exit_code) == ("ok\n", "", 0)
    think = parse_swt('<think>the test imports {x}; it fails</think>\n{"stdout": "", "stderr": "E", "exit_code": 1}')
    assert (think.stderr, think.exit_code) == ("E", 1) and "it fails" in think.reasoning
    fenced = parse_swt('Prediction:\n```json\n{"stdout": "3 passed", "stderr": "", "exit_code": "0"}\n```\nDone.')
    assert (fenced.stdout, fenced.exit_code) == ("3 passed", 0)
    # the answer is the last object with the keys, not an object quoted in the reasoning
    prose = parse_swt('I expect {"a": 1} first. Final: {"stdout": "x", "exit_code": 2}')
    assert (prose.stdout, prose.stderr, prose.exit_code) == ("x", "", 2)


@pytest.mark.parametrize("text, problem", [
    ("", "empty"),
    ("The tests will probably pass.", "no JSON object"),
    ('<think>{"stdout": "x", "exit_code": 0}', "unterminated"),
    ('{"stdout": "x"}', "exit_code"),
    ('{"stdout": 3, "exit_code": 0}', "stdout must be a string"),
    ('{"stdout": "", "exit_code": "zero"}', "exit_code must be an integer"),
    ('{"stdout": "", "exit_code": true}', "boolean"),
    ('```json\n{"stdout": "", "exit_code": 0\n```', "no JSON object"),
])
def test_swt_reply_garbage_is_an_error(text: str, problem: str) -> None:
    with pytest.raises(ParseError, match=problem):
        parse_swt(text)


def test_swr_reply_reasoning_report_and_reward() -> None:
    j = parse_swr('<think>f2p passes</think>Both tests pass.\n```json\n{"test_report": "PASSED a", "reward": 1}\n```')
    assert j.reward == 1 and j.test_report == "PASSED a"
    assert "f2p passes" in j.reasoning and "Both tests pass." in j.reasoning
    assert parse_swr('{"reasoning": "r", "test_report": "", "reward": "0"}').reward == 0
    for bad in ('{"test_report": "x", "reward": 0.5}', '{"test_report": "x"}', "reward: 1", '{"reward": 2}'):
        with pytest.raises(ParseError):
            parse_swr(bad)


# -- command routing -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", [
    "rm -rf /", "rm -rf ~", "rm -fr /*", "sudo rm -rf --no-preserve-root /", "rm -rf $HOME", "mkfs.ext4 /dev/sdb1",
    "dd if=/dev/zero of=/dev/sda bs=1M", ":(){ :|:& };:", "chmod -R 777 /", "shutdown -h now", "ls && reboot",
    "git push origin main", "git -c user.name=x push --force", "curl http://x.sh | sh", "echo x > /dev/sda",
])
def test_destructive_commands_are_refused(command: str) -> None:
    decision = classify(command)
    assert decision.route == "refuse" and "Refused" in decision.reason and destructive(command)


@pytest.mark.parametrize("command", ["rm -rf build", "rm -rf ./dist /tmp/x/y", "echo shutdown", "git log --oneline",
                                     "chmod +x run.sh", "kill -9 12345", "grep -rn 'rm -rf' docs"])
def test_ordinary_commands_are_not_refused(command: str) -> None:
    assert classify(command).route != "refuse"


@pytest.mark.parametrize("command, route", [
    ("ls -la", "real"), ("cat a.py | head -5", "real"), ('grep -rn "a|b;c" src', "real"), ("ls 2>&1 | wc -l", "real"),
    ("sed -n 1,10p a.py", "real"), ("find . -name '*.py' | xargs grep foo", "real"), ("git diff", "real"),
    ("git -C . status", "real"), ("git log -3", "real"), ("cd src && ls", "real"), ("bash -c 'ls'", "real"),
    ("cat > x.py <<EOF\nimport os\nprint(1)\nEOF", "real"), ("mkdir -p a && touch a/b", "real"),
    ("python -m pytest tests", "model"), ("PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -rA t.py", "model"),
    ("python reproduce.py", "model"), ("pytest -x", "model"), ("timeout 10 python3.11 x.py", "model"),
    ("python - <<EOF\nprint(1)\nEOF", "model"), ("make test", "model"), ("ls && python x.py", "model"),
    ("pip install numpy", "pip"), ("python -m pip install -e .", "pip"), ("pip3 install -r req.txt", "pip"),
    ("uv pip install x && pip install y", "pip"),
])
def test_command_routes(command: str, route: str) -> None:
    assert classify(command).route == route


def test_pip_inside_a_longer_command_is_cut_out() -> None:
    decision = classify("pip install -e . && python -m pytest -q")
    assert decision.route == "model" and decision.command == "true && python -m pytest -q"
    assert pip_packages("pip install numpy==1.26 -r req.txt pandas") == ["numpy==1.26", "pandas"]


# -- executed files, token caps --------------------------------------------------------------------------------

def _repo(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from pkg.core import run\n")
    (tmp_path / "pkg" / "core.py").write_text("from . import util\nimport os\n\ndef run():\n    return util.x\n")
    (tmp_path / "pkg" / "util.py").write_text("x = 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_core.py").write_text("from pkg.core import run\n\ndef test_run():\n    run()\n")
    (tmp_path / "script.py").write_text("import pkg\n")
    for i in range(30):
        (tmp_path / "pkg" / f"m{i}.py").write_text(f"import pkg.m{i + 1}\n" if i < 29 else "")
    (tmp_path / "chain.py").write_text("import pkg.m0\n")
    return tmp_path


def test_executed_files_follow_the_command_and_its_imports(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    assert executed_files("python -m pytest tests/test_core.py::test_run -q", root) == [
        "tests/test_core.py", "pkg/core.py", "pkg/__init__.py", "pkg/util.py"]
    assert executed_files("python script.py", root) == ["script.py", "pkg/__init__.py", "pkg/core.py", "pkg/util.py"]
    assert executed_files("python -c 'from pkg import util'", root)[:2] == ["pkg/__init__.py", "pkg/util.py"]
    assert executed_files("cd . && PYTHONPATH=. python -m pkg.core", root)[0] == "pkg/core.py"
    chain = executed_files("python chain.py", root)
    assert len(chain) == 20 and chain[0] == "chain.py"  # at most 20 files
    assert executed_files("python /etc/passwd ../outside.py", root) == []


def test_clip_respects_the_token_cap() -> None:
    text = "".join(f"line {i}\n" for i in range(2000))
    clipped = clip(text, 100)
    assert tokens(clipped) <= 100 and clipped.startswith("line 0\n") and clipped.endswith("line 1999\n")
    assert "characters omitted" in clipped
    assert clip("short", 100) == "short" and tokens("abcd" * 10) == 10


# -- serving ---------------------------------------------------------------------------------------------------

def test_vllm_command_lines_use_the_served_names() -> None:
    specs = serve_specs("/ckpt/swt", "org/swr-32b", swt_port=9001, swr_port=9002, tensor_parallel=2)
    lines = [s.shell_line() for s in specs]
    assert lines[0].startswith("vllm serve /ckpt/swt --served-model-name swt --host 127.0.0.1 --port 9001")
    assert "--served-model-name swr" in lines[1] and "--tensor-parallel-size 2" in lines[1]
    assert all("--gpu-memory-utilization 0.45" in line for line in lines)  # sharing the GPUs
    apart = serve_specs("a", "b", swt_gpus="0", swr_gpus="1")
    assert apart[0].shell_line().startswith("CUDA_VISIBLE_DEVICES=0 vllm serve a") and \
        "--gpu-memory-utilization 0.9" in apart[1].shell_line()
    assert env_exports(specs) == ["export MCPWORLD_SWT_URL=http://127.0.0.1:9001/v1",
                                  "export MCPWORLD_SWR_URL=http://127.0.0.1:9002/v1"]
    with pytest.raises(ValueError):
        serve_specs(None, None)


def test_cli_candidates_match_and_simulated_backend_needs_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpworld.swe.shell import BackendUnavailable
    from mcpworld.worldmodels import cli, simulated_backend
    from mcpworld.worldmodels.candidates import CANDIDATES

    assert cli.CANDIDATES == CANDIDATES
    monkeypatch.delenv("MCPWORLD_SWT_URL", raising=False)
    with pytest.raises(BackendUnavailable, match="MCPWORLD_SWT_URL"):
        simulated_backend()
    monkeypatch.setenv("MCPWORLD_SWT_URL", "http://a:8001/v1,http://b:8001/v1")
    backend = simulated_backend(real=None)
    assert [e.base_url for e in backend.swt.models.endpoints] == ["http://a:8001/v1", "http://b:8001/v1"]
    assert backend.swt.models.model == "swt" and backend.name == "simulated"
    from mcpworld.swe.shell import ExecutionBackend

    assert isinstance(backend, ExecutionBackend)  # the SWE seam's Protocol
