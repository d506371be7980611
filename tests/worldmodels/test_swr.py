"""SWR through the replay server: k samples averaged, invalid samples excluded, empty patches free; best-of-N with
a seeded tie break; the trainer reward from a trajectory's submitted patch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcpworld.agent.runner import best_of_n
from mcpworld.agent.trajectory import CallRecord, Step, Trajectory
from mcpworld.core.llm_replay import serve
from mcpworld.core.models import Verdict
from mcpworld.core.testing import free_port
from mcpworld.swe.builder import build_instances
from mcpworld.swe.instances import Instance, load_instances
from mcpworld.swe.workspace import WorkspacePool
from mcpworld.worldmodels.bestofn import SWRSelector, pick, select_patch
from mcpworld.worldmodels.candidates import WRONG_LINE, wrong_patch
from mcpworld.worldmodels.grader import SWRGrader
from mcpworld.worldmodels.llm_pool import ModelPool
from mcpworld.worldmodels.reward import SWRReward
from mcpworld.worldmodels.swr import SWR, SWRScorer
from mcpworld.worldmodels.testing import SequencedReplay, swr_reply
from mcpworld.worldmodels.trajectories import submitted_patch

pytestmark = pytest.mark.anyio
IID = "mcpworld__minicalc-1"
WRONG_KEY = WRONG_LINE.strip()  # only the wrong candidate's own patch has this line


@pytest.fixture(scope="module")
def instances(tmp_path_factory: pytest.TempPathFactory) -> list[Instance]:
    return load_instances(build_instances(tmp_path_factory.mktemp("swe-built")))


@pytest.fixture
def gold(instances: list[Instance]) -> str:
    return next(i for i in instances if i.instance_id == IID).patch


@pytest.fixture
def wrong(instances: list[Instance]) -> Iterator[str]:
    pool = WorkspacePool(warm=0)
    yield wrong_patch(next(i for i in instances if i.instance_id == IID), pool)
    pool.close_all()


def _scorer(url: str, instances: list[Instance], k: int = 3) -> SWRScorer:
    return SWRScorer.of(SWR(ModelPool.from_urls(url, "swr", retries=0, timeout_s=5), k=k), instances)


async def test_k_samples_are_averaged_from_a_full_context(instances: list[Instance], gold: str) -> None:
    llm = SequencedReplay({IID: [swr_reply(1, "PASSED tests/test_stats.py::test_median_even_length"),
                                 swr_reply(0), {"role": "assistant", "content": '<think>ok</think>{"reward": 1}'}]})
    with serve(llm, free_port()) as url:
        scorer = _scorer(url, instances)
        try:
            result = await scorer.score(IID, gold)
        finally:
            scorer.close()
    assert result.status == "ok" and result.valid == 3 and result.invalid == 0
    assert result.score == pytest.approx(2 / 3) and result.resolved is True
    assert sorted(s.reward for s in result.samples) == [0, 1, 1]
    assert sorted(r["seed"] for r in llm.requests) == [0, 1, 2] and {r["model"] for r in llm.requests} == {"swr"}
    prompt = llm.requests[0]["messages"][1]["content"]
    instance = next(i for i in instances if i.instance_id == IID)
    assert instance.problem_statement.strip() in prompt and instance.test_command() in prompt
    assert "def test_median_even_length_integers():" in prompt  # test file content, test patch applied
    assert "- tests/test_stats.py::test_median_even_length\n" in prompt  # FAIL_TO_PASS
    assert "- tests/test_stats.py::test_median_odd_length" in prompt  # PASS_TO_PASS
    assert prompt.count("+        return (items[middle - 1] + items[middle]) / 2") == 2  # agent's patch + gold


async def test_invalid_samples_are_excluded_and_all_invalid_is_invalid(instances: list[Instance], gold: str) -> None:
    mixed = SequencedReplay({IID: [swr_reply(1), {"role": "assistant", "content": "looks fine to me"},
                                   {"status": 500}]})
    broken = SequencedReplay({IID: [{"role": "assistant", "content": '{"reward": 0.5}'}, {"raw": "oops"},
                                    {"role": "assistant", "content": "<think>never finishes"}]})
    with serve(mixed, free_port()) as url_mixed, serve(broken, free_port()) as url_broken:
        scorer = _scorer(url_mixed, instances)
        bad = _scorer(url_broken, instances)
        try:
            some = await scorer.score(IID, gold)
            none = await bad.score(IID, gold)
        finally:
            scorer.close()
            bad.close()
    assert (some.status, some.score, some.valid, some.invalid) == ("ok", 1.0, 1, 2)
    assert any("HTTP 500" in e for e in some.errors) and any("no JSON object" in e for e in some.errors)
    assert (none.status, none.score, none.valid, none.invalid, none.resolved) == ("invalid", None, 0, 3, None)
    assert none.to_dict()["score"] is None


async def test_empty_patch_scores_zero_without_a_model_call(instances: list[Instance]) -> None:
    llm = SequencedReplay({IID: [swr_reply(1)]})
    with serve(llm, free_port()) as url:
        scorer = _scorer(url, instances)
        for patch in ("", "  \n", None):
            result = await scorer.score(IID, patch)
            assert (result.status, result.score) == ("empty_patch", 0.0)
        scorer.close()
    assert llm.requests == []


def test_pick_breaks_ties_with_the_seed() -> None:
    assert pick("i", [0.0, 2 / 3, 1 / 3]) == 1
    assert pick("i", [None, 0.0]) == 1 and pick("i", [None, None]) is None and pick("i", []) is None
    choices = {seed: pick("i", [1.0, 0.0, 1.0], seed) for seed in range(24)}
    assert set(choices.values()) == {0, 2}  # both tied candidates get chosen for some seed
    assert all(pick("i", [1.0, 0.0, 1.0], seed) == choices[seed] for seed in range(24))  # and always the same one


async def test_best_of_n_over_candidate_patches(instances: list[Instance], gold: str, wrong: str) -> None:
    llm = SequencedReplay({WRONG_KEY: [swr_reply(0), swr_reply(0), swr_reply(1)], IID: [swr_reply(1)]})
    with serve(llm, free_port()) as url:
        scorer = _scorer(url, instances)
        try:
            selection = await select_patch(scorer, IID, [wrong, "", gold], seed=7)
        finally:
            scorer.close()
    assert selection.best == 2
    assert selection.scores == [pytest.approx(1 / 3), 0.0, 1.0]
    assert len(llm.requests) == 6  # 3 + 3 samples; the empty patch asked nothing


def _trajectory(sample: int, patch: str | None, fmt: str = "native", **kw: object) -> Trajectory:
    messages: list[dict[str, object]] = [{"role": "system", "content": "s"}, {"role": "user", "content": "fix it"}]
    steps = [Step(turn=0, policy_ms=1.0, calls=[CallRecord(name="bash", arguments={"command": "ls"})])]
    messages.append({"role": "tool", "tool_call_id": "call_0", "content": "README.md\n[exit code: 0]"})
    if patch is not None:
        steps.append(Step(turn=1, policy_ms=1.0, calls=[CallRecord(name="submit")]))
        text = f"Submitted. The patch to be graded:\n\n{patch}" if patch.strip() else \
            "Submitted an empty patch: the repository has no changes against the base commit."
        messages.append({"role": "tool", "tool_call_id": "call_0", "content": text} if fmt == "native" else
                        {"role": "user", "content": f"<tool_response>\n{text}\n</tool_response>"})
    return Trajectory(server="io.mcpworld/swe", task=IID, sample=sample, policy="script", messages=messages,
                      steps=steps, **kw)  # type: ignore[arg-type]


def test_submitted_patch_is_read_from_the_submit_result(gold: str) -> None:
    assert submitted_patch(_trajectory(0, gold)) == gold
    assert submitted_patch(_trajectory(0, gold, fmt="text")) == gold
    assert submitted_patch(_trajectory(0, "")) == ""
    assert submitted_patch(_trajectory(0, None)) is None
    from_verdict = _trajectory(0, None)
    from_verdict.steps.append(Step(turn=2, policy_ms=1.0, calls=[CallRecord(name="submit")]))
    from_verdict.verdict = Verdict(passed=False, score=0.0, evidence={"patch_source": "submit", "patch": gold})
    assert submitted_patch(from_verdict) == gold


async def test_swr_reward_and_selector_for_trajectories(instances: list[Instance], gold: str, wrong: str) -> None:
    llm = SequencedReplay({WRONG_KEY: [swr_reply(0)], IID: [swr_reply(1), swr_reply(1), swr_reply(0)]})
    broken = SequencedReplay({IID: [{"role": "assistant", "content": "no idea"}]})
    with serve(llm, free_port()) as url, serve(broken, free_port()) as url_broken:
        scorer = _scorer(url, instances)
        try:
            reward = SWRReward(scorer)
            gold_r = await reward(_trajectory(0, gold))
            assert (gold_r.source, gold_r.label) == ("swr", "resolved")
            assert gold_r.value == pytest.approx(2 / 3) and gold_r.evidence["valid"] == 3
            assert (await SWRReward(scorer, threshold=0.5)(_trajectory(0, gold))).value == 1.0
            asked = len(llm.requests)
            none = await reward(_trajectory(1, None))
            empty = await reward(_trajectory(2, ""))
            assert (none.value, none.label, empty.value, empty.label) == (0.0, "no_patch", 0.0, "empty_patch")
            penalized = await reward(_trajectory(3, gold, termination="format_error", error="bad call"))
            assert (penalized.value, penalized.source) == (-1.0, "format")
            assert len(llm.requests) == asked  # none of these asked SWR

            bad = _scorer(url_broken, instances)
            invalid = await SWRReward(bad)(_trajectory(4, gold, verdict=Verdict(passed=True, score=1.0)))
            bad.close()
            assert (invalid.value, invalid.source, invalid.label) == (1.0, "verifier", "swr_invalid")
            assert len(invalid.evidence["swr_errors"]) == 3

            trajectories = [_trajectory(0, None), _trajectory(1, wrong), _trajectory(2, gold)]
            selector = SWRSelector(scorer, k=3, seed=1)
            best = await selector.select(trajectories)
            assert best[IID].sample == 2
            assert selector.score(trajectories[0]) == pytest.approx(0.0, abs=1e-5)
            assert best_of_n(trajectories, score=selector.score)[IID].sample == 2  # usable as runner's score=
        finally:
            scorer.close()


async def test_swr_grader_gives_the_swe_server_a_verdict(instances: list[Instance], gold: str) -> None:
    llm = SequencedReplay({IID: [swr_reply(1), swr_reply(1), swr_reply(0)]})
    broken = SequencedReplay({IID: [{"role": "assistant", "content": "?"}]})
    instance = next(i for i in instances if i.instance_id == IID)
    with serve(llm, free_port()) as url, serve(broken, free_port()) as url_broken:
        scorer, bad = _scorer(url, instances), _scorer(url_broken, instances)
        try:
            verdict = await SWRGrader(scorer)(instance, gold)  # awaited on the SWE server's loop
            strict = await SWRGrader(scorer, threshold=1.0)(instance, gold)
            invalid = await SWRGrader(bad)(instance, gold)
            empty = await SWRGrader(scorer)(instance, "")
        finally:
            scorer.close()
            bad.close()
    assert verdict.passed and verdict.score == pytest.approx(2 / 3) and verdict.checks[0].name == "SWR"
    assert len(verdict.evidence["swr"]["samples"]) == 3
    assert not strict.passed and strict.score == pytest.approx(2 / 3)
    assert not invalid.passed and invalid.evidence["swr"]["status"] == "invalid"
    assert invalid.checks[0].name == "SWR result valid" and not invalid.checks[0].passed
    assert not empty.passed and empty.score == 0.0 and empty.evidence["swr"]["status"] == "empty_patch"
    assert len(llm.requests) == 6
