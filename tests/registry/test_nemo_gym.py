"""`mcpworld serve nemo-gym`: worlds as a NeMo Gym resources server, driven over real HTTP as NeMo Gym drives it.

nemo-gym needs Python >= 3.12 and its models import openai, orjson, ray... so its classes cannot be the oracle on
this interpreter; the wire format is encoded here from nemo-gym 0.4.0's source (the py3 wheel):
- routes: `POST /seed_session`, `POST /verify`, `POST /aggregate_metrics` (nemo_gym/base_resources_server.py
  137-139), a tool is `POST /<function name>` with the parsed arguments as the JSON body
  (responses_api_agents/simple_agent/app.py 148-152), the response body read as the tool's output (159-163);
- the session: Starlette's SessionMiddleware, cookie `<class>___<config name>` (nemo_gym/server_utils.py 491, 509),
  `session_id` re-assigned on every request so every response re-sends Set-Cookie (502) — the simple agent replaces
  its cookies with each tool response's (simple_agent/app.py 155), which `GymAgent` below does too;
- seed gets the dataset row (simple_agent/app.py 179-183; task fields in `verifier_metadata`, the convention of
  resources_servers/example_mcp_weather/app.py 61); verify gets the row plus `response` and answers the request
  plus `reward` (base_resources_server.py 83-93, simple_agent/app.py 198-206); the final answer is the assistant
  message's `output_text` (nemo_gym/openai_utils.py 140-162), a call is a `function_call` item (191-197).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpworld.core.serving import serve_in_thread
from mcpworld.core.testing import free_port, mcpworld_cmd, stop, wait_http
from mcpworld.registry.nemo_gym import nemo_gym_app
from mcpworld.worlds.episodes import EpisodeLimits
from mcpworld.worlds.host import build_servers, load_runtime
from mcpworld.worlds.loader import load_world, resolve
from mcpworld.worlds.runtime import WorldRuntime

COOKIE = "MCPWorldResourcesServer___mcpworld"
STATE_TASK = "cancel-within-24h"  # cancel reservation ZFA04Y: judged by the state it leaves
ANSWER_TASK = "flight-status"  # judged by the final answer


def start_server(home: Path, *args: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(mcpworld_cmd("serve", "nemo-gym", "--port", str(port), *args),
                            env={**os.environ, "MCPWORLD_HOME": str(home)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/", proc)
    return proc, base


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("nemo-gym-home")  # the catalog worlds only, whatever this machine installed


@pytest.fixture(scope="module")
def gym(home: Path) -> Iterator[str]:
    proc, base = start_server(home)  # every installed world
    try:
        yield base
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def dataset(home: Path) -> list[dict[str, Any]]:
    """The dataset NeMo Gym would train on, as the server writes it (one row per task of every world)."""
    out = subprocess.run(mcpworld_cmd("serve", "nemo-gym", "--write-dataset", "-"), capture_output=True, text=True,
                         check=True, timeout=120, env={**os.environ, "MCPWORLD_HOME": str(home)}).stdout
    return [json.loads(line) for line in out.splitlines()]


@pytest.fixture(scope="module")
def rows(dataset: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The airline's rows by task."""
    return {r["verifier_metadata"]["task"]: r for r in dataset if r["verifier_metadata"]["world"] == "airline"}


@pytest.fixture(scope="module")
def airline() -> Any:
    return load_runtime("airline")  # the oracle: each task's reference solution and answer


class GymAgent:
    """One rollout as NeMo Gym's simple agent plays it: each request carries the cookies the previous response set,
    and nothing else (its cookies are replaced by each response's, so a response without Set-Cookie loses them)."""

    def __init__(self, base: str):
        self.base, self.cookies = base, {}
        self.output: list[dict[str, Any]] = []

    def post(self, path: str, body: Any, **headers: str) -> httpx.Response:
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        content = body if isinstance(body, (str, bytes)) else json.dumps(body)
        reply = httpx.post(self.base + path, content=content, timeout=60,
                           headers={"Content-Type": "application/json", **headers})
        self.cookies = dict(reply.cookies)
        return reply

    def call(self, name: str, arguments: dict[str, Any]) -> httpx.Response:
        """A function call the model made, its route called, its output fed back (as simple_agent does)."""
        call_id = f"call_{len(self.output)}"
        self.output.append({"type": "function_call", "name": name, "arguments": json.dumps(arguments),
                            "call_id": call_id, "id": f"fc_{call_id}", "status": "completed"})
        reply = self.post(f"/{name}", arguments)
        self.output.append({"type": "function_call_output", "call_id": call_id, "output": reply.text})
        return reply

    def response(self, answer: str | None) -> dict[str, Any]:
        """The rollout's Responses API response (as /v1/responses returns it to `run`)."""
        output = list(self.output)
        if answer is not None:
            output.append({"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
                           "content": [{"type": "output_text", "text": answer, "annotations": []}]})
        return {"id": "resp_1", "object": "response", "created_at": 0, "model": "policy", "output": output,
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "incomplete_details": None}

    def verify(self, row: dict[str, Any], answer: str | None) -> httpx.Response:
        return self.post("/verify", {**row, "response": self.response(answer)})


def seeded(base: str, row: dict[str, Any]) -> GymAgent:
    agent = GymAgent(base)
    reply = agent.post("/seed_session", row)
    assert reply.status_code == 200, reply.text
    assert COOKIE in agent.cookies
    return agent


def reservation_status(agent: GymAgent) -> str:
    reply = agent.call("get_reservation", {"reservation_id": "ZFA04Y"})
    assert reply.status_code == 200, reply.text
    return reply.json()["status"]


def test_dataset_rows_carry_the_prompt_tools_and_task(rows: dict[str, dict[str, Any]], airline: Any) -> None:
    assert set(rows) == set(airline.tasks)  # one row per task
    row = rows[STATE_TASK]
    params = row["responses_create_params"]
    assert params["input"][-1] == {"role": "user", "content": airline.instruction(airline.tasks[STATE_TASK])}
    assert "Policy" in params["input"][0]["content"]
    tools = {t["name"]: t for t in params["tools"]}
    assert set(tools) == {*airline.tools, "submit_answer", "decline"}  # the world's tools and its two submissions
    assert tools["cancel_reservation"]["type"] == "function"
    assert tools["cancel_reservation"]["parameters"]["required"] == ["reservation_id", "reason"]


def test_oracle_scores_1_and_a_no_op_scores_0(gym: str, rows: dict[str, dict[str, Any]], airline: Any) -> None:
    for task in (STATE_TASK, ANSWER_TASK):
        agent = seeded(gym, rows[task])
        for step in airline.solution(airline.tasks[task]):  # the task's calls and its submission
            assert agent.call(step.name, step.arguments).status_code == 200
        verdict = agent.verify(rows[task], airline.tasks[task].answer or "Done: cancelled and refunded.")
        assert verdict.status_code == 200, verdict.text
        body = verdict.json()
        assert body["reward"] == 1.0, body["mcpworld"]
        assert body["mcpworld"]["termination"] == "final_answer"
        assert body["verifier_metadata"] == rows[task]["verifier_metadata"]  # the request comes back, plus reward
        assert body["response"]["output"] == agent.response(None)["output"] + body["response"]["output"][-1:]

    idle = seeded(gym, rows[STATE_TASK])  # answers without doing anything: the reservation is still booked
    body = idle.verify(rows[STATE_TASK], "Done, it is cancelled.").json()
    assert body["reward"] == 0.0 and body["mcpworld"]["passed"] is False and body["mcpworld"]["failures"]

    wrong = seeded(gym, rows[ANSWER_TASK])  # looks the flight up, then answers wrongly
    for step in airline.tasks[ANSWER_TASK].solution:
        wrong.call(step.name, step.arguments)
    assert wrong.verify(rows[ANSWER_TASK], "No, it is on time.").json()["reward"] == 0.0


def test_every_world_serves_its_reference_solutions(gym: str, dataset: list[dict[str, Any]]) -> None:
    """One task of each kind (state change, answer, refusal) in every world: the reference scores 1."""
    picked: dict[tuple[str, str], dict[str, Any]] = {}
    runtimes: dict[str, Any] = {}
    for row in dataset:
        world = row["verifier_metadata"]["world"]
        runtime = runtimes.get(world) or runtimes.setdefault(world, WorldRuntime(load_world(resolve(world))))
        picked.setdefault((world, runtime.tasks[row["verifier_metadata"]["task"]].kind), row)
    assert len(runtimes) >= 6 and {kind for _, kind in picked} == {"state", "answer", "refusal"}
    for (world, kind), row in picked.items():
        task = runtimes[world].tasks[row["verifier_metadata"]["task"]]
        agent = seeded(gym, row)
        for step in runtimes[world].solution(task):
            agent.call(step.name, step.arguments)
        body = agent.verify(row, task.answer or "Done.").json()
        assert body["reward"] == 1.0, (world, task.id, body["mcpworld"]["failures"])


def test_two_sessions_at_once_do_not_share_an_episode(gym: str, rows: dict[str, dict[str, Any]]) -> None:
    a, b = seeded(gym, rows[STATE_TASK]), seeded(gym, rows[STATE_TASK])
    assert a.cookies[COOKIE] != b.cookies[COOKIE]
    assert a.call("cancel_reservation", {"reservation_id": "ZFA04Y", "reason": "change_of_plan"}).status_code == 200
    assert reservation_status(a) == "cancelled"
    assert reservation_status(b) != "cancelled"  # b's world is untouched by a's cancellation
    assert b.verify(rows[STATE_TASK], "Done.").json()["reward"] == 0.0
    assert a.verify(rows[STATE_TASK], "Done.").json()["reward"] == 1.0


def test_bad_arguments_are_a_clear_422_and_change_nothing(gym: str, rows: dict[str, dict[str, Any]]) -> None:
    agent = seeded(gym, rows[STATE_TASK])
    before = reservation_status(agent)
    reply = agent.call("cancel_reservation", {"reservation_id": "ZFA04Y", "reason": "bored"})
    assert reply.status_code == 422
    assert "reason" in reply.json()["error"] and "change_of_plan" in reply.json()["error"]
    assert reply.json()["parameters"]["required"] == ["reservation_id", "reason"]  # what to send instead
    assert agent.call("cancel_reservation", {"reservation_id": "ZFA04Y"}).status_code == 422
    assert agent.post("/get_reservation", "[1, 2]").status_code == 422
    not_json = agent.post("/get_reservation", "{oops")
    assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]
    deep = agent.post("/get_reservation", "[" * 100_000)  # issue 30: a bare 500 before
    assert deep.status_code == 400 and "nested too deeply" in deep.json()["error"]
    huge = agent.post("/cancel_reservation", {"reservation_id": "ZFA04Y", "reason": "x" * 300_000})
    assert huge.status_code == 413 and "bytes" in huge.json()["error"]
    assert reservation_status(agent) == before
    # a refusal by the tool itself (a reservation that does not exist) is the model's to read, and rolled back
    refused = agent.call("cancel_reservation", {"reservation_id": "NOPE00", "reason": "other"})
    assert refused.status_code == 200 and "NOPE00" in refused.json()["error"]
    assert agent.verify(rows[STATE_TASK], "Done.").json()["reward"] == 0.0


def test_unknown_tool_is_404_with_the_list_and_scores_minus_1(gym: str, rows: dict[str, dict[str, Any]],
                                                               airline: Any) -> None:
    agent = seeded(gym, rows[STATE_TASK])
    reply = agent.call("cancel_everything", {})
    assert reply.status_code == 404
    assert reply.json()["tools"] == sorted([*airline.tools, "submit_answer", "decline"])
    assert "cancel_reservation" in reply.json()["error"]
    for step in airline.tasks[STATE_TASK].solution:  # then it does the task right: the reward table still says -1
        agent.call(step.name, step.arguments)
    body = agent.verify(rows[STATE_TASK], "Done.").json()
    assert body["reward"] == -1.0 and body["mcpworld"]["termination"] == "unknown_tool"
    assert body["mcpworld"]["passed"] is True  # the verdict is reported; the reward is the table's


def test_verify_twice_after_close_or_without_a_session_is_a_clear_error(gym: str,
                                                                          rows: dict[str, dict[str, Any]]) -> None:
    agent = seeded(gym, rows[STATE_TASK])
    seed_cookies = dict(agent.cookies)
    assert agent.verify(rows[STATE_TASK], "Done.").status_code == 200
    again = agent.verify(rows[STATE_TASK], "Done.")
    assert again.status_code == 409 and "already verified" in again.json()["error"]
    agent.cookies = seed_cookies  # a client replaying the cookie from before verify: the episode is closed
    stale = agent.call("get_reservation", {"reservation_id": "ZFA04Y"})
    assert stale.status_code == 410 and "/seed_session" in stale.json()["error"]
    fresh = GymAgent(gym)
    none = fresh.call("get_reservation", {"reservation_id": "ZFA04Y"})
    assert none.status_code == 400 and "/seed_session" in none.json()["error"] and COOKIE in none.json()["error"]
    assert fresh.verify(rows[STATE_TASK], "Done.").status_code == 400
    no_response = seeded(gym, rows[STATE_TASK]).post("/verify", rows[STATE_TASK])
    assert no_response.status_code == 422 and "`response`" in no_response.json()["error"]


def test_seed_says_which_world_and_task_to_pass(gym: str) -> None:
    agent = GymAgent(gym)
    no_world = agent.post("/seed_session", {"responses_create_params": {"input": "hi"}})
    assert no_world.status_code == 422 and {"airline", "shop"} <= set(no_world.json()["worlds"])
    bad_task = agent.post("/seed_session", {"verifier_metadata": {"world": "shop", "task": "cancel-within-24h"}})
    assert bad_task.status_code == 422 and "track-shipped-order" in bad_task.json()["tasks"]
    top_level = agent.post("/seed_session", {"world": "shop", "task": "track-shipped-order"})  # also accepted
    assert top_level.status_code == 200 and top_level.json()["world"] == "shop"
    assert agent.call("get_order", {"order_id": "O1003"}).json()["order"]["id"] == "O1003"
    wrong_world_tool = agent.call("get_reservation", {"reservation_id": "ZFA04Y"})
    assert wrong_world_tool.status_code == 404 and "get_order" in wrong_world_tool.json()["tools"]
    assert agent.verify({}, "I don't know.").json()["mcpworld"]["termination"] == "unknown_tool"  # shop lacks it


def test_loopback_server_refuses_foreign_host_and_origin(gym: str, rows: dict[str, dict[str, Any]]) -> None:
    agent = GymAgent(gym)
    rebound = agent.post("/seed_session", rows[STATE_TASK], Host="evil.example")
    assert rebound.status_code == 421 and "127.0.0.1" in rebound.json()["error"]
    cross_site = agent.post("/seed_session", rows[STATE_TASK], Origin="https://evil.example")
    assert cross_site.status_code == 403


def test_aggregate_metrics_summarizes_rewards(gym: str) -> None:
    rows = [{"_ng_task_index": 0, "reward": 1.0}, {"_ng_task_index": 0, "reward": 0.0},
            {"_ng_task_index": 1, "reward": -1.0}]
    body = GymAgent(gym).post("/aggregate_metrics", {"verify_responses": rows}).json()
    assert body["key_metrics"]["mean/reward"] == pytest.approx(0.0)
    assert [g["mean/reward"] for g in body["group_level_metrics"]] == [0.5, -1.0]


def test_episodes_are_bounded_by_the_cap_and_the_idle_ttl(home: Path, rows: dict[str, dict[str, Any]]) -> None:
    proc, base = start_server(home, "--only", "airline", "--max-episodes", "1", "--ttl", "1")
    try:
        first = seeded(base, rows[STATE_TASK])
        full = GymAgent(base).post("/seed_session", rows[STATE_TASK])
        assert full.status_code == 503 and "too many live episodes" in full.json()["error"]
        deadline = time.monotonic() + 30  # the idle episode is evicted after --ttl: then a new seed gets its slot
        while (second := GymAgent(base).post("/seed_session", rows[STATE_TASK])).status_code == 503:
            assert time.monotonic() < deadline, "the idle episode was never evicted"
        assert second.status_code == 200
        gone = first.call("get_reservation", {"reservation_id": "ZFA04Y"})
        assert gone.status_code == 410 and "idle" in gone.json()["error"]
    finally:
        stop(proc)


@pytest.mark.skipif(shutil.which("curl") is None, reason="the docs' example uses curl, which is not installed")
def test_the_docs_curl_example_scores_1(gym: str, tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text()
    block = re.search(r"<!-- example: nemo-gym-curl -->\s*```bash\n(.*?)```", text, re.S)
    assert block, "docs/training.md lost its NeMo Gym curl example"
    script = "\n".join(line for line in block.group(1).splitlines() if not line.startswith("mcpworld serve"))
    script = script.replace("localhost:8000", gym.removeprefix("http://"))  # the test's server, not port 8000
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    replies, text, decoder = [], out.stdout.strip(), json.JSONDecoder()  # curl prints the bodies back to back
    while text:
        reply, end = decoder.raw_decode(text)
        replies.append(reply)
        text = text[end:].strip()
    assert replies[0]["task"] == "cancel-within-24h" and replies[1]["status"] == "booked"
    verdict = replies[-1]
    assert verdict["reward"] == 1.0 and verdict["mcpworld"]["termination"] == "final_answer"


def test_beyond_loopback_the_routes_need_the_token_and_an_allowed_host(rows: dict[str, dict[str, Any]]) -> None:
    servers = build_servers(["airline"], EpisodeLimits())
    with serve_in_thread(nemo_gym_app(servers, host="0.0.0.0"), free_port()) as base:
        agent = GymAgent(base)
        missing = agent.post("/seed_session", rows[STATE_TASK])
        assert missing.status_code == 401 and "Authorization: Bearer <token>" in missing.json()["error"]
        token = os.environ["MCPWORLD_REGISTRY_TOKEN"]  # conftest sets it; the server read it at start
        assert agent.post("/seed_session", rows[STATE_TASK], Authorization="Bearer wrong").status_code == 401
        assert agent.post("/seed_session", rows[STATE_TASK], Authorization=f"Bearer {token}",
                          Host="attacker.example").status_code == 421
        assert agent.post("/seed_session", rows[STATE_TASK], Authorization=f"Bearer {token}").status_code == 200
        assert httpx.get(base + "/").json() == {"status": "ok"}  # NeMo Gym's liveness probe needs no token


NEMO_GYM_SRC = Path(os.environ.get("NEMO_GYM_SRC") or Path(__file__).resolve().parents[2] / ".venv" / "nemo-gym-src")
NEMO_GYM_CHECK = """
import json, re, sys
from omegaconf import OmegaConf
from nemo_gym.config_types import AggregateMetrics, maybe_get_server_instance_config
text = open(sys.argv[1]).read()
block = re.search(r"```yaml\\n(# resources_servers/mcpworld/configs/mcpworld.yaml\\n.*?)```", text, re.S)
cfg = OmegaConf.create(block[1])
kinds = {}
for name in cfg:
    instance, error = maybe_get_server_instance_config(name, cfg[name])
    assert instance is not None, (name, error)
    kinds[name] = type(instance).__name__
AggregateMetrics.model_validate(json.loads(sys.argv[2]))
print(json.dumps(kinds))
"""


def test_the_docs_config_and_metrics_pass_nemo_gyms_own_models(gym: str) -> None:
    """nemo-gym's config models import on this Python (its server code does not): the docs' config must be a
    resources server and a simple agent by NeMo Gym's own validation, and /aggregate_metrics its AggregateMetrics.
    In a subprocess: importing nemo_gym rewrites `print` and HF_HOME."""
    if not (NEMO_GYM_SRC / "nemo_gym" / "config_types.py").exists():
        pytest.skip(f"nemo-gym's source is not unpacked at {NEMO_GYM_SRC} (set NEMO_GYM_SRC); .ci/run unpacks it: "
                    "pip download nemo-gym==0.4.0 --no-deps --python-version 3.12 --only-binary=:all:, then unzip")
    metrics = GymAgent(gym).post("/aggregate_metrics", {"verify_responses": [{"reward": 1.0}]}).text
    docs = Path(__file__).resolve().parents[2] / "docs" / "training.md"
    out = subprocess.run([sys.executable, "-c", NEMO_GYM_CHECK, str(docs), metrics], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(NEMO_GYM_SRC)})
    missing = re.search(r"No module named '([^']+)'", out.stderr)
    if missing:
        pytest.skip(f"nemo-gym's config models need {missing[1]}, which is not installed here")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == {"mcpworld": "ResourcesServerInstanceConfig",
                                                       "mcpworld_simple_agent": "ResponsesAPIAgentServerInstanceConfig"}


def test_concurrent_rollouts_through_nemo_gyms_own_client_calls(gym: str, rows: dict[str, dict[str, Any]]) -> None:
    """64 rollouts at once over aiohttp as NeMo Gym's agent sends them (a DummyCookieJar; `cookies=` the previous
    response's `.cookies`, server_utils.py 108-117 and simple_agent/app.py 146-155): half cancel, half do nothing,
    and each gets its own reward."""
    import asyncio

    import aiohttp

    row = rows[STATE_TASK]
    final = GymAgent(gym).response("Done.")

    async def rollout(client: aiohttp.ClientSession, acts: bool) -> float:
        cookies = None

        async def post(path: str, body: dict[str, Any]) -> Any:
            nonlocal cookies
            async with client.post(gym + path, data=json.dumps(body), cookies=cookies,
                                   headers={"Content-Type": "application/json"}) as reply:
                cookies = reply.cookies
                return await reply.json(content_type=None)

        await post("/seed_session", row)
        if acts:
            await post("/cancel_reservation", {"reservation_id": "ZFA04Y", "reason": "change_of_plan"})
        await post("/get_reservation", {"reservation_id": "ZFA04Y"})
        return (await post("/verify", {**row, "response": final}))["reward"]

    async def main() -> list[float]:
        async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as client:
            return await asyncio.gather(*(rollout(client, i % 2 == 0) for i in range(64)))

    assert asyncio.run(main()) == [1.0 if i % 2 == 0 else 0.0 for i in range(64)]
