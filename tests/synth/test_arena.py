"""The arena: evaluate over real MCP, classify failures per world, target the weakest world with new tasks."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mcpworld.agent.policies import OpenAIPolicy, OraclePolicy, RandomPolicy
from mcpworld.agent.trajectory import CallRecord, Step, Trajectory
from mcpworld.core.llm import ChatClient
from mcpworld.core.llm_replay import ReplayLLM, serve
from mcpworld.core.models import Check, TaskInfo, ToolCall, Verdict
from mcpworld.core.testing import free_port
from mcpworld.synth.arena.diagnosis import classify
from mcpworld.synth.arena.rounds import Arena, run_arena
from mcpworld.synth.cli import synth_group
from mcpworld.synth.tasks.taskspec import load_tasks


def test_arena_targets_the_weakest_world(tmp_path: Path) -> None:
    def policy(world: str, index: int):
        return OraclePolicy() if world == "airline" else RandomPolicy(seed=index)

    result = run_arena(Arena(["airline", "shop"], policy, tmp_path, rounds=2, tasks_per_world=3, targeted=3))
    first, second = result["rounds"]
    assert first["weakest"] == ["shop"] and second["weakest"] == ["shop"]
    shop, airline = first["worlds"]["shop"], first["worlds"]["airline"]
    assert airline["success_rate"] == 1.0 and shop["success_rate"] < 1.0
    assert sum(shop["failures"].values()) == shop["episodes"] - shop["passed"]
    assert set(shop["failures"]) <= {"wrong_tool", "bad_arguments", "gave_up", "wrong_answer", "state_not_updated",
                                     "wrong_state"}
    targeted = load_tasks(tmp_path / "round-1" / "targeted" / "shop.json")
    assert shop["new_tasks"] == len(targeted) >= 1 and not (tmp_path / "round-1" / "targeted" / "airline.json").exists()
    assert all(t.world == "shop" and t.meta["arena_round"] == 1 for t in targeted)
    # the targeted tasks are round 2's held-out set for shop
    assert {t.id for t in load_tasks(tmp_path / "round-2" / "tasks" / "shop.json")} == {t.id for t in targeted}
    lines = (tmp_path / "round-2" / "trajectories-shop.jsonl").read_text().splitlines()
    assert {t.id for t in targeted} <= {json.loads(line)["task"] for line in lines}
    report = (tmp_path / "report.md").read_text()
    assert "# Arena round 1" in report and "| shop |" in report and "bad arguments" in report


def test_the_oracle_needs_the_registry_token_for_references(tmp_path: Path) -> None:
    # Servers reveal references only over the privileged request; an oracle without the token gets none.
    result = run_arena(Arena(["airline"], lambda w, i: OraclePolicy(token="not-the-token"), tmp_path, tasks_per_world=2,
                             targeted=1))
    airline = result["rounds"][0]["worlds"]["airline"]
    assert airline["episodes"] >= 1 and airline["passed"] == 0
    lines = (tmp_path / "round-1" / "trajectories-airline.jsonl").read_text().splitlines()
    assert all("no reference for task" in (json.loads(line)["error"] or "") for line in lines)
    held_out = load_tasks(tmp_path / "round-1" / "tasks" / "airline.json")
    assert held_out and all(t.check and t.check.parts for t in held_out)  # typed, audited graph tasks


def test_arena_with_a_model_policy_and_the_cli(tmp_path: Path) -> None:
    # A policy behind the replay endpoint that answers at once: every task fails as "gave up" or a wrong answer.
    with serve(ReplayLLM({"": [{"content": "Sorry, I could not do that."}]}), free_port()) as url:
        result = run_arena(Arena(["bank"], lambda w, i: OpenAIPolicy(ChatClient(base_url=url, model="m")),
                                 tmp_path / "model", tasks_per_world=2, targeted=2))
    bank = result["rounds"][0]["worlds"]["bank"]
    assert bank["passed"] == 0 and bank["failures"] == {"gave_up": bank["episodes"]}
    out = tmp_path / "cli"
    cli = CliRunner().invoke(synth_group, ["arena", "--worlds", "calendar,tracker", "--policy", "random",
                                           "--tasks-per-world", "2", "--targeted", "2", "-o", str(out)])
    assert cli.exit_code == 0, cli.output
    assert (out / "round-1" / "report.json").is_file() and "new tasks" in cli.output


def trajectory(calls: list[tuple[str, bool]], termination: str = "final_answer", final: str = "Done.",
               diff: dict | None = None, passed: bool = False) -> Trajectory:
    return Trajectory(server="s", task="t", policy="p", termination=termination,
                      steps=[Step(turn=0, policy_ms=1, calls=[CallRecord(name=n, is_error=e) for n, e in calls])],
                      messages=[{"role": "assistant", "content": final}],
                      verdict=Verdict(passed=passed, score=1.0 if passed else 0.0,
                                      checks=[Check(name="c", passed=passed)], evidence={"diff": diff or {}}))


def test_failure_classes() -> None:
    state = TaskInfo(id="t", instruction="x", kind="state", solution=[ToolCall(name="cancel_order")])
    answer = TaskInfo(id="t", instruction="x", kind="answer", solution=[ToolCall(name="get_order")])
    assert classify(trajectory([("cancel_order", False)], passed=True), state) is None
    assert classify(trajectory([], termination="format_error"), state) == "format_error"
    assert classify(trajectory([], termination="unknown_tool"), state) == "wrong_tool"
    assert classify(trajectory([("get_order", False)]), state) == "wrong_tool"
    assert classify(trajectory([("cancel_order", True)]), state) == "bad_arguments"
    assert classify(trajectory([("cancel_order", False)]), state) == "state_not_updated"
    assert classify(trajectory([("cancel_order", False)], diff={"orders": {}}), state) == "wrong_state"
    assert classify(trajectory([]), answer) == "gave_up"
    assert classify(trajectory([("get_order", False)], final="I could not find it."), answer) == "gave_up"
    assert classify(trajectory([("get_order", False)], final="It is shipped."), answer) == "wrong_answer"
    assert classify(trajectory([("get_order", False)], termination="max_turns"), answer) == "gave_up"
