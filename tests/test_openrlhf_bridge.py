"""The OpenRLHF bridge through OpenRLHF's own MultiTurnAgentExecutor, with a scripted engine, a tokenizer
built here, and a real world server over HTTP. Skipped where OpenRLHF/torch are not installed."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

pytest.importorskip("torch", reason="the OpenRLHF bridge needs torch (installed by .ci/run)")
pytest.importorskip("openrlhf.utils.agent", reason="install openrlhf --no-deps (see .ci/run)")

from mcpworld.agent.formats import TextFormat  # noqa: E402
from mcpworld.trainer.openrlhf_agent import LOG_KEYS, AgentExecutor  # noqa: E402
from mcpworld.trainer.tiny import tiny_tokenizer  # noqa: E402

CALL = TextFormat().assistant_message


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
    """Stands in for vLLM: replies with scripted texts, one per turn, per prompt."""

    tokenizer: object
    scripts: dict[str, list[str]]
    seen_max_tokens: list[int] = field(default_factory=list)

    async def generate(self, token_ids, sampling_params, multi_modal_data=None) -> RequestOutput:
        prompt = self.tokenizer.decode(token_ids)
        self.seen_max_tokens.append(sampling_params.max_tokens)
        for key, replies in self.scripts.items():
            if key in prompt:
                turn = prompt.count("<tool_response>")
                text = replies[min(turn, len(replies) - 1)]
                ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
                return RequestOutput([Output(ids, self.tokenizer.decode(ids))])
        raise AssertionError(f"no script for prompt {prompt[:80]!r}")


def label(server: str, task: str) -> str:
    return json.dumps({"server": server, "task": task, "seed": 0})


def calls(*steps) -> str:
    return "\n".join(CALL([s], None)["content"] for s in steps)


def test_bridge_rewards_ranges_and_errors(worlds_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpworld.core.models import ToolCall

    monkeypatch.setenv("MCPWORLD_INFRA_BACKOFF_S", "0")  # the dead server is retried: do not wait between tries

    server = f"{worlds_url}/worlds/airline/mcp"
    get = ToolCall(name="get_reservation", arguments={"reservation_id": "ZFA04Y"})
    cancel = ToolCall(name="cancel_reservation", arguments={"reservation_id": "ZFA04Y", "reason": "change_of_plan"})
    good = [calls(get), calls(cancel), "Cancelled."]
    wrong = ["It is cancelled."]  # claims success without doing it
    corpus = [*good, *wrong, "<tool_response> </tool_response> user assistant task-good task-wrong task-bad"]
    tokenizer = tiny_tokenizer(corpus, vocab_size=512)
    engine = ScriptedEngine(tokenizer, {"task-good": good, "task-wrong": wrong,
                                        "task-bad": ['<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>']})
    shared = SamplingParams()
    executor = AgentExecutor()

    async def one(prompt: str, lab: str) -> dict:
        return await executor.execute(prompt, lab, shared, 4096, tokenizer, engine)

    async def main() -> list[dict]:
        results = {}
        async with anyio.create_task_group() as tg:
            async def go(key: str, prompt: str, lab: str) -> None:
                results[key] = await one(prompt, lab)
            tg.start_soon(go, "good", "task-good", label(server, "cancel-within-24h"))
            tg.start_soon(go, "wrong", "task-wrong", label(server, "cancel-within-24h"))
            tg.start_soon(go, "bad", "task-bad", label(server, "cancel-within-24h"))
            tg.start_soon(go, "dead", "task-good", label("http://127.0.0.1:1/mcp", "cancel-within-24h"))
            tg.start_soon(go, "nolabel", "task-good", "not json")
        return results

    r = anyio.run(main)
    assert r["good"]["reward"] == 1.0 and r["good"]["extra_logs"]["passed"].item() == 1.0
    assert len(r["good"]["action_ranges"]) == 3
    for start, end in r["good"]["action_ranges"]:
        assert 0 < start < end <= len(r["good"]["observation_tokens"])
    assert "<tool_response>" in tokenizer.decode(r["good"]["observation_tokens"])
    assert r["wrong"]["reward"] == 0.0 and r["wrong"]["extra_logs"]["passed"].item() == 0.0
    assert r["bad"]["reward"] == -1.0 and r["bad"]["extra_logs"]["format_error"].item() == 1.0
    for key in ("dead", "nolabel"):
        assert r[key]["reward"] == 0.0 and r[key]["extra_logs"]["env_error"].item() == 1.0
    # An unreachable world is an infrastructure error: retried (1 + 3 tries), flagged, never a penalty; a bad
    # label is a data error: not retried.
    assert r["dead"]["extra_logs"]["infra_error"].item() == 1.0 and r["dead"]["extra_logs"]["attempts"].item() == 4
    assert r["nolabel"]["extra_logs"]["infra_error"].item() == 0.0
    assert r["nolabel"]["extra_logs"]["attempts"].item() == 1
    assert r["good"]["extra_logs"]["infra_error"].item() == 0.0
    assert all(set(x["extra_logs"]) == set(LOG_KEYS) for x in r.values())
    assert shared.max_tokens is None, "the group's shared sampling_params must not be mutated"


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
    line = printed.stdout
    assert "openrlhf.cli.train_ppo_ray" in line and "openrlhf_agent.py" in line
    assert "--actor.eps_clip_low_high 0.2 0.28" in line and "--rollout.n_samples_per_prompt 8" in line
