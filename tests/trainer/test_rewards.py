"""The one reward table: docs/training.md's table, `Termination.reward`, the reward functions rollouts use,
and the embedded trainer's own episodes all agree on what every ending scores."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcpworld.agent.trajectory import Trajectory
from mcpworld.core.models import Verdict
from mcpworld.core.termination import REWARD_RULES, Termination
from mcpworld.trainer.rewards import InfraErrorNotScored, verifier_reward

DOCS = Path(__file__).resolve().parents[2] / "docs" / "training.md"


def docs_table() -> dict[str, str]:
    section = DOCS.read_text().split("## Rewards", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", section, re.M)
    return {name: reward.strip() for name, reward in rows}


def test_docs_table_is_the_code_table() -> None:
    assert docs_table() == {str(t): rule for t, rule in REWARD_RULES.items()}
    assert set(REWARD_RULES) == set(Termination), "every ending needs a row"


@pytest.mark.parametrize("ending", list(Termination))
def test_each_rule_is_what_reward_returns(ending: Termination) -> None:
    rule = REWARD_RULES[ending]
    if rule == "not scored":
        assert not ending.scored
        return
    assert ending.scored
    expected = {"1 if the verifier passes, else 0": (1.0, 0.0), "0": (0.0, 0.0), "-1": (-1.0, -1.0)}[rule]
    assert (ending.reward(True), ending.reward(False)) == expected


@pytest.mark.anyio
@pytest.mark.parametrize("ending", list(Termination))
@pytest.mark.parametrize("passed", [True, False])
async def test_rollout_rewards_follow_the_table(ending: Termination, passed: bool) -> None:
    """What `train rollouts` and the embedded trainer score (verifier_reward) is the table's value, even when
    a verdict says passed: a truncated or timed-out episode is never rewarded for the state it left."""
    traj = Trajectory(server="s", task="t", policy="p", termination=ending,
                      verdict=Verdict(passed=passed, score=float(passed), checks=[]))
    if not ending.scored:
        with pytest.raises(InfraErrorNotScored, match="no sample of the policy"):
            await verifier_reward(traj)
        assert not traj.is_scored
    else:
        assert (await verifier_reward(traj)).value == ending.reward(passed)


@pytest.mark.anyio
async def test_embedded_trainer_scores_a_call_cut_by_the_cap_as_truncated(tmp_path: Path) -> None:
    """The local policy (the embedded trainer's) hits its token cap mid-call: `truncated`, 0, not -1."""
    torch = pytest.importorskip("torch", reason="the embedded trainer needs torch (installed by .ci/run)")
    import mcpworld.trainer.toy_world as toy
    from mcpworld.agent.loop import EpisodeConfig, run_episode
    from mcpworld.core.protocol import EpisodeControl
    from mcpworld.trainer.grpo import GRPOConfig, LocalPolicy
    from mcpworld.trainer.grpo_run import open_world
    from mcpworld.trainer.tiny import tiny_model, tiny_tokenizer

    cut = '<tool_call>{"name": "press",'
    tokenizer = tiny_tokenizer(["press"], [cut])
    lm = tiny_model(len(tokenizer))
    lm.lm_head = torch.nn.Linear(lm.config.hidden_size, len(tokenizer), bias=True)  # a model that always says `cut`
    torch.nn.init.zeros_(lm.lm_head.weight)
    with torch.no_grad():
        lm.lm_head.bias.fill_(-50.0)
        lm.lm_head.bias[tokenizer.convert_tokens_to_ids(cut)] = 50.0
    config = GRPOConfig(max_new_tokens=2, output=tmp_path)
    async with open_world(Path(toy.__file__).parent, None) as (client, name):
        ctl = EpisodeControl(client)
        task = (await ctl.tasks()).tasks[0]
        policy = LocalPolicy(lm, tokenizer, config, torch.Generator().manual_seed(0))
        traj = await run_episode(ctl, name, task, policy, EpisodeConfig(max_turns=2))
    assert traj.termination == "truncated" and traj.reward == 0.0, traj.error
    assert (await verifier_reward(traj)).value == 0.0
