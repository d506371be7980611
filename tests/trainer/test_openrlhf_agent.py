"""The OpenRLHF bridge through OpenRLHF 0.11's own MultiTurnAgentExecutor, with a scripted engine that keeps
vLLM's stop-token semantics (the end-of-turn token ends `token_ids`, not `text`), tokenizers built here, and
real world servers over HTTP. Skipped where OpenRLHF/torch are not installed."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the OpenRLHF bridge needs torch (installed by .ci/run)")
pytest.importorskip("openrlhf.utils.agent", reason="install openrlhf --no-deps (see .ci/run)")

from mcpworld.agent.formats import TextFormat  # noqa: E402
from mcpworld.agent.loop import window  # noqa: E402
from mcpworld.agent.step import tool_text  # noqa: E402
from mcpworld.core.models import ToolCall  # noqa: E402
from mcpworld.core.protocol import EpisodeControl  # noqa: E402
from mcpworld.core.termination import Termination  # noqa: E402
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http  # noqa: E402
from mcpworld.registry.connect import connect  # noqa: E402
from mcpworld.trainer.openrlhf_agent import LOG_KEYS, AgentExecutor  # noqa: E402
from mcpworld.trainer.openrlhf_cmd import openrlhf_startup_check  # noqa: E402
from mcpworld.trainer.tiny import chat_tokenizer, tiny_tokenizer  # noqa: E402

FMT = TextFormat()
GET = ToolCall(name="get_reservation", arguments={"reservation_id": "ZFA04Y"})
CANCEL = ToolCall(name="cancel_reservation", arguments={"reservation_id": "ZFA04Y", "reason": "change_of_plan"})
TASK = "cancel-within-24h"


def call_text(*calls: ToolCall) -> str:
    return FMT.assistant_message(list(calls), None)["content"]


GOOD = [call_text(GET), call_text(CANCEL), "Cancelled."]


@dataclass
class SamplingParams:
    max_tokens: int | None = None
    logprobs: int | None = None
    temperature: float = 1.0


@dataclass
class Output:
    token_ids: list[int]
    text: str
    finish_reason: str = "stop"
    logprobs: list | None = None


@dataclass
class RequestOutput:
    outputs: list[Output]


@dataclass
class ScriptedEngine:
    """Stands in for vLLM: per prompt marker, one scripted reply per turn (the turn is the number of tool
    responses in the prompt, or with `sequential` the number of calls so far). With `stop`, the reply's
    token_ids end with the end-of-turn token and its text does not, as vLLM returns them; a reply scripted
    as ("...", "length") is cut off by the token budget."""

    tokenizer: Any
    scripts: dict[str, list[Any]]
    stop: bool = True
    prompts: list[list[int]] = field(default_factory=list)
    max_tokens: list[int | None] = field(default_factory=list)
    on_turn: Any = None  # async hook(marker, turn), awaited before replying
    sequential: bool = False  # the turn is the number of calls so far (one rollout at a time)

    async def generate(self, token_ids, sampling_params, multi_modal_data=None) -> RequestOutput:
        self.prompts.append(list(token_ids))
        self.max_tokens.append(sampling_params.max_tokens)
        prompt = self.tokenizer.decode(token_ids)
        for marker, replies in self.scripts.items():
            if marker in prompt:
                turn = len(self.prompts) - 1 if self.sequential else prompt.count("<tool_response>")
                if self.on_turn is not None:
                    await self.on_turn(marker, turn)
                reply = replies[min(turn, len(replies) - 1)]
                text, finish = reply if isinstance(reply, tuple) else (reply, "stop")
                ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
                if self.stop and finish == "stop":
                    ids = ids + [self.tokenizer.eos_token_id]
                return RequestOutput([Output(ids, text, finish)])
        raise AssertionError(f"no script for prompt {prompt[:80]!r}")


def label(server: str, task: str = TASK) -> str:
    return json.dumps({"server": server, "task": task, "seed": 0})


def run(coro_fn, *args):
    """Run on a fresh asyncio loop that records every error the loop itself reports (orphaned tasks,
    exceptions never retrieved, cancel scopes left from the wrong task), and every task left running."""
    reported: list[str] = []
    leftover: list[str] = []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: reported.append(str(ctx)))
        result = await coro_fn(*args)
        for _ in range(3):  # let finished tasks' callbacks run
            await asyncio.sleep(0)
        leftover.extend(t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task())
        return result

    result = asyncio.run(main())
    assert not reported, reported
    assert not leftover, f"tasks left running: {leftover}"
    return result


def test_bridge_rewards_ranges_and_errors(worlds_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MCPWORLD_INFRA_BACKOFF_S", "0")  # the dead server is retried: do not wait between tries
    monkeypatch.setenv("MCPWORLD_ROLLOUT_LOG", str(tmp_path / "rollouts.jsonl"))
    monkeypatch.setenv("MCPWORLD_MAX_REPLY_TOKENS", "50")  # --max-reply-tokens
    server = f"{worlds_url}/worlds/airline/mcp"
    wrong = ["It is cancelled."]  # claims success without doing it
    cut = [(call_text(GET)[:20], "length")]  # the budget ran out mid-call
    corpus = [*GOOD, *wrong, "<tool_response> </tool_response> user assistant task-good task-wrong task-bad task-cut "
              "task-malformed"]
    tokenizer = tiny_tokenizer(corpus, vocab_size=512)
    engine = ScriptedEngine(tokenizer, {"task-good": GOOD, "task-wrong": wrong, "task-cut": cut,
                                        "task-malformed": ['<tool_call>{"name": </tool_call>'],
                                        "task-bad": ['<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>']})
    shared = SamplingParams()
    executor = AgentExecutor()
    cases = {"good": ("task-good", label(server)), "wrong": ("task-wrong", label(server)),
             "bad": ("task-bad", label(server)), "malformed": ("task-malformed", label(server)),
             "cut": ("task-cut", label(server)), "dead": ("task-good", label("http://127.0.0.1:1/mcp")),
             "nolabel": ("task-good", "not json")}

    async def main() -> dict[str, dict]:
        results = await asyncio.gather(*(executor.execute(p, lab, shared, 4096, tokenizer, engine)
                                         for p, lab in cases.values()))
        return dict(zip(cases, results))

    r = run(main)
    assert r["good"]["reward"] == 1.0 and r["good"]["extra_logs"]["passed"].item() == 1.0
    assert len(r["good"]["action_ranges"]) == 3
    for start, end in r["good"]["action_ranges"]:
        assert 0 < start < end <= len(r["good"]["observation_tokens"])
    assert "<tool_response>" in tokenizer.decode(r["good"]["observation_tokens"])
    assert r["wrong"]["reward"] == 0.0 and r["wrong"]["extra_logs"]["passed"].item() == 0.0
    assert r["bad"]["reward"] == -1.0 and r["bad"]["termination"] == "unknown_tool"
    assert r["malformed"]["reward"] == -1.0 and r["malformed"]["extra_logs"]["format_error"].item() == 1.0
    # A call cut off by the token budget is not a malformed call: 0, flagged as truncated.
    assert r["cut"]["reward"] == 0.0 and r["cut"]["termination"] == "truncated"
    assert r["cut"]["extra_logs"]["truncated"].item() == 1.0 and r["cut"]["extra_logs"]["format_error"].item() == 0
    for key, result in r.items():  # every reward is the one table's
        if result["termination"] and key != "dead":
            passed = bool(result["extra_logs"]["passed"].item())
            assert result["reward"] == Termination(result["termination"]).reward(passed), key
    for key in ("dead", "nolabel"):
        assert r[key]["reward"] == 0.0 and r[key]["extra_logs"]["env_error"].item() == 1.0
    # An unreachable world is an infrastructure error: retried (1 + 3 tries), flagged, never a penalty, and its
    # score is NaN so dynamic filtering drops the group; a bad label is a data error: not retried.
    assert r["dead"]["extra_logs"]["infra_error"].item() == 1.0 and r["dead"]["extra_logs"]["attempts"].item() == 4
    assert math.isnan(r["dead"]["scores"].item()) and r["dead"]["termination"] == "infra_error"
    assert r["nolabel"]["extra_logs"]["infra_error"].item() == 0.0
    assert r["nolabel"]["extra_logs"]["attempts"].item() == 1
    assert r["good"]["extra_logs"]["infra_error"].item() == 0.0
    assert all(set(x["extra_logs"]) == set(LOG_KEYS) for x in r.values())
    assert shared.max_tokens is None, "the group's shared sampling_params must not be mutated"
    assert engine.max_tokens and all(m == 50 for m in engine.max_tokens), "each reply is capped"
    logged = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert sorted(x["reward"] for x in logged) == sorted(x["reward"] for x in r.values())
    assert {x["termination"] for x in logged} >= {"final_answer", "unknown_tool", "truncated", "infra_error"}
    played = [x for x in logged if x["termination"] == "final_answer"]
    assert played and all(x["environment"]["world"] == "airline" and x["environment"]["digest"] for x in played)


@pytest.fixture
def doomed_server(tmp_path: Path):
    """A world server of this test's own, to kill mid-run."""
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(mcpworld_cmd("serve", "worlds", "--port", str(port)), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/healthz", proc)
        yield proc, f"{base}/worlds/airline/mcp"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def capped_server(tmp_path: Path):
    """A world server that holds at most 4 live episodes: one left open by a rollout blocks a later one."""
    port = free_port()
    proc = subprocess.Popen(mcpworld_cmd("serve", "worlds", "--port", str(port), "--max-episodes", "4"),
                            env={**os.environ, "MCPWORLD_HOME": str(tmp_path / "home")},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc)
        yield f"http://127.0.0.1:{port}/worlds/airline/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_every_ending_closes_its_episode(capped_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds of 4 concurrent rollouts, each ending differently (verified, unknown tool, malformed, cut off by
    the budget), on a server capped at 4 live episodes: a rollout that left its episode open would make a
    later round fail to start one. Every round plays to the same rewards."""
    monkeypatch.setenv("MCPWORLD_INFRA_RETRIES", "0")
    tokenizer = tiny_tokenizer([*GOOD, "<tool_response> </tool_response> good bad malformed cut"], vocab_size=512)
    scripts = {"good": GOOD, "bad": ['<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>'],
               "malformed": ['<tool_call>{"name": </tool_call>'], "cut": [(call_text(GET)[:20], "length")]}
    engine = ScriptedEngine(tokenizer, scripts)
    executor = AgentExecutor()

    async def rounds() -> list[list[float]]:
        out = []
        for _ in range(3):
            results = await asyncio.gather(*(executor.execute(m, label(capped_server), SamplingParams(), 4096,
                                                              tokenizer, engine)
                                             for m in ("good", "bad", "malformed", "cut")))
            out.append([r["reward"] for r in results])
        return out

    assert run(rounds) == [[1.0, -1.0, -1.0, 0.0]] * 3


def test_a_batch_of_rollouts_shares_one_connection(worlds_url: str) -> None:
    """16 concurrent rollouts through a counting pass-through proxy in front of the real server: one discovery
    and one tools/list for the whole batch (no handshake per rollout), 16 episodes started and verified, all
    passing; the next batch reconnects once, and nothing is left running between them."""
    from aiohttp import ClientSession, web

    upstream = f"{worlds_url}/worlds/airline/mcp"
    methods: list[str] = []
    tokenizer = tiny_tokenizer([*GOOD, "<tool_response> </tool_response> task"], vocab_size=512)
    engine = ScriptedEngine(tokenizer, {"task": GOOD})
    executor = AgentExecutor()

    async def main() -> tuple[list[float], list[str], list[float], list[str]]:
        async with ClientSession() as http:
            async def forward(request: web.Request) -> web.Response:
                body = await request.read()
                methods.append(json.loads(body)["method"])
                headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
                async with http.post(upstream, data=body, headers=headers) as answer:
                    return web.Response(body=await answer.read(), status=answer.status,
                                        content_type=answer.content_type)

            app = web.Application()
            app.router.add_post("/mcp", forward)
            runner = web.AppRunner(app)
            await runner.setup()
            port = free_port()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            try:
                batches = []
                for _ in range(2):
                    methods.clear()
                    results = await asyncio.gather(*(executor.execute("task", label(f"http://127.0.0.1:{port}/mcp"),
                                                                      SamplingParams(), 4096, tokenizer, engine)
                                                     for _ in range(16)))
                    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("mcpworld client")]
                    batches += [[r["reward"] for r in results], list(methods)]
            finally:
                await runner.cleanup()
        return tuple(batches)  # type: ignore[return-value]

    first, first_methods, second, second_methods = run(main)
    assert first == second == [1.0] * 16
    for seen in (first_methods, second_methods):
        assert seen.count("server/discover") == 1 and seen.count("tools/list") == 1, sorted(set(seen))
        assert "initialize" not in seen
        assert seen.count("io.mcpworld/episode/start") == 16 and seen.count("io.mcpworld/episode/verify") == 16


def test_server_killed_mid_run(doomed_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rollouts gathered as OpenRLHF's generate_responses gathers them (no return_exceptions): 8 finish, then
    32 more start and the server is killed once 8 of those have made a tool call, while the rest are
    connecting, starting, calling or generating (those with a call done wait for the kill, so at least 8 are
    lost for certain). Nothing raises, no cancellation or orphaned scope escapes
    (the loop reports nothing), every lost rollout is an infra error (retried, NaN score, reward 0, never a
    format error), the finished ones keep their rewards, and no task is left behind."""
    monkeypatch.setenv("MCPWORLD_INFRA_BACKOFF_S", "0")
    proc, server = doomed_server
    tokenizer = tiny_tokenizer([*GOOD, "<tool_response> </tool_response> early late"], vocab_size=512)
    reached: list[int] = []
    kills: list[asyncio.Task] = []
    killed = asyncio.Event()

    async def kill() -> None:
        await asyncio.to_thread(lambda: (proc.kill(), proc.wait(10)))
        killed.set()

    async def on_turn(marker: str, turn: int) -> None:
        if marker == "late" and turn == 1:  # one call made: its next one is to a dead server
            reached.append(1)
            if len(reached) == 8:  # the kill runs while the other rollouts connect, start, call
                kills.append(asyncio.create_task(kill()))
            await killed.wait()

    engine = ScriptedEngine(tokenizer, {"early": GOOD, "late": GOOD}, on_turn=on_turn)
    executor = AgentExecutor()

    async def main():
        params = SamplingParams()
        early = await asyncio.gather(*(executor.execute("early", label(server), params, 4096, tokenizer, engine)
                                       for _ in range(8)))
        late = await asyncio.gather(*(executor.execute("late", label(server), params, 4096, tokenizer, engine)
                                      for _ in range(32)))
        await asyncio.gather(*kills)
        return early, late

    early, late = run(main)
    assert proc.poll() is not None, "the server was not killed"
    assert [r["reward"] for r in early] == [1.0] * 8
    lost = [r for r in late if r["termination"] == "infra_error"]
    assert len(lost) >= 8, [r["termination"] for r in late]
    for r in late:
        assert r["termination"] in ("infra_error", "final_answer") and set(r["extra_logs"]) == set(LOG_KEYS)
        assert r["extra_logs"]["format_error"].item() == 0.0
    for r in lost:
        assert r["reward"] == 0.0 and math.isnan(r["scores"].item()) and r["extra_logs"]["attempts"].item() == 4
        assert r["extra_logs"]["infra_error"].item() == 1.0 and r["extra_logs"]["env_error"].item() == 1.0


async def reference_results(server: str, calls: list[ToolCall]) -> list[str]:
    """The tool results a fresh episode gives for `calls`, read over a client of the test's own."""
    async with connect(server) as client:
        ctl = EpisodeControl(client)
        episode = (await ctl.start(TASK, 0)).episode
        out = [tool_text(await ctl.call(episode, c.name, c.arguments)) for c in calls]
        await ctl.close(episode)
    return out


def conversation(results: list[str], replies: list[str]) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You operate an airline. Call tools."},
                {"role": "user", "content": "marker: cancel reservation ZFA04Y"}]
    for i, reply in enumerate(replies):
        messages.append({"role": "assistant", "content": reply})
        if i < len(results):
            messages += FMT.result_messages(None, [(results[i], False)])  # type: ignore[arg-type]
    return messages


def ids(tokenizer: Any, messages: list[dict[str, str]], **kw: Any) -> list[int]:
    return list(tokenizer.apply_chat_template(messages, tokenize=True, **kw)["input_ids"])


@pytest.mark.parametrize("stop", [True, False], ids=["engine-returns-stop", "no-stop-token"])
@pytest.mark.parametrize("style", ["chatml", "llama3", "qwen2.5"])
def test_training_stream_is_the_chat_template(worlds_url: str, style: str, stop: bool) -> None:
    """Every prompt the engine gets is `apply_chat_template` of the conversation so far (what an inference
    server renders), and the training stream is the whole conversation's: no doubled end-of-turn token."""
    server = f"{worlds_url}/worlds/airline/mcp"
    results = asyncio.run(reference_results(server, [GET, CANCEL]))
    full = conversation(results, GOOD)
    tokenizer = chat_tokenizer(style, [m["content"] for m in full] * 3)
    prompt = tokenizer.apply_chat_template(full[:2], add_generation_prompt=True, tokenize=False)
    engine = ScriptedEngine(tokenizer, {"marker": GOOD}, stop=stop)
    out = run(AgentExecutor().execute, prompt, label(server), SamplingParams(), 8192, tokenizer, engine)
    assert out["reward"] == 1.0
    assert len(engine.prompts) == 3
    for turn, seen in enumerate(engine.prompts):
        assert seen == ids(tokenizer, full[:2 + 2 * turn], add_generation_prompt=True), f"turn {turn}"
    stream, rendered = out["observation_tokens"], ids(tokenizer, full)
    assert rendered[:len(stream)] == stream
    rest = tokenizer.decode(rendered[len(stream):])
    assert rest.replace(tokenizer.eos_token, "").strip() == "" and rest.count(tokenizer.eos_token) == (not stop)


def test_history_window_trains_on_the_inference_context(worlds_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """MCPWORLD_HISTORY_TURNS=1: each turn is generated on system + task + the last turn, exactly what
    `window(messages, 1)` renders, and the training sample is one of those turns over that same context."""
    monkeypatch.setenv("MCPWORLD_HISTORY_TURNS", "1")
    server = f"{worlds_url}/worlds/airline/mcp"
    replies = [call_text(GET), call_text(GET), call_text(CANCEL), "Cancelled."]
    results = asyncio.run(reference_results(server, [GET, GET, CANCEL]))
    full = conversation(results, replies)
    tokenizer = chat_tokenizer("chatml", [m["content"] for m in full] * 3)
    prompt = tokenizer.apply_chat_template(full[:2], add_generation_prompt=True, tokenize=False)
    # The window keeps one tool response, so the engine counts turns by its calls, not by the prompt.
    engine = ScriptedEngine(tokenizer, {"marker": replies}, sequential=True)
    out = run(AgentExecutor().execute, prompt, label(server), SamplingParams(), 8192, tokenizer, engine)
    assert out["reward"] == 1.0 and len(engine.prompts) == 4
    inference = [ids(tokenizer, window(full[:2 + 2 * t], 1), add_generation_prompt=True) for t in range(4)]
    assert engine.prompts == inference
    assert [ctx for ctx, _, _ in out["turn_samples"]] == inference
    [(start, end)] = out["action_ranges"]
    chosen = [i for i, ctx in enumerate(inference) if ctx == out["observation_tokens"][:start]]
    assert chosen, "the training context is none of the inference contexts"
    # (turns 1 and 2 see the same window: the same call, the same result)
    trained = tokenizer.decode(out["observation_tokens"][start:end], skip_special_tokens=True)
    assert trained in {replies[i] for i in chosen}
    assert len(inference[3]) < len(ids(tokenizer, full[:8], add_generation_prompt=True))  # the window did cut


def test_openrlhf_data_and_command(worlds_url: str, tmp_path: Path) -> None:
    out = tmp_path / "prompts.jsonl"
    cmd = [sys.executable, "-m", "mcpworld", "train", "openrlhf-data", "--server",
           f"{worlds_url}/worlds/airline/mcp", "-o", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(json.loads(r["label"])["task"] for r in rows)
    assert rows[0]["prompt"][0]["role"] == "system" and "<tool_call>" in rows[0]["prompt"][0]["content"]
    printed = subprocess.run([sys.executable, "-m", "mcpworld", "train", "openrlhf", "--data", str(out),
                              "--pretrain", "Qwen/Qwen3-8B"], capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    line = printed.stdout.strip()
    assert "openrlhf.cli.train_ppo_ray" in line and "openrlhf_agent.py" in line
    argv = line.split(" -m openrlhf.cli.train_ppo_ray ", 1)[1].split()
    args = openrlhf_startup_check(argv)  # the printed defaults pass OpenRLHF's own start-up checks
    assert tuple(args.actor.eps_clip_low_high) == (0.2, 0.28) and args.rollout.n_samples_per_prompt == 8
    assert args.algo.dynamic_filtering_enable
    # The real score range: -1 (format error) to 1 (passed). A group mixing -1 and 0, or the issue's
    # [1, -1, -1, -1, -1, 0, 0, 0], is kept; only all -1 and all 1 are dropped.
    low, high = args.algo.dynamic_filtering_range
    for group, kept in (([1, -1, -1, -1, -1, 0, 0, 0], True), ([-1, 0, 0, 0], True), ([0, 1], True),
                        ([1, 1], False), ([-1, -1], False)):
        assert (low < sum(group) / len(group) < high) == kept, group
    colocated = args.actor.num_nodes * args.actor.num_gpus_per_node
    assert colocated == args.vllm.num_engines * args.vllm.tensor_parallel_size
    bad = subprocess.run([sys.executable, "-m", "mcpworld", "train", "openrlhf", "--data", str(out), "--pretrain",
                          "m", "--gpus", "8", "--vllm-engines", "3"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "8 GPUs" in bad.stderr and "--vllm-engines" in bad.stderr
