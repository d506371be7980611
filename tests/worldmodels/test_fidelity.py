"""Fidelity metrics on a hand-checked mix, `eval` against real runs and real grading, and `collect` producing
distillation pairs whose labels are the real outputs, logs and rewards."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mcpworld.core.llm_replay import ReplayLLM, serve
from mcpworld.core.testing import free_port
from mcpworld.worldmodels.cli import collect_command, eval_command, serve_model_command
from mcpworld.worldmodels.fidelity import SWRCase, SWTCase, similarity, swr_metrics, swt_metrics
from mcpworld.worldmodels.parsing import parse_swr, parse_swt
from mcpworld.worldmodels.testing import SequencedReplay, swr_reply, swt_reply

IID = "mcpworld__minicalc-1"
EXTRA = "python -c 'import sys; print(42); sys.exit(3)'"


@pytest.fixture(scope="module")
def instances_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mcpworld.swe.builder import build_instances

    return build_instances(tmp_path_factory.mktemp("swe-built"))


def _cli() -> click.Group:
    return click.Group(commands={c.name: c for c in (collect_command, eval_command, serve_model_command)})


def test_swt_metrics_by_hand() -> None:
    cases = [SWTCase("i", "gold", "c1", 0, "abc", 0, "abc"),  # agree, similarity 1
             SWTCase("i", "gold", "c2", 1, "abcd", 0, "abce"),  # disagree, 2*3/8 = 0.75
             SWTCase("i", "gold", "c3", 2, "", 2, ""),  # agree, two empty outputs are identical: 1
             SWTCase("i", "gold", "c4", 0, "x", None, "", "timed out"),  # SWT failed: counted, not scored
             SWTCase("i", "gold", "c5", 1, "aaaa", 1, "aabb")]  # agree, 2*2/8 = 0.5
    assert [similarity("abcd", "abce"), similarity("", ""), similarity("aaaa", "aabb")] == [0.75, 1.0, 0.5]
    m = swt_metrics(cases)
    assert (m["cases"], m["answered"], m["failed"]) == (5, 4, 1)
    assert m["exit_code_agreement"] == 3 / 4
    assert m["output_similarity"] == pytest.approx((1 + 0.75 + 1 + 0.5) / 4)  # 0.8125
    assert swt_metrics([SWTCase("i", "g", "c", 0, "", None)])["exit_code_agreement"] is None


def test_swr_metrics_by_hand() -> None:
    cases = [SWRCase("a", "gold", 1, 1.0),  # TP
             SWRCase("b", "gold", 1, 2 / 3),  # TP
             SWRCase("c", "gold", 1, 1 / 3),  # FN
             SWRCase("d", "wrong", 0, 0.5),  # FP: 0.5 counts as resolved
             SWRCase("e", "wrong", 0, 1.0),  # FP
             SWRCase("f", "wrong", 0, 0.0),  # TN
             SWRCase("g", "empty", 0, 0.0, "empty_patch"),  # TN
             SWRCase("h", "wrong", 0, None, "invalid"),  # excluded
             SWRCase("i", "gold", 1, None, "invalid")]  # excluded
    m = swr_metrics(cases)
    assert (m["tp"], m["fp"], m["fn"], m["tn"], m["valid"], m["invalid"]) == (2, 2, 1, 2, 7, 2)
    assert m["accuracy"] == 4 / 7 and m["precision"] == 2 / 4 and m["recall"] == 2 / 3
    none = swr_metrics([SWRCase("a", "gold", 1, 0.0)])
    assert (none["precision"], none["recall"], none["accuracy"]) == (None, 0.0, 0.0)


def test_eval_against_real_runs_and_grading(instances_file: Path, tmp_path: Path) -> None:
    swt_llm = ReplayLLM({"```bash\nPYTEST_DISABLE": [swt_reply("", "boom", 1)],  # wrong: the tests pass for real
                         "```bash\npython -c": [swt_reply("42\n", "", 3)]})  # right
    swr_llm = SequencedReplay({IID: [swr_reply(1)]})  # says resolved for every non-empty patch
    out = tmp_path / "fidelity.json"
    with serve(swt_llm, free_port()) as swt_url, serve(swr_llm, free_port()) as swr_url:
        result = CliRunner().invoke(_cli(), [
            "eval", "--instances", str(instances_file), "--only", IID, "-c", EXTRA, "--swt-url", swt_url,
            "--swr-url", swr_url, "-k", "2", "-o", str(out), "--timeout", "60"])
    assert result.exit_code == 0, result.output
    assert "SWT vs real" in result.output and "swr accuracy" in result.output
    report = json.loads(out.read_text())
    assert [(c["candidate"], c["real_exit"], c["predicted_exit"]) for c in report["swt_cases"]] == [
        ("gold", 0, 1), ("gold", 3, 3), ("empty", 0, 1), ("empty", 3, 3), ("wrong", 0, 1), ("wrong", 3, 3)]
    swt = report["swt"]
    assert (swt["answered"], swt["failed"], swt["exit_code_agreement"]) == (6, 0, 0.5)
    assert all(c["similarity"] == 1.0 for c in report["swt_cases"] if c["real_exit"] == 3)
    assert all("PASSED" in c["real_output"] for c in report["swt_cases"] if c["real_exit"] == 0)
    assert [(c["candidate"], c["real"], c["score"]) for c in report["swr_cases"]] == [
        ("gold", 1, 1.0), ("empty", 0, 0.0), ("wrong", 0, 1.0)]
    swr = report["swr"]
    assert (swr["tp"], swr["fp"], swr["fn"], swr["tn"]) == (1, 1, 0, 1)
    assert swr["accuracy"] == 2 / 3 and swr["precision"] == 0.5 and swr["recall"] == 1.0
    assert len(swr_llm.requests) == 4  # k=2 for gold and wrong; nothing for the empty patch

    usage = CliRunner().invoke(_cli(), ["eval", "--only", IID], env={"MCPWORLD_SWT_URL": "", "MCPWORLD_SWR_URL": ""})
    assert usage.exit_code == 2 and "--swt-url" in usage.output


def test_collect_records_real_outputs_and_rewards(instances_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "data.jsonl"
    result = CliRunner().invoke(_cli(), ["collect", "--instances", str(instances_file), "--only", IID, "-c", EXTRA,
                                         "-o", str(out), "--timeout", "60"])
    assert result.exit_code == 0, result.output
    assert "wrote 6 SWT and 2 SWR pairs" in result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    swt = [x for x in lines if x["meta"]["kind"] == "swt"]
    swr = [x for x in lines if x["meta"]["kind"] == "swr"]
    assert len(swt) == 6 and len(swr) == 2
    for pair in lines:
        assert [m["role"] for m in pair["messages"]] == ["system", "user", "assistant"]
    by = {(x["meta"]["candidate"], x["meta"]["command"] == EXTRA): x for x in swt}
    extra = parse_swt(by[("gold", True)]["messages"][2]["content"])
    assert (extra.stdout, extra.stderr, extra.exit_code) == ("42\n", "", 3)  # the real run
    tests = parse_swt(by[("wrong", False)]["messages"][2]["content"])
    assert tests.exit_code == 0 and "test_median_odd_length PASSED" in tests.stdout
    assert "NOTE: an unrelated edit" in by[("wrong", False)]["messages"][1]["content"]  # the candidate's patch
    rewards = {x["meta"]["candidate"]: parse_swr(x["messages"][2]["content"]) for x in swr}
    assert rewards["gold"].reward == 1 and "test_median_even_length PASSED" in rewards["gold"].test_report
    assert rewards["wrong"].reward == 0 and "test_median_even_length FAILED" in rewards["wrong"].test_report
    assert "FAIL_TO_PASS: 0/2 pass" in rewards["wrong"].reasoning
    assert "def test_median_even_length():" in swr[0]["messages"][1]["content"]  # test files in SWR's context


def test_serve_model_prints_vllm_commands() -> None:
    result = CliRunner().invoke(_cli(), ["serve-model", "--swt", "/ckpt/swt", "--swr", "/ckpt/swr"])
    assert result.exit_code == 0, result.output
    assert "vllm serve /ckpt/swt --served-model-name swt" in result.output
    assert "vllm serve /ckpt/swr --served-model-name swr" in result.output
    assert "export MCPWORLD_SWR_URL=http://127.0.0.1:8002/v1" in result.output
    assert CliRunner().invoke(_cli(), ["serve-model"]).exit_code == 2
