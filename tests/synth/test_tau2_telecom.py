"""τ²-bench telecom served as a world (issue 32): dual control, against τ² itself.

Telecom's user has tools of their own (their phone); calls carry a role. The oracle part runs τ²'s own code
(tests/synth/tau2_oracle.py in .venv/tau2-oracle, as tests/synth/test_tau2.py does) and compares, for gold, no-op,
perturbed, doubled, dropped and wrong-side sequences on every telecom base task (and an edge sequence over every
tool on a few): each result text and error flag, both databases, and τ²'s reward and breakdown. A new bill's id is
random in τ² (a UUID) and derived from the state here: both are masked before comparing.
"""

from __future__ import annotations

import copy
import json
import os
import re
from typing import Any

import pytest

from mcpworld.synth.importers.tau2.package import load_package, write_package
from mcpworld.synth.importers.tau2.telecom import dump_tree
from mcpworld.worlds.runtime import WorldRuntime
from tests.synth.test_tau2 import DATA, ORACLE, oracle

FOLDER = DATA / "domains" / "telecom"
pytestmark = pytest.mark.skipif(not (FOLDER / "db.toml").is_file(), reason=f"τ²-bench telecom data not found at "
                                                                           f"{FOLDER}")
NEW_BILL = re.compile(r"\bB[0-9a-f]{8}\b")
EDGE_TASKS = 4  # how many base tasks also play the edge sequence


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> WorldRuntime:
    return WorldRuntime(load_package(write_package(DATA, "telecom", tmp_path_factory.mktemp("tau2") / "t")))


def base_tasks() -> list[dict[str, Any]]:
    base = set(json.loads((FOLDER / "split_tasks.json").read_text(encoding="utf-8"))["base"])
    return [t for t in json.loads((FOLDER / "tasks.json").read_text(encoding="utf-8")) if t["id"] in base]


def gold(task: dict[str, Any]) -> list[list[Any]]:
    return [[a["name"], a["arguments"], a.get("requestor") or "assistant"]
            for a in task["evaluation_criteria"]["actions"] or []]


def perturb(call: list[Any]) -> list[Any]:
    name, arguments, side = copy.deepcopy(call)
    for key, value in arguments.items():
        arguments[key] = value + 1 if isinstance(value, (int, float)) else f"{value}X"
        return [name, arguments, side]
    return [name, {"unexpected": True}, side]  # a call without arguments: one it does not take


def sequences(task: dict[str, Any]) -> dict[str, list[list[Any]]]:
    calls = gold(task)
    out: dict[str, list[list[Any]]] = {"gold": calls, "noop": []}
    if calls:
        other = {"user": "assistant", "assistant": "user"}
        out["perturbed"] = [perturb(calls[0]), *calls[1:]]
        out["dropped"] = calls[:-1]
        out["doubled"] = calls + calls
        out["wrong side"] = [[calls[0][0], calls[0][1], other[calls[0][2]]], *calls[1:]]
    return out


def user(name: str, **arguments: Any) -> list[Any]:
    return [name, arguments, "user"]


def agent(name: str, **arguments: Any) -> list[Any]:
    return [name, arguments, "assistant"]


def edges() -> list[list[Any]]:
    """Every tool of both sides, with odd arguments, payments and toggles in between."""
    reads = ["check_status_bar", "check_network_status", "check_network_mode_preference", "run_speed_test",
             "check_sim_status", "check_data_restriction_status", "check_apn_settings", "check_wifi_status",
             "check_wifi_calling_status", "check_vpn_status", "check_installed_apps", "can_send_mms",
             "check_payment_request"]
    line = {"customer_id": "C1001", "line_id": "L1002"}
    return [
        *(user(r) for r in reads),
        user("check_app_status", app_name="messaging"), user("check_app_status", app_name="camera"),
        user("check_app_permissions", app_name="browser"), user("check_app_permissions", app_name="x"),
        user("set_network_mode_preference", mode="3g_only"), user("run_speed_test"),
        user("set_network_mode_preference", mode="bogus"), user("set_network_mode_preference", mode=5),
        user("toggle_wifi"), user("check_wifi_status"), user("toggle_wifi"), user("toggle_wifi_calling"),
        user("connect_vpn"), user("connect_vpn"), user("check_vpn_status"), user("run_speed_test"),
        user("disconnect_vpn"), user("disconnect_vpn"),
        user("set_apn_settings", apn_settings={"apn_name": "broken"}), user("check_network_status"),
        user("set_apn_settings", apn_settings={"apn_name": "nope"}), user("set_apn_settings", apn_settings="x"),
        user("reset_apn_settings"), user("toggle_data"), user("check_apn_settings"),
        user("set_apn_settings", apn_settings={"apn_name": "internet", "mmsc_url": None}), user("can_send_mms"),
        user("reset_apn_settings"), user("reboot_device"), user("check_apn_settings"), user("can_send_mms"),
        user("grant_app_permission", app_name="messaging", permission="Network"),
        user("grant_app_permission", app_name="messaging", permission="camera"),
        user("grant_app_permission", app_name="zzz", permission="sms"), user("toggle_data_saver_mode"),
        user("run_speed_test"), user("toggle_airplane_mode"), user("toggle_wifi"), user("toggle_airplane_mode"),
        user("set_network_mode_preference", mode="4g_5g_preferred"), user("toggle_data"), user("toggle_data"),
        user("toggle_roaming"), user("toggle_roaming"), user("reseat_sim_card"), user("make_payment"),
        agent("get_customer_by_phone", phone_number="555-123-2002"), agent("get_customer_by_phone", phone_number="0"),
        agent("get_customer_by_id", customer_id="C1001"), agent("get_customer_by_id", customer_id=["C1001"]),
        agent("get_customer_by_name", full_name="john SMITH", dob="1985-06-15"),
        *(agent("get_details_by_id", id=i) for i in ("L1002", "D1001", "B1001", "C1002", "P1001", "X1", "L9")),
        agent("get_details_by_id", id=5), agent("get_bills_for_customer", customer_id="C1001"),
        agent("get_bills_for_customer", customer_id="C1001", limit=1),
        agent("get_bills_for_customer", customer_id="C1001", limit="2"), agent("get_data_usage", **line),
        agent("suspend_line", **line, reason="travel"), agent("suspend_line", **line, reason="again"),
        user("check_network_status"), agent("resume_line", **line), agent("resume_line", **line),
        agent("send_payment_request", customer_id="C1001", bill_id="B1002"),
        agent("send_payment_request", customer_id="C1001", bill_id="B1003"), user("check_payment_request"),
        user("make_payment"), user("check_payment_request"), agent("get_bills_for_customer", customer_id="C1001"),
        agent("enable_roaming", **line), agent("enable_roaming", **line), agent("disable_roaming", **line),
        agent("disable_roaming", customer_id="C1001", line_id="L2001"),
        agent("refuel_data", **line, gb_amount=1.5), agent("refuel_data", **line, gb_amount=2),
        agent("refuel_data", **line, gb_amount=0), agent("refuel_data", **line),
        agent("refuel_data", **line, gb_amount=1, extra=1), agent("get_customer_by_id", customer_id="C1001"),
        agent("transfer_to_human_agents", summary="x"), agent("no_such_tool"), agent("toggle_data"),
        user("get_customer_by_id", customer_id="C1001"), user("run_speed_test"),
    ]


def masked(value: Any) -> Any:
    return json.loads(NEW_BILL.sub("B<new>", json.dumps(value)))


def ours(runtime: WorldRuntime, task_id: str, calls: list[list[Any]]) -> dict[str, Any]:
    episode = runtime.fork(task_id)
    try:
        results = []
        for name, arguments, side in calls:
            result = runtime.call(episode, name, arguments, side)
            results.append([result.value if result.error is None else result.error, result.error is not None])
        tau2 = runtime.verify(episode, None).evidence["tau2"]
        return {"results": results, "dump": dump_tree(episode.conn), "reward": tau2["reward"],
                "breakdown": tau2["breakdown"]}
    finally:
        episode.close()


def test_gold_passes_and_a_noop_fails_every_base_task(runtime: WorldRuntime) -> None:
    """Both verdicts: τ²'s reward is 1 for the gold actions (the user's included) and 0 for doing nothing; the
    project's `strict` verdict passes the reference and fails the no-op."""
    tasks = base_tasks()
    assert len(tasks) == 114
    for task in tasks:
        assert ours(runtime, task["id"], gold(task))["reward"] == 1.0, task["id"]
        assert ours(runtime, task["id"], [])["reward"] == 0.0, task["id"]
        assert runtime.judge.play(task["id"], None).passed, task["id"]
        assert not runtime.judge.play(task["id"], None, calls=[]).passed, task["id"]


def test_the_audit_plays_the_users_calls_and_no_wrong_policy_passes(runtime: WorldRuntime) -> None:
    """The audit's references and attacks keep each call's side (the user's calls stay the user's): every
    reference passes `strict` and no wrong policy does, on a phone-fixing task and on one that ends in a
    transfer."""
    from mcpworld.worlds.audit import audit

    tasks = base_tasks()
    chosen = [tasks[0]["id"], next(t["id"] for t in tasks if "ACTION" in t["evaluation_criteria"]["reward_basis"])]
    report = audit(runtime, chosen)
    assert report.ok, [f"{f.task}: {f.policy}: {f.detail}" for f in report.failures]
    assert "noop" not in report.tau2  # telecom's assertions fail a no-op on every task


def test_the_agent_cannot_call_the_users_tools_nor_the_user_the_agents(runtime: WorldRuntime) -> None:
    task = base_tasks()[0]
    episode = runtime.fork(task["id"])
    try:
        not_found = "Error: Tool 'toggle_airplane_mode' not found."
        assert runtime.call(episode, "toggle_airplane_mode", {}).error == not_found
        assert runtime.call(episode, "refuel_data", {}, "user").error == "Error: Tool 'refuel_data' not found."
        assert "toggle_airplane_mode" not in {t["name"] for t in runtime.listed_tools}
    finally:
        episode.close()


def test_the_users_calls_travel_over_mcp_with_their_role(runtime: WorldRuntime) -> None:
    """Through the world's MCP server: the user's tools are not listed; the user's calls carry `_meta` role "user";
    the agent's own call of a user tool is refused; the gold played this way scores τ²'s 1 in the verdict."""
    import anyio
    from mcp import Client

    from mcpworld.core.protocol import EpisodeControl
    from mcpworld.worlds.server import WorldServer

    server = WorldServer(runtime)
    task = base_tasks()[0]

    async def main() -> None:
        async with Client(server.server) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            assert "refuel_data" in listed and "toggle_airplane_mode" not in listed
            ctl = EpisodeControl(client)
            started = await ctl.start(task["id"])
            refused = await ctl.call(started.episode, "toggle_airplane_mode", {})
            assert refused.is_error and "not found" in refused.content[0].text
            for name, arguments, side in gold(task):
                result = await ctl.call(started.episode, name, arguments, side)
                assert not result.is_error, result
            verdict = (await ctl.verify(started.episode, "Your phone works again.",
                                        token=os.environ["MCPWORLD_REGISTRY_TOKEN"])).verdict
            assert verdict.evidence["tau2"] == {"reward": 1.0, "breakdown": {"ENV_ASSERTION": 1.0}}
            assert verdict.passed
    anyio.run(main)


USER_TURNS = [  # the user model's replies, in order (a replay server plays it): text, or its own tool calls
    {"content": "My mobile data does not work. I am John Smith, 555-123-2002, and I am in France."},
    {"content": None, "tool_calls": [{"name": "toggle_airplane_mode", "arguments": {}}]},
    {"content": "Airplane mode is off now, still no data."},
    {"content": None, "tool_calls": [{"name": "toggle_roaming", "arguments": {}}]},
    {"content": None, "tool_calls": [{"name": "run_speed_test", "arguments": {}}]},
    {"content": "Roaming is on and the speed test says excellent. Thanks! ###STOP###"},
]


@pytest.mark.skipif(not ORACLE.is_file(), reason="τ² oracle environment .venv/tau2-oracle is absent (.ci/run makes "
                                                  "it: Python >= 3.12, pip install ../shared/thirdparty/tau2-bench)")
@pytest.mark.parametrize("fixed", [True, False])
def test_a_user_model_acts_on_its_own_phone_and_scores_as_tau2(runtime: WorldRuntime, fixed: bool) -> None:
    """Dual control end to end: served with a user model (a replay server), the user calls their own tools when
    the agent asks (the model is offered them; their results go back to it only), the agent uses its own, and
    the user's stop ends the conversation. τ²'s reward over the same conversation is the verdict's; a user who
    never turns roaming on leaves the phone offline in both."""
    import anyio
    from mcp import Client

    from mcpworld.core.llm import ChatClient
    from mcpworld.core.llm_replay import ReplayLLM, serve
    from mcpworld.core.protocol import EpisodeControl
    from mcpworld.core.testing import free_port
    from mcpworld.worlds.server import WorldServer
    from mcpworld.worlds.users import UserModel

    task = base_tasks()[0]  # airplane mode on, abroad with roaming off: the user must fix both on the phone
    turns = USER_TURNS if fixed else [*USER_TURNS[:3], {"content": "I would rather not change that. ###STOP###"}]
    llm = ReplayLLM({"How can I help": turns})
    asks = ["Please turn airplane mode off.", "Please turn data roaming on and run a speed test."]
    with serve(llm, free_port()) as base:
        runtime.user_model = UserModel(ChatClient(base_url=base, model="user"))  # this test's (reset below)
        server = WorldServer(runtime)

        async def play() -> tuple[Any, list[str]]:
            async with Client(server.server) as client:
                ctl = EpisodeControl(client)
                started = await ctl.start(task["id"])
                assert started.instruction.startswith(USER_TURNS[0]["content"])
                await ctl.call(started.episode, "message_user", {"message": asks[0]})
                found = await ctl.call(started.episode, "get_customer_by_phone", {"phone_number": "555-123-2002"})
                assert not found.is_error
                last = await ctl.call(started.episode, "message_user", {"message": asks[1]})
                replies = [c.text for c in last.content]
                verdict = (await ctl.verify(started.episode, token=os.environ["MCPWORLD_REGISTRY_TOKEN"])).verdict
                return verdict, replies
        try:
            verdict, replies = anyio.run(play)
        finally:
            runtime.user_model = None
    assert "ended" in replies[0]  # the user's stop ended the conversation
    offered = llm.requests[0]
    assert {t["function"]["name"] for t in offered["tools"]} >= {"toggle_airplane_mode", "run_speed_test"}
    assert not any(t["function"]["name"] == "refuel_data" for t in offered["tools"])
    seen = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]  # the user saw its results
    assert seen and seen[0]["content"].startswith("Airplane Mode is now OFF.")
    user_calls = [c for t in turns for c in t.get("tool_calls") or []]
    case = {"task": task["id"], "calls": [
        ["message_user", {"message": asks[0], "calls": [[c["name"], c["arguments"]] for c in user_calls[:1]],
                          "reply": turns[2]["content"]}],
        ["get_customer_by_phone", {"phone_number": "555-123-2002"}],
        ["message_user", {"message": asks[1], "calls": [[c["name"], c["arguments"]] for c in user_calls[1:]],
                          "reply": turns[-1]["content"]}]]}
    [theirs] = oracle({"domain": "telecom", "cases": [case]})
    assert (verdict.evidence["tau2"]["reward"], verdict.evidence["tau2"]["breakdown"]) == \
        (theirs["reward"], theirs["breakdown"])
    assert theirs["reward"] == (1.0 if fixed else 0.0)
    assert verdict.passed is fixed  # `strict` agrees: τ²'s assertions hold on the phone only when it works


@pytest.mark.skipif(not ORACLE.is_file(), reason="τ² oracle environment .venv/tau2-oracle is absent (.ci/run makes "
                                                  "it: Python >= 3.12, pip install ../shared/thirdparty/tau2-bench)")
def test_a_recorded_tau2_run_scripts_the_user(runtime: WorldRuntime, tmp_path: Any,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's side of a run recorded by τ² (a results file, written by τ²'s own models) scripts the user
    (`MCPWORLD_USER_SCRIPT`): their messages in order, their own tool calls before the message that follows
    them. An agent that says and does what the recorded agent did scores τ²'s reward for that run."""
    import anyio
    from mcp import Client

    from mcpworld.core.protocol import EpisodeControl
    from mcpworld.worlds.server import WorldServer

    task = base_tasks()[0]
    asks = ["Please turn airplane mode off.", "Please turn data roaming on and run a speed test."]
    case = {"task": task["id"], "simulation": True, "opening": USER_TURNS[0]["content"], "calls": [
        ["message_user", {"message": asks[0], "calls": [["toggle_airplane_mode", {}]], "reply": "It is off."}],
        ["get_customer_by_phone", {"phone_number": "555-123-2002"}],
        ["message_user", {"message": asks[1], "calls": [["toggle_roaming", {}], ["run_speed_test", {}]],
                          "reply": "Excellent now. ###STOP###"}]]}
    [theirs] = oracle({"domain": "telecom", "cases": [case]})
    recorded = tmp_path / "results.json"
    recorded.write_text(json.dumps({"simulations": [theirs["simulation"]]}), encoding="utf-8")
    monkeypatch.setenv("MCPWORLD_USER_SCRIPT", str(recorded))
    server = WorldServer(runtime)

    async def play() -> Any:
        async with Client(server.server) as client:
            ctl = EpisodeControl(client)
            started = await ctl.start(task["id"])
            assert started.user == "scripted" and started.instruction.startswith(USER_TURNS[0]["content"])
            first = await ctl.call(started.episode, "message_user", {"message": asks[0]})
            assert "It is off." in first.content[0].text
            await ctl.call(started.episode, "get_customer_by_phone", {"phone_number": "555-123-2002"})
            last = await ctl.call(started.episode, "message_user", {"message": asks[1]})
            assert "ended" in last.content[0].text
            return (await ctl.verify(started.episode, token=os.environ["MCPWORLD_REGISTRY_TOKEN"])).verdict
    try:
        verdict = anyio.run(play)
    finally:
        runtime.user_scripts = {}
    assert theirs["reward"] == 1.0
    assert verdict.evidence["tau2"] == {"reward": theirs["reward"], "breakdown": theirs["breakdown"]}


@pytest.mark.timeout(1800)
@pytest.mark.skipif(not ORACLE.is_file(), reason="τ² oracle environment .venv/tau2-oracle is absent (.ci/run makes "
                                                  "it: Python >= 3.12, pip install ../shared/thirdparty/tau2-bench)")
def test_matches_tau2_on_every_base_task(runtime: WorldRuntime) -> None:
    request: dict[str, Any] = {"domain": "telecom", "cases": []}
    keys = []
    for index, task in enumerate(base_tasks()):
        plays = sequences(task)
        if index < EDGE_TASKS:
            plays["edges"] = edges()
        for label, calls in plays.items():
            request["cases"].append({"task": task["id"], "calls": calls})
            keys.append((task["id"], label))
    theirs = oracle(request)
    unequal = []
    for (task_id, label), case, expected in zip(keys, request["cases"], theirs, strict=True):
        got = ours(runtime, task_id, case["calls"])
        for part in ("results", "dump", "reward", "breakdown"):
            if masked(got[part]) != masked(expected[part]):
                unequal.append(f"task {task_id} {label}: {part}: ours {str(got[part])[:400]} τ² "
                               f"{str(expected[part])[:400]}")
    print(f"τ² telecom: {len(keys)} sequences over {len({k[0] for k in keys})} tasks, {len(keys) - len(unequal)} equal")
    assert not unequal, "\n".join(unequal[:12])
