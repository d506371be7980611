"""Infrastructure failures are not the agent's: a world server killed mid-run loses episodes as `infra_error`
(no reward, retried, replayed by --resume, left out of training), and torn trajectory lines never crash a reader.

Every kill here happens on a condition (a policy's act on a given task, an engine's Nth generation), never
after a sleep, so the tests mean the same on a slow, loaded machine.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from mcpworld.agent import policies
from mcpworld.agent.cli import LOST_EXIT, run_command
from mcpworld.agent.loop import EpisodeConfig
from mcpworld.agent.policies import OraclePolicy, ReplayPolicy
from mcpworld.agent.runner import RunSpec, list_tasks, run
from mcpworld.agent.trajectory import TornLineWarning, Trajectory, TrajectoryWriter, read_trajectories
from mcpworld.core.llm import ChatClient
from mcpworld.core.models import Verdict
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http
from mcpworld.trainer.cli import train_group
from mcpworld.trainer.curriculum import pass_rates
from mcpworld.trainer.rewards import InfraErrorNotScored, JudgeReward, verifier_reward
from mcpworld.trainer.rollouts import collect, make_groups
from mcpworld.trainer.sft import SFTFilter, export_sft

TASKS = ("cancel-within-24h", "refuse-basic-cancel", "cancel-insured-basic", "flight-status")


class World:
    """`mcpworld serve worlds --only airline` as a process on a fixed port, that tests kill and restart."""

    def __init__(self, home: Path):
        self.port, self.home = free_port(), home
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/worlds/airline/mcp"

    def start(self) -> None:
        self.proc = subprocess.Popen(mcpworld_cmd("serve", "worlds", "--only", "airline", "--port", str(self.port)),
                                     env={**os.environ, "MCPWORLD_HOME": str(self.home)}, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        wait_http(f"http://127.0.0.1:{self.port}/healthz", self.proc, timeout=120)

    def kill(self) -> None:
        """SIGKILL, and return only once the process is gone (a condition, not a delay)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@pytest.fixture
def world(tmp_path: Path):
    w = World(tmp_path / "world-home")
    w.start()
    try:
        yield w
    finally:
        w.kill()


class KillingOracle(OraclePolicy):
    """The oracle, except that its first act on `kill_task` kills the world (and, with `restart`, brings it
    back) before it answers: the episode in flight, and any after it, meet a dead server."""

    world: World | None = None
    kill_task: str = ""
    restart = False
    kills = 0

    async def act(self, messages: list[dict[str, Any]], tools: list, task):  # type: ignore[no-untyped-def]
        cls = type(self)
        if task.id == cls.kill_task and cls.kills == 0 and cls.world is not None:
            cls.kills += 1
            cls.world.kill()
            if cls.restart:
                cls.world.start()
        return await super().act(messages, tools, task)


def killing(world: World, kill_task: str, restart: bool = False) -> type[KillingOracle]:
    return type("KillingOracleFor", (KillingOracle,), {"world": world, "kill_task": kill_task, "restart": restart})


class RecordingOracle(OraclePolicy):
    """The oracle, noting which tasks it was asked to play."""

    played: list[str] = []

    async def begin(self, ctl, server, task):  # type: ignore[no-untyped-def]
        type(self).played.append(task.id)
        await super().begin(ctl, server, task)


def airline_tasks(world: World, ids: tuple[str, ...] = TASKS):
    tasks = {t.id: t for t in anyio.run(list_tasks, world.url, None, None)}
    return [tasks[i] for i in ids]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- the runner --------------------------------------------------------------------------------------------------


def test_killed_server_loses_episodes_as_infra_errors_and_resume_replays_exactly_those(world: World,
                                                                                       tmp_path: Path) -> None:
    tasks = airline_tasks(world)
    out = tmp_path / "run.jsonl"
    spec = RunSpec(server=world.url, tasks=tasks, concurrency=1, output=out, retries=2, backoff_s=0.01,
                   config=EpisodeConfig(turn_timeout_s=30))
    policy = killing(world, tasks[1].id)
    trajs, summary = anyio.run(lambda: run(spec, lambda i: policy()))
    assert not world.alive

    by_task = {t.task: t for t in trajs}
    assert not by_task[tasks[0].id].is_infra, by_task[tasks[0].id].error
    lost = [by_task[t.id] for t in tasks[1:]]
    assert all(t.termination == "infra_error" and t.reward == 0.0 and t.verdict is None for t in lost)
    assert not any(t.reward == -1.0 for t in trajs), "an outage must never be a -1"
    # The interrupted episode was retried (1 + 2 tries); once a job has used up its retries the server counts
    # as down, and each later job gets one try, so a dead server costs seconds, not retries x jobs.
    assert by_task[tasks[1].id].attempts == 3 and "gave up after 3 attempts" in by_task[tasks[1].id].error
    assert [t.attempts for t in lost[1:]] == [1] * (len(tasks) - 2)
    assert all(t.infra_reason in ("server unreachable", "connection lost") for t in lost), [t.error for t in lost]
    assert (summary.episodes, summary.lost) == (1, len(tasks) - 1) and "infra_error" not in summary.failures
    message = summary.lost_message()
    assert message and message.startswith(f"{len(tasks) - 1} episodes lost to infrastructure errors (")
    assert message.endswith("rerun with --resume")
    written = lines(out)
    assert len(written) == len(tasks) and not any(r["reward"] == -1.0 for r in written)

    for t in lost:  # no reward function scores an outage
        with pytest.raises(InfraErrorNotScored):
            anyio.run(verifier_reward, t)

    world.start()
    RecordingOracle.played = []
    again, resumed = anyio.run(lambda: run(RunSpec(server=world.url, tasks=tasks, output=out, resume=True,
                                                   concurrency=2), lambda i: RecordingOracle()))
    assert sorted(RecordingOracle.played) == sorted(t.task for t in lost), "resume replays exactly the lost ones"
    assert sorted(t.task for t in again) == sorted(t.task for t in lost) and not any(t.is_infra for t in again)
    assert (resumed.skipped, resumed.lost) == (1, 0) and resumed.lost_message() is None
    RecordingOracle.played = []
    nothing, done = anyio.run(lambda: run(RunSpec(server=world.url, tasks=tasks, output=out, resume=True),
                                          lambda i: RecordingOracle()))
    assert nothing == [] and RecordingOracle.played == [] and done.skipped == len(tasks)


class CrashingOracle(OraclePolicy):
    """A policy whose code breaks (a bug on our side, not a choice of the agent's)."""

    async def act(self, messages, tools, task):  # type: ignore[no-untyped-def]
        raise RuntimeError("policy bug")


@pytest.mark.parametrize(("policy", "task_id", "reason"), [
    (OraclePolicy, "no-such-task", "server error"),  # the server refuses to start the episode
    (CrashingOracle, "cancel-within-24h", "worker crash"),
])
def test_failures_on_our_side_are_infra_errors_without_reward(worlds_url: str, tmp_path: Path, policy, task_id: str,
                                                              reason: str) -> None:
    from mcpworld.core.models import TaskInfo

    url = f"{worlds_url}/worlds/airline/mcp"
    task = TaskInfo(id=task_id, instruction="Cancel reservation ZFA04Y.")
    spec = RunSpec(server=url, tasks=[task], output=tmp_path / "out.jsonl", retries=1, backoff_s=0.01)
    [t], summary = anyio.run(lambda: run(spec, lambda i: policy()))
    assert (t.termination, t.reward, t.attempts, t.infra_reason) == ("infra_error", 0.0, 2, reason), t.error
    assert (summary.lost, summary.lost_reasons, summary.episodes) == (1, {reason: 1}, 0)
    assert summary.lost_message() == f"1 episode lost to infrastructure errors ({reason}); rerun with --resume"


def test_infra_reasons_read_every_transport_the_same() -> None:
    import httpx
    from mcp.shared.exceptions import MCPError

    from mcpworld.agent.loop import infra_error_text, infra_reason
    from mcpworld.registry.connect import ConnectError

    assert infra_reason(ConnectError("cannot reach")) == "server unreachable"
    assert infra_reason(ExceptionGroup("tg", [httpx.ConnectError("refused")])) == "server unreachable"
    assert infra_reason(MCPError(-32000, "Connection closed")) == "connection lost"
    assert infra_reason(MCPError(-32001, "timed out")) == "server timed out"
    assert infra_reason(MCPError(-32603, "internal")) == "server error"
    assert infra_reason(httpx.ReadTimeout("slow")) == "server timed out"
    assert infra_reason(httpx.RemoteProtocolError("peer closed")) == "connection lost"
    assert infra_reason(ConnectionResetError()) == "connection lost"
    assert infra_reason(KeyError("x")) == "worker crash"
    assert infra_error_text(ExceptionGroup("tg", [httpx.ConnectError("refused")])) == \
        "server unreachable: ConnectError: refused"
    httpx2 = pytest.importorskip("httpx2")  # what the MCP SDK's transport raises
    assert infra_reason(ExceptionGroup("tg", [httpx2.ConnectError("refused")])) == "server unreachable"
    assert infra_reason(httpx2.ReadError("reset")) == "connection lost"


def test_a_transient_outage_is_retried_on_a_fresh_episode(world: World, tmp_path: Path) -> None:
    tasks = airline_tasks(world)
    out = tmp_path / "run.jsonl"
    spec = RunSpec(server=world.url, tasks=tasks, concurrency=1, output=out, retries=2, backoff_s=0.01,
                   config=EpisodeConfig(turn_timeout_s=30))
    policy = killing(world, tasks[2].id, restart=True)  # killed, and back before its first call is sent
    trajs, summary = anyio.run(lambda: run(spec, lambda i: policy()))
    assert policy.kills == 1 and world.alive
    assert summary.lost == 0 and not any(t.is_infra for t in trajs), [t.error for t in trajs]
    by_task = {t.task: t for t in trajs}
    assert by_task[tasks[2].id].attempts == 2, "the interrupted episode is played again from scratch"
    assert [by_task[t.id].attempts for t in tasks if t.id != tasks[2].id] == [1] * (len(tasks) - 1)
    assert sorted(r["task"] for r in lines(out)) == sorted(TASKS), "only the finished try is written"


def test_cli_exits_nonzero_when_episodes_are_lost_and_resume_replays_them(world: World, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "cli.jsonl"
    args = ["--server", world.url, "--policy", "oracle", "-o", str(out), "--retries", "1", "--retry-backoff",
            "0.01", *(a for t in TASKS for a in ("--task", t))]
    monkeypatch.setattr(policies, "OraclePolicy", killing(world, TASKS[1]))
    first = CliRunner().invoke(run_command, [*args, "--concurrency", "2"])
    assert first.exit_code == LOST_EXIT, first.output
    lost = {(r["task"], r["sample"]) for r in lines(out) if r["termination"] == "infra_error"}
    assert lost and f"{len(lost)} episode" in first.stderr
    assert "lost to infrastructure errors (" in first.stderr and "rerun with --resume" in first.stderr
    assert not any(r["reward"] == -1.0 for r in lines(out))
    assert all(r["reward"] == 0.0 for r in lines(out) if r["termination"] == "infra_error")

    world.start()
    RecordingOracle.played = []
    monkeypatch.setattr(policies, "OraclePolicy", RecordingOracle)
    before = len(lines(out))
    second = CliRunner().invoke(run_command, [*args, "--resume"])
    assert second.exit_code == 0, second.output
    assert "lost to infrastructure" not in second.output
    replayed = lines(out)[before:]
    assert {(r["task"], r["sample"]) for r in replayed} == lost and len(replayed) == len(lost)
    assert sorted(RecordingOracle.played) == sorted(task for task, _ in lost)
    assert not any(r["termination"] == "infra_error" for r in replayed)


# --- training ----------------------------------------------------------------------------------------------------


def test_collect_leaves_infra_errors_out_of_groups_and_counts_them(world: World, tmp_path: Path) -> None:
    tasks = airline_tasks(world, TASKS[:3])
    spec = RunSpec(server=world.url, tasks=tasks, samples=2, concurrency=1, output=tmp_path / "trajectories.jsonl",
                   resume=True, retries=0)
    policy = killing(world, tasks[1].id)
    groups = anyio.run(lambda: collect(spec, lambda i: policy()))
    assert [g.task for g in groups] == [tasks[0].id] and len(groups[0].trajectories) == 2
    assert groups.lost == 4 and sum(groups.lost_reasons.values()) == 4
    assert set(groups.lost_reasons) <= {"server unreachable", "connection lost"}, groups.lost_reasons
    assert not any(t.is_infra for g in groups for t in g.trajectories)
    assert not any(r.value == -1.0 for g in groups for r in g.rewards)

    world.start()
    again = anyio.run(lambda: collect(spec, lambda i: OraclePolicy()))
    assert again.lost == 0 and sorted(g.task for g in again) == sorted(t.id for t in tasks)
    assert all(len(g.trajectories) == 2 and not any(t.is_infra for t in g.trajectories) for g in again)
    # the file keeps the record of the outage, never as a -1; the groups never see it
    assert sum(t.is_infra for t in read_trajectories(spec.output)) == 4
    assert not any(r["reward"] == -1.0 for r in lines(spec.output))


def test_train_rollouts_reports_lost_samples_and_exits_nonzero(world: World, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policies, "OraclePolicy", killing(world, "flight-status"))
    args = ["rollouts", "--server", world.url, "--policy", "oracle", "-G", "1", "--concurrency", "1",
            "-o", str(tmp_path / "r")]
    result = CliRunner().invoke(train_group, args)
    assert result.exit_code == 3, result.output
    assert "samples lost to infrastructure errors" in result.stderr and "left out of the groups" in result.stderr
    groups = [json.loads(line) for line in (tmp_path / "r" / "groups.jsonl").read_text().splitlines()]
    assert groups and "flight-status" not in {g["task"] for g in groups}
    assert not any(s["termination"] in ("infra_error", "server_error") for g in groups for s in g["samples"])
    assert not any(v == -1.0 for g in groups for v in g["rewards"])


def infra(termination: str = "infra_error", **kw: Any) -> Trajectory:
    return Trajectory(server="s", task="t", policy="p", termination=termination,  # type: ignore[arg-type]
                      error="connection lost: MCPError: Connection closed", reward=kw.pop("reward", 0.0),
                      messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                                {"role": "assistant", "content": "partial"}], **kw)


def test_no_reward_scores_an_infra_error_and_no_consumer_keeps_one(tmp_path: Path) -> None:
    legacy = infra("server_error", reward=-1.0)  # what runners before infra_error wrote for an outage
    for t in (infra(), legacy):
        assert t.is_infra and t.infra_reason == "connection lost"
        with pytest.raises(InfraErrorNotScored, match="no reward"):
            anyio.run(verifier_reward, t)
        with pytest.raises(InfraErrorNotScored):
            anyio.run(JudgeReward(ChatClient(base_url="http://127.0.0.1:1/v1"), {}), t)
        assert SFTFilter(min_reward=-math.inf).reason(t) == "infra_error"
    fmt = Trajectory(server="s", task="t", policy="p", termination="format_error", reward=-1.0)
    assert anyio.run(verifier_reward, fmt).value == -1.0, "the agent's own format errors stay -1"
    good = Trajectory(server="s", task="t", policy="p", sample=1, reward=1.0, verdict=Verdict(passed=True, score=1))
    assert [s.samples for s in pass_rates([infra(), legacy, good])] == [1]
    [group] = anyio.run(make_groups, [infra(), legacy, good])
    assert group.trajectories == [good]
    counts = export_sft([infra(), good], tmp_path / "sft.jsonl", rules=SFTFilter(min_reward=0.0))
    assert counts == {"kept": 1, "dropped: infra_error": 1}
    # replay: an episode cut short by an outage is not a recording of the agent
    good.task, good.messages = "t", [*infra().messages[:2], {"role": "assistant", "content": "the real answer"}]
    recorded = tmp_path / "recorded.jsonl"
    recorded.write_text(infra().model_dump_json() + "\n" + good.model_dump_json() + "\n")
    assert ReplayPolicy(recorded).turns == {("t", 0): [{"role": "assistant", "content": "the real answer"}]}


# --- torn lines --------------------------------------------------------------------------------------------------


def torn_file(path: Path, server: str = "s", tasks: tuple[str, ...] = ("a", "b", "c")) -> Path:
    """Good line, garbage bytes, good line, a non-object, and a last line cut inside a multibyte character."""
    def good(task: str) -> bytes:
        t = Trajectory(server=server, task=task, policy="oracle", reward=1.0, verdict=Verdict(passed=True, score=1),
                       messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                                 {"role": "assistant", "content": "Done — café"}])
        return (t.model_dump_json() + "\n").encode()

    cut = good(tasks[2]).rstrip(b"\n")
    cut = cut[: cut.index("é".encode()) + 1]  # the first byte of a two-byte character, and nothing after
    path.write_bytes(good(tasks[0]) + b"\xff\xfe\x00garbage\n" + good(tasks[1]) + b"[1, 2]\n" + cut)
    return path


def torn_warnings(record: list[warnings.WarningMessage], path: Path) -> set[int]:
    found = set()
    for w in record:
        if issubclass(w.category, TornLineWarning):
            assert str(path) in str(w.message)
            found.add(int(str(w.message).split(f"{path}:")[1].split(":")[0]))
    return found


def test_every_reader_skips_torn_lines_with_a_warning(tmp_path: Path) -> None:
    path = torn_file(tmp_path / "torn.jsonl")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert [t.task for t in read_trajectories(path)] == ["a", "b"]
    assert torn_warnings(record, path) == {2, 4, 5}

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert sorted(ReplayPolicy(path).turns) == [("a", 0), ("b", 0)]
    assert torn_warnings(record, path) == {2, 4, 5}

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = CliRunner().invoke(train_group, ["curriculum", str(path)])
    assert result.exit_code == 0, result.output
    assert torn_warnings(record, path) == {2, 4, 5}

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = CliRunner().invoke(train_group, ["sft-export", str(path), "-o", str(tmp_path / "sft.jsonl")])
    assert result.exit_code == 0, result.output
    assert "kept: 2" in result.output
    assert torn_warnings(record, path) == {2, 4, 5}


def test_resume_and_replay_survive_a_torn_file(worlds_url: str, tmp_path: Path) -> None:
    url = f"{worlds_url}/worlds/airline/mcp"
    tasks = [t for t in anyio.run(list_tasks, url, None, None) if t.id in TASKS[:3]]
    path = torn_file(tmp_path / "torn.jsonl", server=url, tasks=tuple(t.id for t in tasks))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        again, summary = anyio.run(lambda: run(RunSpec(server=url, tasks=tasks, output=path, resume=True),
                                               lambda i: OraclePolicy()))
    assert torn_warnings(record, path) == {2, 4, 5}
    assert [t.task for t in again] == [tasks[2].id] and summary.skipped == 2, "the torn line's episode is replayed"
    assert path.read_bytes().endswith(b"\n"), "the writer repaired the torn tail before appending"
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert sorted(t.task for t in read_trajectories(path)) == sorted(t.id for t in tasks)
    assert torn_warnings(record, path) == {2, 4}  # the middle garbage stays; the cut tail is gone

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        replayed = CliRunner().invoke(run_command, ["--server", url, "--policy", "replay", "--replay-file",
                                                    str(path), "-o", str(tmp_path / "replayed.jsonl"),
                                                    *(a for t in tasks for a in ("--task", t.id))])
    assert replayed.exit_code == 0, replayed.output
    assert torn_warnings(record, path) == {2, 4}
    assert len(read_trajectories(tmp_path / "replayed.jsonl")) == len(tasks)


def test_writer_repairs_a_tail_cut_inside_a_character(tmp_path: Path) -> None:
    path = torn_file(tmp_path / "t.jsonl")
    TrajectoryWriter(path).append(Trajectory(server="s", task="d", policy="oracle"))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert [t.task for t in read_trajectories(path)] == ["a", "b", "d"]
    assert torn_warnings(record, path) == {2, 4}


# --- the OpenRLHF bridge -----------------------------------------------------------------------------------------


def _bridge():  # type: ignore[no-untyped-def]
    pytest.importorskip("torch", reason="the OpenRLHF bridge needs torch")
    pytest.importorskip("openrlhf.utils.agent", reason="install openrlhf --no-deps (see .ci/run)")
    from mcpworld.agent.formats import TextFormat
    from mcpworld.trainer import openrlhf_agent
    from mcpworld.trainer.tiny import tiny_tokenizer

    return openrlhf_agent, TextFormat().assistant_message, tiny_tokenizer


class _Params:
    max_tokens = None
    logprobs = None
    temperature = 1.0


class _Out:
    def __init__(self, ids: list[int], text: str):
        self.token_ids, self.text, self.finish_reason, self.logprobs = ids, text, "stop", None


class _Engine:
    """Stands in for vLLM: replies with `script[k]` on its k-th generation of an attempt (counted by the
    `<tool_response>` blocks in the prompt), and runs `hooks[n]` before its n-th generation overall."""

    def __init__(self, tokenizer: Any, script: list[str], hooks: dict[int, Any] | None = None):
        self.tokenizer, self.script, self.hooks, self.calls = tokenizer, script, hooks or {}, 0

    async def generate(self, token_ids, sampling_params, multi_modal_data=None):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls in self.hooks:
            self.hooks[self.calls]()
        prompt = self.tokenizer.decode(token_ids)
        text = self.script[min(prompt.count("<tool_response>"), len(self.script) - 1)]
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return type("RequestOutput", (), {"outputs": [_Out(ids, self.tokenizer.decode(ids))]})()


def _cancel_script(call) -> list[str]:  # type: ignore[no-untyped-def]
    from mcpworld.core.models import ToolCall

    get = ToolCall(name="get_reservation", arguments={"reservation_id": "ZFA04Y"})
    cancel = ToolCall(name="cancel_reservation", arguments={"reservation_id": "ZFA04Y", "reason": "change_of_plan"})
    return [call([get], None)["content"], call([cancel], None)["content"], "Cancelled."]


def _execute(agent_module, engine: _Engine, tokenizer: Any, server: str):  # type: ignore[no-untyped-def]
    label = json.dumps({"server": server, "task": "cancel-within-24h", "seed": 0})
    return anyio.run(lambda: agent_module.AgentExecutor().execute("task", label, _Params(), 4096, tokenizer, engine))


def test_bridge_retries_a_lost_rollout_from_scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent_module, call, tiny_tokenizer = _bridge()
    monkeypatch.setenv("MCPWORLD_INFRA_BACKOFF_S", "0")
    script = _cancel_script(call)
    tokenizer = tiny_tokenizer([*script, "<tool_response> </tool_response> task"], vocab_size=512)
    world = World(tmp_path / "home")  # not started: the first try finds nobody listening
    try:
        engine = _Engine(tokenizer, script, hooks={1: world.start})  # ...and the world is up for the second
        r = _execute(agent_module, engine, tokenizer, world.url)
    finally:
        world.kill()
    logs = {k: v.item() for k, v in r["extra_logs"].items()}
    assert r["reward"] == 1.0 and logs["passed"] == 1.0 and logs["attempts"] == 2.0 and logs["infra_error"] == 0.0
    assert len(r["action_ranges"]) == 3, "only the successful try's turns are in the sample"


@pytest.mark.parametrize("mode", ["zero", "filter", "raise"])
def test_bridge_never_rewards_a_world_killed_mid_episode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         mode: str) -> None:
    agent_module, call, tiny_tokenizer = _bridge()
    monkeypatch.setenv("MCPWORLD_INFRA_BACKOFF_S", "0")
    monkeypatch.setenv("MCPWORLD_INFRA_RETRIES", "1")
    monkeypatch.setenv("MCPWORLD_ON_INFRA_ERROR", mode)
    script = _cancel_script(call)
    tokenizer = tiny_tokenizer([*script, "<tool_response> </tool_response> task"], vocab_size=512)
    world = World(tmp_path / "home")
    world.start()
    try:
        engine = _Engine(tokenizer, script, hooks={2: world.kill})  # dies after the first tool call
        if mode == "raise":
            with pytest.raises(agent_module.InfraError, match="lost to infrastructure errors 2 times"):
                _execute(agent_module, engine, tokenizer, world.url)
            return
        r = _execute(agent_module, engine, tokenizer, world.url)
    finally:
        world.kill()
    logs = {k: v.item() for k, v in r["extra_logs"].items()}
    assert set(logs) == set(agent_module.LOG_KEYS)
    assert r["reward"] == 0.0 and logs["infra_error"] == 1.0 and logs["attempts"] == 2.0 and logs["passed"] == 0.0
    score = float(r["scores"])
    assert math.isnan(score) if mode == "filter" else score == 0.0
