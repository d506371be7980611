"""TRL adapter: the environment class TRL's GRPOTrainer gets as `environment_factory`, played directly against
a real world server, and real (CPU, tiny model) TRL GRPO runs on it: one pooled connection for all of a
trainer's environments (counted by a pass-through proxy), and a server killed mid-run costs the lost rollouts
their reward (None: TRL leaves them out), never the run. Skipped where TRL is not installed."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http

trl = pytest.importorskip("trl", reason="TRL is not installed (pip install 'mcpworld[trl]'; CI installs it)")

from mcpworld.trainer.trl_env import MCPWorldEnvironment, mcpworld_environment  # noqa: E402


@dataclass
class Proxy:
    """What a counting pass-through proxy saw: each request's JSON-RPC method, and the TCP peers it came from."""

    url: str
    methods: list[str] = field(default_factory=list)
    peers: set[Any] = field(default_factory=set)

    def clear(self) -> None:
        self.methods.clear()
        self.peers.clear()


@contextmanager
def counting_proxy(upstream: str) -> Iterator[Proxy]:
    """A real HTTP proxy on a loop of its own (the adapter is synchronous, as TRL calls it) in front of the
    real server: every request is forwarded and counted."""
    from aiohttp import ClientSession, web

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    proxy = Proxy(f"http://127.0.0.1:{free_port()}/mcp")

    async def start() -> tuple[web.AppRunner, ClientSession]:
        http = ClientSession()

        async def forward(request: web.Request) -> web.Response:
            body = await request.read()
            proxy.methods.append(json.loads(body)["method"])
            proxy.peers.add(request.transport.get_extra_info("peername") if request.transport else None)
            headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
            async with http.post(upstream, data=body, headers=headers) as answer:
                return web.Response(body=await answer.read(), status=answer.status, content_type=answer.content_type)

        app = web.Application()
        app.router.add_post("/mcp", forward)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", int(proxy.url.split(":")[2].split("/")[0])).start()
        return runner, http

    runner, http = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    try:
        yield proxy
    finally:
        async def stop() -> None:
            await runner.cleanup()
            await http.close()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def test_environment_plays_the_task_and_scores_by_the_table(worlds_url: str) -> None:
    from transformers.utils import get_json_schema

    env_cls = mcpworld_environment(f"{worlds_url}/worlds/airline/mcp")
    schema = get_json_schema(env_cls.cancel_reservation)["function"]  # what TRL shows the model
    assert schema["name"] == "cancel_reservation" and schema["parameters"]["required"] == ["reservation_id", "reason"]
    env = env_cls()
    assert env.reset(task="cancel-within-24h") is None
    assert '"ZFA04Y"' in env.get_reservation(reservation_id="ZFA04Y")
    assert "error" not in env.cancel_reservation(reservation_id="ZFA04Y", reason="change_of_plan")[:10]
    assert env.get_reward() == 1.0 and env.get_reward() == 1.0  # asked twice: the same verdict
    env.reset(task="cancel-within-24h")  # a fresh episode: nothing done yet
    assert env.get_reward() == 0.0
    with pytest.raises(ValueError, match="`task` column"):
        env.reset(prompt="no task here")
    with pytest.raises(ValueError, match="task 'no-such-task' cannot be started.*unknown task"):
        env.reset(task="no-such-task")  # a typo in the data stops the run, it is not an outage to score None
    env.reset(task="cancel-within-24h")  # and leaves the environment usable
    assert env.error is None and env.get_reward() == 0.0
    dead = mcpworld_environment("http://127.0.0.1:1/mcp", tools=[])()
    dead.reset(task="cancel-within-24h")  # unreachable: not the model's doing, so no reward at all
    assert dead.get_reward() is None and (dead.error or "").startswith("server unreachable")
    assert "unavailable" in dead._call("x", {})


def test_environments_share_one_connection(worlds_url: str) -> None:
    """8 environments with their episodes open at once, through a counting proxy: one discovery (the pooled
    client's), no handshake, one TCP connection, 8 episodes started and verified, all passing; the pool closes
    when the last one is scored, and the next batch reconnects once."""
    with counting_proxy(f"{worlds_url}/worlds/airline/mcp") as proxy:
        env_cls = mcpworld_environment(proxy.url)
        envs = [env_cls() for _ in range(8)]
        for _ in range(2):
            proxy.clear()
            for env in envs:
                env.reset(task="cancel-within-24h")
            for env in envs:
                env.cancel_reservation(reservation_id="ZFA04Y", reason="change_of_plan")
            assert [env.get_reward() for env in envs] == [1.0] * 8
            assert proxy.methods.count("server/discover") == 1 and "initialize" not in proxy.methods
            assert proxy.methods.count("io.mcpworld/episode/start") == 8
            assert proxy.methods.count("io.mcpworld/episode/verify") == 8
            assert len(proxy.peers) == 1, proxy.peers


@pytest.fixture
def toy_server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    import mcpworld.trainer.toy_world as toy

    port = free_port()
    proc = subprocess.Popen(mcpworld_cmd("serve", "world", str(Path(toy.__file__).parent), "--port", str(port)),
                            env={**os.environ, "MCPWORLD_HOME": str(tmp_path / "home")},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc)
        yield proc, f"http://127.0.0.1:{port}/worlds/buttons/mcp"
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=10)


def train_two_steps(env_cls: type[MCPWorldEnvironment], out: Path) -> Any:
    """TRL's own GRPOTrainer, a tiny model built here, two GRPO steps on CPU (2 rollouts a step) on press-green."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from mcpworld.trainer.tiny import chat_tokenizer, tiny_model

    tokenizer = chat_tokenizer("qwen2.5", ["press red green blue the button", "Press the button of that colour."] * 9)
    tokenizer.padding_side = "left"
    rows = [{"prompt": [{"role": "user", "content": "press green"}], "task": "press-green"}] * 4
    args = GRPOConfig(output_dir=str(out), per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=4, max_steps=2, logging_steps=1, report_to="none", use_cpu=True,
                      bf16=False, save_strategy="no")
    trainer = GRPOTrainer(model=tiny_model(len(tokenizer), hidden=32), processing_class=tokenizer, args=args,
                          train_dataset=Dataset.from_list(rows), environment_factory=env_cls)
    trainer.train()
    return trainer


def test_trl_grpo_runs_on_mcpworld_episodes(toy_server: tuple[subprocess.Popen, str], tmp_path: Path) -> None:
    """Every rollout is reset onto its row's task and scored by the environment (a random model calls no tool,
    so the reward is 0), and the trainer's environments share one pooled connection: one discovery to list the
    tools, then one per batch, not one per rollout."""
    _, url = toy_server
    resets: list[str] = []
    with counting_proxy(url) as proxy:
        class Buttons(mcpworld_environment(proxy.url)):  # type: ignore[misc]
            def reset(self, **row):  # type: ignore[no-untyped-def]
                resets.append(row["task"])
                return super().reset(**row)

        trainer = train_two_steps(Buttons, tmp_path / "out")
    logged = [h for h in trainer.state.log_history if "rewards/Buttons/mean" in h]
    assert len(logged) == 2 and all(h["rewards/Buttons/mean"] == 0.0 for h in logged)
    assert len(resets) == 4 and set(resets) == {"press-green"}
    assert proxy.methods.count("io.mcpworld/episode/start") == 4 and "initialize" not in proxy.methods
    assert proxy.methods.count("server/discover") == 1 + 2, proxy.methods


def test_server_killed_mid_run_is_an_infra_error(toy_server: tuple[subprocess.Popen, str], tmp_path: Path) -> None:
    """The world server is killed during the second step, right after that step's first episode started: that
    episode and the next (which cannot start) score None, an infrastructure error, never a reward; the first
    step's keep their 0; training finishes both steps with finite losses. An episode left open across the run
    then answers its tool call with the outage, and scores None too."""
    proc, url = toy_server
    scored: list[tuple[float | None, str | None]] = []
    resets = [0]

    class Buttons(mcpworld_environment(url)):  # type: ignore[misc]
        def reset(self, **row):  # type: ignore[no-untyped-def]
            observation = super().reset(**row)
            resets[0] += 1
            if resets[0] == 3:
                proc.kill()
                proc.wait(10)
            return observation

        def get_reward(self) -> float | None:
            reward = super().get_reward()
            scored.append((reward, self.error))
            return reward

    held = Buttons()
    held.reset(task="press-green")  # its episode (and the pooled connection) stays open through the kill
    resets[0] = 0
    trainer = train_two_steps(Buttons, tmp_path / "out")
    assert proc.poll() is not None, "the server was not killed"
    assert trainer.state.global_step == 2
    assert [reward for reward, _ in scored] == [0.0, 0.0, None, None], scored
    for _, error in scored[2:]:
        assert error is not None and error.split(":")[0] in ("server unreachable", "connection lost"), error
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    answer = held.press(color="green")
    assert answer.startswith("error: the environment is unavailable (") and held.get_reward() is None
