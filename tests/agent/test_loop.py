"""The agent against real world servers over HTTP, with a real local OpenAI-compatible replay server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from mcpworld.agent.formats import Action, get_format
from mcpworld.agent.loop import EpisodeConfig, window
from mcpworld.agent.policies import OpenAIPolicy, OraclePolicy, RandomPolicy, ReplayPolicy, make_policy
from mcpworld.agent.runner import RunSpec, best_of_n, list_tasks, run
from mcpworld.agent.trajectory import Trajectory, TrajectoryWriter, read_trajectories
from mcpworld.core.llm import ChatClient
from mcpworld.core.llm_replay import ReplayLLM, serve
from mcpworld.core.schemas import random_value
from mcpworld.core.termination import FORMAT_PENALTY, INFRA_TERMINATIONS, Termination
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http

CANCEL = "booked reservation ZFA04Y an hour ago"  # the cancel-within-24h instruction


def airline(url: str) -> str:
    return f"{url}/worlds/airline/mcp"


def tasks_named(url: str, *ids: str, world: str = "airline"):
    tasks = anyio.run(list_tasks, f"{url}/worlds/{world}/mcp", None, None)
    return [t for t in tasks if t.id in ids] if ids else tasks


def run_with(url: str, policy_factory, tasks, tmp_path: Path, **kw):
    spec = RunSpec(server=airline(url), tasks=tasks, output=tmp_path / "out.jsonl", **kw)
    return anyio.run(lambda: run(spec, policy_factory))


def native_script() -> list[dict]:
    return [
        {"content": None, "tool_calls": [{"name": "get_reservation", "arguments": {"reservation_id": "ZFA04Y"}}]},
        {"content": None, "tool_calls": [{"name": "cancel_reservation",
                                          "arguments": {"reservation_id": "ZFA04Y", "reason": "change_of_plan"}}]},
        {"content": "Cancelled ZFA04Y and refunded 420.00 to your card."},
    ]


def text_script() -> list[dict]:
    return [
        {"content": 'Let me look.\n<tool_call>{"name": "get_reservation", "arguments": {"reservation_id": "ZFA04Y"}}'
                    "</tool_call>"},
        {"content": '<tool_call>{"name": "cancel_reservation", "arguments": {"reservation_id": "ZFA04Y", '
                    '"reason": "change_of_plan"}}</tool_call>'},
        {"content": "Done: ZFA04Y is cancelled."},
    ]


def awm_script() -> list[dict]:
    call = '<tool_call>{{"name": "call_tool", "arguments": {{"tool_name": "{}", "arguments": {}}}}}</tool_call>'
    return [
        {"content": '<tool_call>{"name": "list_tools", "arguments": {}}</tool_call>'},
        {"content": call.format("get_reservation", '{"reservation_id": "ZFA04Y"}')},
        {"content": call.format("cancel_reservation", '{"reservation_id": "ZFA04Y", "reason": "change_of_plan"}')},
        {"content": "Cancelled."},
    ]


@pytest.mark.parametrize(("fmt", "script"), [("native", native_script), ("text", text_script), ("awm", awm_script)])
def test_openai_policy_end_to_end(worlds_url: str, tmp_path: Path, fmt: str, script) -> None:
    llm = ReplayLLM({CANCEL: script()})
    with serve(llm, free_port()) as base_url:
        trajs, summary = run_with(worlds_url, lambda i: OpenAIPolicy(ChatClient(base_url=base_url, model="m"),
                                                                     get_format(fmt)),
                                  tasks_named(worlds_url, "cancel-within-24h"), tmp_path)
    [t] = trajs
    assert t.termination == "final_answer" and t.reward == 1.0, t.error
    assert t.verdict.passed and t.verdict.evidence["diff"]["reservation"]["updated"][0]["key"] == "ZFA04Y"
    assert t.model == "m" and t.format == fmt and t.usage.get("completion_tokens", 0) > 0
    assert [c.name for s in t.steps for c in s.calls] == ["get_reservation", "cancel_reservation"]
    if fmt == "native":
        assert llm.requests[0]["tools"] and any(m["role"] == "tool" for m in t.messages)
        assert t.messages[-1]["content"].startswith("Cancelled ZFA04Y")
    else:
        assert "tools" not in llm.requests[0]
    assert read_trajectories(tmp_path / "out.jsonl")[0].verdict.passed
    assert summary.success_rate == 1.0


@pytest.mark.parametrize(("reply", "reason"), [
    ({"content": "<tool_call>{not json}</tool_call>"}, "malformed <tool_call>"),
    ({"content": '<tool_call>{"name": "launch_rockets", "arguments": {}}</tool_call>'},
     "unknown tool 'launch_rockets'"),
    ({"content": '<tool_call>{"name": "get_reservation"'}, "unterminated <tool_call>"),
])
def test_malformed_output_ends_with_minus_one(worlds_url: str, tmp_path: Path, reply: dict, reason: str) -> None:
    with serve(ReplayLLM({CANCEL: [reply]}), free_port()) as base_url:
        [t], summary = run_with(worlds_url, lambda i: OpenAIPolicy(ChatClient(base_url=base_url), get_format("text")),
                                tasks_named(worlds_url, "cancel-within-24h"), tmp_path)
    assert t.reward == -1.0 and reason in t.error
    assert t.termination in ("format_error", "unknown_tool")
    assert summary.failures == {t.termination: 1}


def test_broken_endpoints_fail_episodes_not_the_run(worlds_url: str, tmp_path: Path) -> None:
    tasks = tasks_named(worlds_url, "cancel-within-24h", "flight-status", "update-email")
    llm = ReplayLLM({
        CANCEL: [{"status": 500}],
        "MW307-0602": [{"raw": "this is not json"}],
        "grace.hopper@navy.mil": [{"sleep": 3}],
    })
    with serve(llm, free_port()) as base_url:
        trajs, summary = run_with(
            worlds_url,
            lambda i: OpenAIPolicy(ChatClient(base_url=base_url, timeout_s=1, retries=1), get_format("native")),
            tasks, tmp_path, concurrency=3)
    by_task = {t.task: t for t in trajs}
    failed = by_task["cancel-within-24h"]
    assert failed.termination == "model_error" and "HTTP 500" in failed.error
    assert "no choices" in by_task["flight-status"].error
    assert "timed out" in by_task["update-email"].error
    assert summary.episodes == 0 and summary.setup_errors == 3  # not played: counted apart, a non-zero exit
    assert "the model's endpoint failed" in (summary.setup_message() or "")
    assert len(read_trajectories(tmp_path / "out.jsonl")) == 3


@pytest.mark.parametrize("world", ["airline", "shop", "bank", "helpdesk", "calendar", "tracker"])
def test_oracle_solves_every_task_and_random_mostly_fails(worlds_url: str, tmp_path: Path, world: str) -> None:
    tasks = tasks_named(worlds_url, world=world)
    spec = RunSpec(server=f"{worlds_url}/worlds/{world}/mcp", tasks=tasks, concurrency=4,
                   output=tmp_path / "oracle.jsonl")
    trajs, summary = anyio.run(lambda: run(spec, lambda i: OraclePolicy()))
    assert summary.episodes == len(tasks) and all(t.reward == 1.0 for t in trajs), \
        [(t.task, t.error, t.verdict and [c for c in t.verdict.checks if not c.passed]) for t in trajs if t.reward != 1]
    spec.output = tmp_path / "random.jsonl"
    _, rnd = anyio.run(lambda: run(spec, lambda i: RandomPolicy(seed=i)))
    assert rnd.success_rate <= 0.2


def test_replay_policy_and_resume(worlds_url: str, tmp_path: Path) -> None:
    tasks = tasks_named(worlds_url, "cancel-within-24h", "gift-card-balance")
    out = tmp_path / "oracle.jsonl"
    spec = RunSpec(server=airline(worlds_url), tasks=tasks, samples=2, output=out)
    anyio.run(lambda: run(spec, lambda i: OraclePolicy()))
    again, summary = anyio.run(lambda: run(RunSpec(server=airline(worlds_url), tasks=tasks, samples=3, output=out,
                                                   resume=True), lambda i: OraclePolicy()))
    assert summary.skipped == 4 and [t.sample for t in again] == [2, 2]
    assert len(read_trajectories(out)) == 6
    replayed, rs = run_with(worlds_url, lambda i: ReplayPolicy(out), tasks, tmp_path)
    assert rs.success_rate == 1.0


def test_setup_errors_are_named_never_scored_and_exit_4(worlds_url: str, tmp_path: Path) -> None:
    """Issue 29: an oracle without references (another server's token) and a replay file that lacks a task are
    the run's setup, not the agent: before, every such episode was a scored -1 `format_error` and the run exit 0."""
    from click.testing import CliRunner

    from mcpworld.app.cli import main

    tasks = tasks_named(worlds_url, "cancel-within-24h", "gift-card-balance")
    trajs, summary = run_with(worlds_url, lambda i: OraclePolicy(token="not-the-token"), tasks, tmp_path)
    assert {t.termination for t in trajs} == {"setup_error"} and not any(t.is_scored for t in trajs)
    assert all(t.reward == 0 and t.verdict is None for t in trajs)
    assert summary.episodes == 0 and summary.setup_errors == 2
    assert "MCPWORLD_REGISTRY_TOKEN" in (summary.setup_message() or "")

    recorded = tmp_path / "one.jsonl"
    anyio.run(lambda: run(RunSpec(server=airline(worlds_url), tasks=tasks[:1], output=recorded),
                          lambda i: OraclePolicy()))
    out = tmp_path / "replayed.jsonl"
    result = CliRunner().invoke(main, ["run", "--server", airline(worlds_url), "--policy", "replay", "--replay-file",
                                       str(recorded), "--task", "cancel-within-24h", "--task", "gift-card-balance",
                                       "-o", str(out)])
    assert result.exit_code == 4, result.output
    assert "1 episode not played" in result.output and "no recorded trajectory for task" in result.output
    by_task = {t.task: t for t in read_trajectories(out)}
    assert by_task[tasks[0].id].reward == 1.0 and by_task[tasks[1].id].termination == "setup_error"


def test_server_killed_mid_run(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(mcpworld_cmd("serve", "worlds", "--only", "airline", "--port", str(port)),
                            env={**os.environ, "MCPWORLD_HOME": str(tmp_path)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/healthz", proc)
    tasks = tasks_named(url)
    slow = ReplayLLM({t.instruction[:40]: [{"sleep": 0.3, "content": "thinking"}] for t in tasks})
    out = tmp_path / "run.jsonl"

    async def main():
        async with anyio.create_task_group() as tg:
            async def killer():
                await anyio.sleep(1.0)
                proc.send_signal(signal.SIGKILL)
            tg.start_soon(killer)
            spec = RunSpec(server=airline(url), tasks=tasks, concurrency=2, output=out, retries=1, backoff_s=0.01,
                           config=EpisodeConfig(turn_timeout_s=5))
            return await run(spec, lambda i: OpenAIPolicy(ChatClient(base_url=base_url, timeout_s=5, retries=0)))

    with serve(slow, free_port()) as base_url:
        trajs, summary = anyio.run(main)
    proc.wait(timeout=10)
    assert summary.episodes + summary.lost == len(tasks) and summary.lost >= 1
    dead = [t for t in trajs if t.is_infra]
    assert dead and all(t.termination == "infra_error" and t.error and t.reward == 0.0 for t in dead)
    assert not any(t.reward == -1.0 for t in trajs)
    lines = out.read_text().splitlines()
    assert len(lines) == len(tasks) and all(json.loads(line)["task"] for line in lines)


def test_torn_last_line_is_repaired(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = Trajectory(server="s", task="a", policy="oracle")
    path.write_text(good.model_dump_json() + "\n" + '{"server": "s", "task": "b", "pol')
    TrajectoryWriter(path).append(Trajectory(server="s", task="c", policy="oracle"))
    assert [t.task for t in read_trajectories(path)] == ["a", "c"]
    assert path.read_text().count("\n") == 2


def test_history_window_keeps_task_and_last_turns() -> None:
    messages = [{"role": "system"}, {"role": "user", "content": "task"}]
    for i in range(5):
        messages += [{"role": "assistant", "content": f"a{i}"}, {"role": "tool", "content": f"r{i}"}]
    kept = window(messages, 2)
    assert kept[:2] == messages[:2] and [m.get("content") for m in kept[2:]] == ["a3", "r3", "a4", "r4"]
    assert window(messages, None) == messages


def test_random_values_satisfy_schemas() -> None:
    import random

    import jsonschema

    rng = random.Random(1)
    schema = {"type": "object", "properties": {
        "cabin": {"enum": ["economy", "business"]}, "n": {"type": "integer", "minimum": 1, "maximum": 9},
        "when": {"type": "string", "format": "date"}, "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "required": ["cabin", "n"]}
    for _ in range(50):
        jsonschema.validate(random_value(schema, rng), schema)


def test_best_of_n_picks_the_best_sample() -> None:
    from mcpworld.core.models import Verdict

    def t(sample: int, score: float) -> Trajectory:
        return Trajectory(server="s", task="x", sample=sample, policy="p",
                          verdict=Verdict(passed=score == 1, score=score))

    assert best_of_n([t(0, 0.5), t(1, 1.0), t(2, 1.0)])["x"].sample == 1


def test_termination_knows_penalties_and_infra_errors() -> None:
    penalized = {t for t in Termination if t.penalized}
    assert penalized == {Termination.FORMAT_ERROR, Termination.UNKNOWN_TOOL}
    assert INFRA_TERMINATIONS == {t for t in Termination if t.infra} == {"infra_error", "server_error"}
    assert not penalized & INFRA_TERMINATIONS
    assert Termination.FORMAT_ERROR.reward(passed=True) == FORMAT_PENALTY == -1.0
    assert Termination.UNKNOWN_TOOL.reward(penalize=False) == 0.0
    assert Termination.FINAL_ANSWER.reward(True) == Termination.MAX_TURNS.reward(True) == 1.0
    assert Termination.FINAL_ANSWER.reward(False) == 0.0
    assert Termination.INFRA_ERROR.reward(True) == Termination.SERVER_ERROR.reward() == 0.0  # never a -1
    # stored as the plain string, read back as the type (legacy lines included)
    t = Trajectory.model_validate_json(Trajectory(server="s", task="t", policy="p",
                                                  termination=Termination.UNKNOWN_TOOL).model_dump_json())
    assert t.termination is Termination.UNKNOWN_TOOL and t.termination == "unknown_tool" and t.is_penalized
    assert '"termination":"unknown_tool"' in t.model_dump_json()
    legacy = Trajectory(server="s", task="t", policy="p", termination="server_error")  # type: ignore[arg-type]
    assert legacy.is_infra and not legacy.is_penalized


def test_make_policy_is_the_one_factory(tmp_path: Path) -> None:
    assert isinstance(make_policy("oracle", format="awm"), OraclePolicy)
    assert make_policy("oracle", format="awm").format.name == "awm"
    a, b = make_policy("random", seed=2, index=3), RandomPolicy(seed=2 * 1000 + 3)
    assert isinstance(a, RandomPolicy) and a.rng.random() == b.rng.random()  # seeded seed * 1000 + index
    model = make_policy("openai", model="m", base_url="http://x/v1", temperature=0.5, timeout_s=7.0, format="text")
    assert isinstance(model, OpenAIPolicy) and model.format.name == "text"
    assert (model.client.model, model.client.base_url, model.client.timeout_s) == ("m", "http://x/v1", 7.0)
    assert model.client.sampling == {"temperature": 0.5}
    client = ChatClient(base_url="http://y/v1", model="n")
    assert make_policy("openai", client=client).client is client  # type: ignore[attr-defined]
    (tmp_path / "r.jsonl").write_text("")
    assert isinstance(make_policy("replay", replay_file=tmp_path / "r.jsonl"), ReplayPolicy)
    with pytest.raises(ValueError, match="replay file"):
        make_policy("replay")
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("greedy")


def test_each_format_answers_its_own_local_actions() -> None:
    import mcp_types as types

    tools = [types.Tool(name="get_user", description="A user.", input_schema={"type": "object"})]
    awm = get_format("awm")
    listing = awm.parse({"role": "assistant", "content": '<tool_call>{"name": "list_tools", "arguments": {}}'
                                                         "</tool_call>"}, [])
    messages = awm.local_messages(listing, tools)
    assert messages is not None and "get_user: A user." in messages[0]["content"]
    for name in ("native", "text"):  # no local actions: everything they parse goes to the server
        assert get_format(name).local_messages(Action(message={}, local="list_tools"), tools) is None
    call = awm.assistant_message([], None) | {"content": "done"}
    assert awm.local_messages(awm.parse(call, []), tools) is None


@pytest.mark.parametrize("drops", [True, False], ids=["tools-dropped", "tools-honoured"])
def test_run_says_when_the_endpoint_drops_native_tools(worlds_url: str, tmp_path: Path, drops: bool) -> None:
    """`mcpworld run --policy openai --format native` against an endpoint that drops `tools` stops before any
    episode, saying what to do instead; one that honours them plays, each reply capped by --max-tokens."""
    llm = ReplayLLM({"Say ok.": [{"content": "ok"}], "": [{"content": "I cannot help."}]}, drops_tools=drops)
    out = tmp_path / "run.jsonl"
    with serve(llm, free_port()) as base:
        result = subprocess.run(mcpworld_cmd("run", "--server", f"{worlds_url}/worlds/airline/mcp", "--task",
                                             "cancel-within-24h", "--policy", "openai", "--model", "m", "--base-url",
                                             base, "--max-tokens", "55", "-o", str(out)),
                                capture_output=True, text=True, timeout=300)
    if drops:
        assert result.returncode == 1 and "ignores the `tools` parameter" in result.stderr
        assert "--format text" in result.stderr and not out.exists()
    else:
        assert result.returncode == 0, result.stderr[-2000:]
        played = [r for r in llm.requests if r["messages"][0]["content"] != "Say ok."]
        assert played and all(r["max_tokens"] == 55 and r["tools"] for r in played)


def test_a_full_disk_says_what_happened_and_how_to_go_on(worlds_url: str) -> None:
    """Issue 30: writing trajectories to a full disk ended `mcpworld run` in a raw ExceptionGroup traceback."""
    from click.testing import CliRunner

    from mcpworld.app.cli import main

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here to stand for a full disk")
    result = CliRunner().invoke(main, ["run", "--server", airline(worlds_url), "--task", "business-seats-left",
                                       "-o", "/dev/full"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "No space left on device" in result.output and "--resume -o /dev/full" in result.output
