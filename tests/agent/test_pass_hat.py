"""`mcpworld run -k K` plays each task K times and reports pass^1..pass^K as τ²-bench does (issue 32, item 4):
per task, C(c, k) / C(n, k) with c of its n samples passing, averaged over tasks, k up to the fewest samples a
task has; an episode lost to the infrastructure is not a sample. τ²'s own `pass_hat_k` is the oracle where its
environment (.venv/tau2-oracle, made by .ci/run) is present."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from mcpworld.agent.runner import pass_hat, summarize
from mcpworld.agent.trajectory import Trajectory
from mcpworld.core.models import Verdict
from mcpworld.core.termination import Termination
from mcpworld.core.testing import mcpworld_cmd

ORACLE = Path(__file__).resolve().parents[2] / ".venv" / "tau2-oracle" / "bin" / "python"
OUTCOMES = {"a": [True, True, True, False], "b": [True, False, False, False], "c": [True] * 4, "d": [False] * 4}


def played(outcomes: dict[str, list[bool]]) -> list[Trajectory]:
    return [Trajectory(server="s", task=task, sample=i, policy="p", reward=float(ok),
                       verdict=Verdict(passed=ok, score=float(ok)))
            for task, results in outcomes.items() for i, ok in enumerate(results)]


def test_pass_hat_is_taus_formula() -> None:
    got = pass_hat(played(OUTCOMES))
    assert list(got) == [1, 2, 3, 4]
    assert got[1] == pytest.approx((3 / 4 + 1 / 4 + 1 + 0) / 4)
    assert got[2] == pytest.approx((3 / 6 + 0 + 1 + 0) / 4)
    assert got[4] == pytest.approx(1 / 4)  # only the task that always passes


def test_lost_episodes_are_not_samples_and_k_stops_at_the_fewest() -> None:
    trajectories = played(OUTCOMES)
    trajectories[0] = trajectories[0].model_copy(update={"termination": Termination.INFRA_ERROR, "verdict": None,
                                                         "reward": 0.0})
    summary = summarize(trajectories)
    assert summary.lost == 1 and list(summary.pass_hat) == [1, 2, 3]
    assert ("pass^3", f"{summary.pass_hat[3]:.3f}") in summary.rows()
    assert summarize(played({"a": [True]})).pass_hat == {}  # one sample: no pass^k rows


@pytest.mark.skipif(not ORACLE.is_file(), reason="τ² oracle environment .venv/tau2-oracle is absent (.ci/run makes "
                                                 "it; see tests/synth/test_tau2.py)")
def test_pass_hat_equals_taus_own_code() -> None:
    code = ("import json, sys; from tau2.metrics.agent_metrics import pass_hat_k; o = json.load(sys.stdin); "
            "print(json.dumps({k: sum(pass_hat_k(len(v), sum(v), k) for v in o.values()) / len(o) "
            "for k in range(1, 5)}))")
    out = subprocess.run([str(ORACLE), "-c", code], input=json.dumps(OUTCOMES), capture_output=True, text=True,
                         check=True)
    theirs = {int(k): v for k, v in json.loads(out.stdout).items()}
    ours = pass_hat(played(OUTCOMES))
    assert ours.keys() == theirs.keys() and all(math.isclose(ours[k], theirs[k]) for k in ours)


def test_run_k_prints_pass_hat(worlds_url: str, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    proc = subprocess.run(mcpworld_cmd("run", "--server", f"{worlds_url}/worlds/airline/mcp", "--policy", "oracle",
                                       "--task", "business-seats-left", "--task", "total-paid", "-k", "3",
                                       "-o", str(out)),
                          env={**os.environ, "MCPWORLD_HOME": str(tmp_path), "COLUMNS": "200"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for k in (1, 2, 3):
        assert f"pass^{k}" in proc.stdout and "1.000" in proc.stdout.split(f"pass^{k}")[1].splitlines()[0]
    seeds = sorted(json.loads(line)["seed"] for line in out.read_text().splitlines())
    assert seeds == [0, 0, 1, 1, 2, 2]  # the oracle passes on each sample's own seed (amounts scaled)
