"""The verl agent loop through verl 0.9's own machinery: its default config composed by Hydra with the docs'
overrides, the docs' agent-loop yaml, its `RLHFDataset` over the docs' parquet, its `AgentLoopWorker` (which
instantiates the loop per trajectory, pads, and turns `reward_score` into `rm_scores`), and a scripted server
manager with verl's `generate` signature returning verl's `TokenOutput` (vLLM's semantics: the end-of-turn token
ends `token_ids`; a reply at its `max_tokens` is cut there) for tokenizers built here, against real world
servers over HTTP. Skipped where verl is not installed."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="verl needs torch (installed by .ci/run)")
pytest.importorskip("verl.experimental.agent_loop", reason="install verl --no-deps and mcpworld[verl] (see .ci/run)")

from hydra import compose, initialize_config_dir  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402
from verl.trainer import config as verl_config  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from mcpworld.agent.formats import TextFormat  # noqa: E402
from mcpworld.agent.step import tool_text  # noqa: E402
from mcpworld.core.models import ToolCall  # noqa: E402
from mcpworld.core.protocol import EpisodeControl  # noqa: E402
from mcpworld.core.termination import Termination  # noqa: E402
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http  # noqa: E402
from mcpworld.registry.connect import connect  # noqa: E402
from mcpworld.trainer.tiny import save_tiny_chat_model  # noqa: E402
from mcpworld.trainer.verl_loop import INFO_KEYS  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs" / "training.md"
FMT = TextFormat()
TASK = "cancel-within-24h"
GET = ToolCall(name="get_reservation", arguments={"reservation_id": "ZFA04Y"})
CANCEL = ToolCall(name="cancel_reservation", arguments={"reservation_id": "ZFA04Y", "reason": "change_of_plan"})
REPLY_CAP = 96  # MCPWORLD_MAX_REPLY_TOKENS in these tests


def call_text(*calls: ToolCall) -> str:
    return FMT.assistant_message(list(calls), None)["content"]


GOOD = [call_text(GET), call_text(CANCEL), "Cancelled."]  # the oracle's calls for the task, then its answer
LONG = call_text(ToolCall(name="get_reservation", arguments={"reservation_id": "ZFA04Y " * 200}))  # past the cap


def doc_block(label: str) -> str:
    """The fenced block after `<!-- example: label -->` in docs/training.md, dedented (it sits in a list)."""
    match = re.search(rf"<!-- example: {label} -->\s*```[a-z]*\n(.*?)```", DOCS.read_text(), re.S)
    assert match, f"docs/training.md has no example labelled {label}"
    return textwrap.dedent(match.group(1))


class ScriptedServer:
    """Stands in for verl's server manager (`LLMServerClient.generate`): per prompt marker, one scripted reply
    per turn (the number of tool responses after the marker). Replies end with the end-of-turn token when `stop`,
    as vLLM returns them; a reply longer than `max_tokens` is cut there, without it. A plain class, as verl's
    is (Hydra would turn a dataclass into a config when it instantiates the loop)."""

    def __init__(self, tokenizer: Any, scripts: dict[str, list[str]], stop: bool = True):
        self.tokenizer, self.scripts, self.stop = tokenizer, scripts, stop
        self.prompts: list[list[int]] = []
        self.asked: list[dict[str, Any]] = []
        self.request_ids: list[str] = []
        self.on_turn: Any = None  # async hook(marker, turn), awaited before replying

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data: Any = None, video_data: Any = None, audio_data: Any = None,
                       mm_processor_kwargs: Any = None, **kwargs: Any) -> TokenOutput:
        self.prompts.append(list(prompt_ids))
        self.asked.append(dict(sampling_params))
        self.request_ids.append(request_id)
        prompt = self.tokenizer.decode(prompt_ids)
        for marker, replies in self.scripts.items():
            if f"[{marker}]" in prompt:  # bracketed as `with_marker` writes it: tool descriptions hold plain words
                turn = prompt.split(f"[{marker}]", 1)[1].count("<tool_response>")  # the system prompt shows one too
                if self.on_turn is not None:
                    await self.on_turn(marker, turn)
                ids = self.tokenizer.encode(replies[min(turn, len(replies) - 1)], add_special_tokens=False)
                limit = sampling_params["max_tokens"]
                if len(ids) >= limit:
                    ids = ids[:limit]
                elif self.stop:
                    ids.append(self.tokenizer.eos_token_id)
                logprobs = [-0.5] * len(ids) if sampling_params.get("logprobs") else None
                return TokenOutput(token_ids=ids, log_probs=logprobs, stop_reason="completed")
        raise AssertionError(f"no script for prompt {prompt[-120:]!r}")


def verl_config_for(model: Path, loops: Path, response_length: int = 2048) -> Any:
    """verl's own default trainer config, with the docs' command-line overrides and this test's model."""
    words = shlex.split(doc_block("verl-command").replace("\\\n", " "))
    overrides = dict(w.split("=", 1) for w in words[words.index("verl.trainer.main_ppo") + 1:])
    overrides.update({"actor_rollout_ref.model.path": str(model),
                      "actor_rollout_ref.rollout.agent.agent_loop_config_path": str(loops),
                      "data.max_prompt_length": "4096", "data.max_response_length": str(response_length)})
    with initialize_config_dir(config_dir=os.path.dirname(verl_config.__file__), version_base=None):
        return compose("ppo_trainer", overrides=[f"{k}={v}" for k, v in overrides.items()])


@pytest.fixture(scope="module")
def airline_prompts(worlds_url: str, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """`mcpworld train openrlhf-data` for the airline world, as the docs write it."""
    out = tmp_path_factory.mktemp("verl-data") / "prompts.jsonl"
    result = subprocess.run([sys.executable, "-m", "mcpworld", "train", "openrlhf-data", "--server",
                             f"{worlds_url}/worlds/airline/mcp", "-o", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def with_marker(row: dict[str, Any], marker: str, **label: Any) -> dict[str, Any]:
    """The row with `marker` in its user turn (the scripted server's key) and the label's fields changed."""
    prompt = [dict(m) for m in row["prompt"]]
    prompt[-1]["content"] = f"[{marker}] {prompt[-1]['content']}"
    return {"prompt": prompt, "label": json.dumps({**json.loads(row["label"]), **label})}


@dataclass
class Setup:
    worker: AgentLoopWorker
    server: ScriptedServer
    tokenizer: Any
    config: Any


def setup(tmp: Path, style: str, scripts: dict[str, list[str]], corpus: list[str], stop: bool = True,
          response_length: int = 2048) -> Setup:
    model = Path(save_tiny_chat_model(str(tmp / f"model-{style}"), corpus, style=style, hidden=64))
    loops = tmp / "mcpworld_agent_loops.yaml"
    loops.write_text(doc_block("verl-agent-loops"))
    config = verl_config_for(model, loops, response_length)
    from transformers import AutoTokenizer

    server = ScriptedServer(AutoTokenizer.from_pretrained(str(model)), scripts, stop=stop)
    worker = AgentLoopWorker(config, llm_client=server)
    return Setup(worker, server, worker.tokenizer, config)


def dataset(tmp: Path, rows: list[dict[str, Any]], s: Setup) -> DataProto:
    """The docs' parquet of `rows` (openrlhf-data lines), read back by verl's RLHFDataset into its batch."""
    (tmp / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        exec(compile(doc_block("verl-data"), "docs/training.md:verl-data", "exec"), {})
    finally:
        os.chdir(cwd)
    data = RLHFDataset(data_files=[str(tmp / "train.parquet")], tokenizer=s.tokenizer, config=s.config.data,
                       processor=None)
    batch = DataProto.from_single_dict(collate_fn([data[i] for i in range(len(data))]))
    batch.meta_info = {"global_steps": 1, "validate": False}
    return batch


def run(coro_fn: Any, *args: Any) -> Any:
    """Run on a fresh loop that records every error the loop itself reports (orphaned tasks, exceptions never
    retrieved, cancel scopes left from the wrong task), and every task left running."""
    reported: list[str] = []
    leftover: list[str] = []

    async def main() -> Any:
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: reported.append(str(ctx)))
        result = await coro_fn(*args)
        for _ in range(3):
            await asyncio.sleep(0)
        leftover.extend(t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task())
        return result

    result = asyncio.run(main())
    assert not reported, reported
    assert not leftover, f"tasks left running: {leftover}"
    return result


@dataclass
class Row:
    """One trajectory of verl's output batch, unpadded."""

    prompt: list[int]
    response: list[int]
    mask: list[int]
    reward: float
    termination: str
    info: dict[str, float]


def rows_of(out: DataProto) -> list[Row]:
    width = out.batch["prompts"].shape[1]
    result = []
    for i in range(len(out)):
        attention = out.batch["attention_mask"][i]
        p, r = int(attention[:width].sum()), int(attention[width:].sum())
        result.append(Row(out.batch["prompts"][i][width - p:].tolist(), out.batch["responses"][i][:r].tolist(),
                          out.batch["response_mask"][i][:r].tolist(), float(out.batch["rm_scores"][i].sum()),
                          str(out.non_tensor_batch["termination"][i]),
                          {k: float(out.non_tensor_batch[k][i]) for k in INFO_KEYS}))
    return result


def test_verl_rewards_masks_and_infra_errors(worlds_url: str, airline_prompts: list[dict[str, Any]],
                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One verl batch through verl's own worker: the oracle's replies earn 1, a false claim 0, an unknown tool
    and a malformed call -1, a call cut off by the reply cap 0 (truncated), an unreachable world and a row
    without its episode come back masked out and unscored, never raising; tool results are masked."""
    monkeypatch.setenv("MCPWORLD_INFRA_BACKOFF_S", "0")
    monkeypatch.setenv("MCPWORLD_MAX_REPLY_TOKENS", str(REPLY_CAP))
    monkeypatch.setenv("MCPWORLD_ROLLOUT_LOG", str(tmp_path / "rollouts.jsonl"))
    [base] = [r for r in airline_prompts if json.loads(r["label"])["task"] == TASK]
    unknown = call_text(ToolCall(name="rm_rf", arguments={}))
    scripts = {"good": GOOD, "wrong": ["It is cancelled."], "unknown": [unknown],
               "malformed": ['<tool_call>{"name": </tool_call>'], "cut": [LONG], "dead": GOOD, "norow": GOOD}
    s = setup(tmp_path, "qwen2.5", scripts, [*GOOD, LONG, base["prompt"][0]["content"]] * 2)
    rows = [with_marker(base, m) for m in ("good", "wrong", "unknown", "malformed", "cut")]
    rows += [with_marker(base, "dead", server="http://127.0.0.1:1/mcp"), {**with_marker(base, "norow"), "label": ""}]
    out = run(s.worker.generate_sequences, dataset(tmp_path, rows, s))
    good, wrong, unknown, malformed, cut, dead, norow = rows_of(out)

    assert (good.reward, good.termination, good.info["passed"], good.info["turns"]) == (1.0, "final_answer", 1, 3)
    assert (wrong.reward, wrong.termination, wrong.info["passed"]) == (0.0, "final_answer", 0)
    assert (unknown.reward, unknown.termination) == (-1.0, "unknown_tool")
    assert (malformed.reward, malformed.termination, malformed.info["format_error"]) == (-1.0, "format_error", 1)
    assert (cut.reward, cut.termination, cut.info["truncated"], cut.info["format_error"]) == (0.0, "truncated", 1, 0)
    for row in (good, wrong, unknown, malformed, cut):  # every reward is the one table's
        assert row.reward == Termination(row.termination).reward(bool(row.info["passed"]))
        assert row.info["scored"] == 1 and row.info["env_error"] == 0
    # An unreachable world is an infrastructure error: replayed (1 + 3 tries), flagged, reward 0 and every token
    # masked (no sample of the policy); a row without its episode is a data error: not replayed.
    assert (dead.termination, dead.info["infra_error"], dead.info["attempts"], dead.info["scored"]) == \
        ("infra_error", 1, 4, 0)
    assert (norow.termination, norow.info["env_error"], norow.info["infra_error"], norow.info["attempts"]) == \
        ("bad_row", 1, 0, 1)
    for row in (dead, norow):
        assert row.reward == 0.0 and not any(row.mask)

    # The mask: 1 on exactly the replies the server manager produced, 0 on the tool results between them.
    tok = s.tokenizer
    replies = [tok.encode(text, add_special_tokens=False) + [tok.eos_token_id] for text in GOOD]
    trained = [t for t, m in zip(good.response, good.mask, strict=True) if m]
    assert trained == [t for reply in replies for t in reply]
    fed_back = tok.decode([t for t, m in zip(good.response, good.mask, strict=True) if not m])
    assert fed_back.count("<tool_response>") == 2 and "ZFA04Y" in fed_back
    assert good.response[:len(replies[0])] == replies[0] and good.mask[:len(replies[0])] == [1] * len(replies[0])
    # Every reply is capped (MCPWORLD_MAX_REPLY_TOKENS) and logprobs are asked for (verl's default config).
    assert all(a["max_tokens"] <= REPLY_CAP and a["logprobs"] for a in s.server.asked)
    assert out.meta_info["reward_extra_keys"] == list(INFO_KEYS)
    logged = [json.loads(line) for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()]
    assert sorted(x["termination"] for x in logged) == sorted(r.termination for r in rows_of(out))
    assert {x["environment"].get("world") for x in logged if x["termination"] == "final_answer"} == {"airline"}


async def reference_results(server: str, calls: list[ToolCall]) -> list[str]:
    """The tool results a fresh episode gives for `calls`, read over a client of the test's own."""
    async with connect(server) as client:
        ctl = EpisodeControl(client)
        episode = (await ctl.start(TASK, 0)).episode
        out = [tool_text(await ctl.call(episode, c.name, c.arguments)) for c in calls]
        await ctl.close(episode)
    return out


def rendered(tokenizer: Any, messages: list[dict[str, str]], **kw: Any) -> list[int]:
    return list(tokenizer.apply_chat_template(messages, tokenize=True, **kw)["input_ids"])


@pytest.mark.parametrize(("style", "stop"), [("qwen2.5", True), ("llama3", True), ("chatml", False)])
def test_verl_stream_is_the_chat_template(worlds_url: str, airline_prompts: list[dict[str, Any]], tmp_path: Path,
                                          style: str, stop: bool) -> None:
    """Every prompt the server manager gets is `apply_chat_template` of the conversation so far, and the
    trajectory's prompt + response ids are the whole conversation's (no doubled or missing end-of-turn token),
    whether or not the engine returns that token; one request id for the whole episode."""
    server = f"{worlds_url}/worlds/airline/mcp"
    [base] = [r for r in airline_prompts if json.loads(r["label"])["task"] == TASK]
    row = with_marker(base, "marker")
    results = asyncio.run(reference_results(server, [GET, CANCEL]))
    full = [*row["prompt"]]
    for i, reply in enumerate(GOOD):
        full.append({"role": "assistant", "content": reply})
        if i < len(results):
            full += FMT.result_messages(None, [(results[i], False)])  # type: ignore[arg-type]
    s = setup(tmp_path, style, {"marker": GOOD}, [m["content"] for m in full] * 2, stop=stop)
    [out] = rows_of(run(s.worker.generate_sequences, dataset(tmp_path, [row], s)))
    assert out.reward == 1.0 and len(s.server.prompts) == 3 and len(set(s.server.request_ids)) == 1
    for turn, seen in enumerate(s.server.prompts):
        assert seen == rendered(s.tokenizer, full[:2 + 2 * turn], add_generation_prompt=True), f"turn {turn}"
    stream, whole = out.prompt + out.response, rendered(s.tokenizer, full)
    assert whole[:len(stream)] == stream
    rest = s.tokenizer.decode(whole[len(stream):])
    assert rest.replace(s.tokenizer.eos_token, "").strip() == "" and rest.count(s.tokenizer.eos_token) == (not stop)


@pytest.fixture
def doomed_server(tmp_path: Path) -> Any:
    """A world server of this test's own, to kill mid-run."""
    port = free_port()
    proc = subprocess.Popen(mcpworld_cmd("serve", "worlds", "--port", str(port)),
                            env={**os.environ, "MCPWORLD_HOME": str(tmp_path / "home")},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/healthz", proc)
        yield proc, f"{base}/worlds/airline/mcp"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_verl_server_killed_mid_run(doomed_server: Any, airline_prompts: list[dict[str, Any]], tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of 8 passes; in the next batch of 12 the server is killed once 6 trajectories have made a tool
    call (those wait for the kill, so at least 6 are lost for certain). verl's worker returns (no exception
    out of any `run()`, no cancellation or orphaned scope reported by the loop, no task left behind); every
    lost trajectory is an infrastructure error, replayed, reward 0 and wholly masked, never a format error."""
    monkeypatch.setenv("MCPWORLD_INFRA_BACKOFF_S", "0")
    proc, server = doomed_server
    [base] = [r for r in airline_prompts if json.loads(r["label"])["task"] == TASK]
    reached: list[int] = []
    kills: list[asyncio.Task] = []
    killed = asyncio.Event()

    async def kill() -> None:
        await asyncio.to_thread(lambda: (proc.kill(), proc.wait(10)))
        killed.set()

    async def on_turn(marker: str, turn: int) -> None:
        if marker == "late" and turn == 1:  # one call made: its next one is to a dead server
            reached.append(1)
            if len(reached) == 6:
                kills.append(asyncio.create_task(kill()))
            await killed.wait()

    s = setup(tmp_path, "qwen2.5", {"early": GOOD, "late": GOOD}, [*GOOD, base["prompt"][0]["content"]] * 2)
    s.server.on_turn = on_turn
    (tmp_path / "early").mkdir()
    (tmp_path / "late").mkdir()
    early = dataset(tmp_path / "early", [with_marker(base, "early", server=server)] * 8, s)
    late = dataset(tmp_path / "late", [with_marker(base, "late", server=server)] * 12, s)

    async def main() -> tuple[list[Row], list[Row]]:
        first = rows_of(await s.worker.generate_sequences(early))
        second = rows_of(await s.worker.generate_sequences(late))
        await asyncio.gather(*kills)
        return first, second

    first, second = run(main)
    assert proc.poll() is not None, "the server was not killed"
    assert [r.reward for r in first] == [1.0] * 8
    lost = [r for r in second if r.termination == "infra_error"]
    assert len(lost) >= 6, [r.termination for r in second]
    for r in second:
        assert r.termination in ("infra_error", "final_answer") and r.info["format_error"] == 0
    for r in lost:
        assert r.reward == 0.0 and not any(r.mask) and r.info["attempts"] == 4 and r.info["scored"] == 0
