"""End to end in simulated mode: a SWE episode over MCP whose pytest output comes from SWT and whose reward comes
from SWR, both served by the replay server. The SWE server takes the simulated backend as its `backend`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from mcpworld.agent.formats import Action, NativeFormat
from mcpworld.agent.loop import EpisodeConfig, run_episode
from mcpworld.core.llm_replay import ReplayLLM, serve
from mcpworld.core.models import TaskInfo, ToolCall
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.testing import free_port
from mcpworld.swe.builder import build_instances
from mcpworld.swe.instances import load_instances
from mcpworld.swe.server import SWEOptions, SWEServer
from mcpworld.worldmodels.backend import SimulatedBackend
from mcpworld.worldmodels.grader import SWRGrader
from mcpworld.worldmodels.llm_pool import ModelPool
from mcpworld.worldmodels.reward import SWRReward
from mcpworld.worldmodels.swr import SWR, SWRScorer
from mcpworld.worldmodels.swt import SWT
from mcpworld.worldmodels.testing import SequencedReplay, swr_reply, swt_reply

pytestmark = pytest.mark.anyio
IID = "mcpworld__minicalc-1"
SIMULATED = ("tests/test_stats.py::test_mean PASSED\ntests/test_stats.py::test_median_odd_length PASSED\n"
             "==== 3 passed in 0.02s (predicted by SWT) ====\n")


class ScriptPolicy:
    """Plays a fixed list of tool calls, one per turn, then answers."""

    name, model = "script", None

    def __init__(self, calls: list[ToolCall]):
        self.calls, self.format = calls, NativeFormat()

    async def act(self, messages: list[dict[str, Any]], tools: list[types.Tool], task: TaskInfo) -> Action:
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn < len(self.calls):
            return Action(message=self.format.assistant_message([self.calls[turn]], None), calls=[self.calls[turn]])
        return Action(message={"role": "assistant", "content": "Fixed."}, final="Fixed.")


@pytest.fixture(scope="module")
def instances_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_instances(tmp_path_factory.mktemp("swe-built"))


def _tool_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if m.get("role") == "tool"]


async def test_simulated_episode_with_swt_output_and_swr_reward(instances_file: Path) -> None:
    instances = load_instances(instances_file)
    test_cmd = next(i for i in instances if i.instance_id == IID).test_command()
    swt_llm = ReplayLLM({f"```bash\n{test_cmd}\n```": [swt_reply(SIMULATED, "", 0, think="the fix is in")]})
    swr_llm = SequencedReplay({IID: [swr_reply(1, "PASSED tests/test_stats.py::test_median_even_length")]})
    with serve(swt_llm, free_port()) as swt_url, serve(swr_llm, free_port()) as swr_url:
        backend = SimulatedBackend(SWT(ModelPool.from_urls(swt_url, "swt", retries=0)))
        scorer = SWRScorer.of(SWR(ModelPool.from_urls(swr_url, "swr", retries=0)), instances)
        # Each episode gets the backend's shell for its instance (no lookup by path), and is graded by SWR.
        sw = SWEServer(instances, backend=backend, options=SWEOptions(warm=0, command_timeout_s=30),
                       grader=SWRGrader(scorer))
        try:
            async with Client(sw.server) as client:
                ctl = EpisodeControl(client)
                task = {t.id: t for t in (await ctl.tasks(token=os.environ["MCPWORLD_REGISTRY_TOKEN"])).tasks}[IID]
                edits = [c for c in task.solution if c.name != "submit"]
                assert edits and task.solution[-1].name == "submit"
                calls = [*edits,
                         ToolCall(name="bash", arguments={"command": test_cmd}),
                         ToolCall(name="bash", arguments={"command": "grep -n 'middle - 1' minicalc/stats.py"}),
                         ToolCall(name="bash", arguments={"command": "pip install numpy"}),
                         ToolCall(name="bash", arguments={"command": "rm -rf ~"}),
                         ToolCall(name="submit")]
                traj = await run_episode(ctl, "io.mcpworld/swe", task, ScriptPolicy(calls),
                                         EpisodeConfig(max_turns=len(calls) + 2, turn_timeout_s=60))
            reward = await SWRReward(scorer)(traj)
        finally:
            sw.close_all()
            scorer.close()

    assert traj.termination == "final_answer", traj.error
    texts = _tool_texts(traj.messages)[len(edits):]
    assert texts[0] == SIMULATED.rstrip("\n") + "\n[exit code: 0]"  # pytest: SWT's prediction, verbatim
    assert texts[1].startswith("17:        return (items[middle - 1] + items[middle]) / 2")  # grep: real, post-edit
    assert texts[2] == "Successfully installed numpy\n[exit code: 0]"
    assert texts[3].startswith("Refused:") and texts[3].endswith("[exit code: 1]")
    assert texts[4].startswith("Submitted. The patch to be graded:")

    assert len(swt_llm.requests) == 1  # only the pytest run was predicted
    swt_prompt = swt_llm.requests[0]["messages"][1]["content"]
    assert "+        return (items[middle - 1] + items[middle]) / 2" in swt_prompt  # the agent's live edits
    assert "## tests/test_stats.py" in swt_prompt

    assert (reward.value, reward.source, reward.label) == (1.0, "swr", "resolved")
    assert len(swr_llm.requests) == 6  # k = 3 samples of the submitted patch, for verify and for the reward
    assert "+        return (items[middle - 1] + items[middle]) / 2" in swr_llm.requests[0]["messages"][1]["content"]
    assert traj.verdict.passed and traj.reward == 1.0  # verify graded by SWR, no container, no real test run
    assert len(sw) == 0, "the loop closed its episode"
