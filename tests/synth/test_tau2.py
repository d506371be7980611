"""τ²-bench airline served as a world (issue 32): tools, state and the `tau2` verdict against τ² itself.

The oracle part runs τ²'s own code (`pip install ../shared/thirdparty/tau2-bench` into .venv/tau2-oracle, a Python
>= 3.12 environment `.ci/run` makes) through tests/synth/tau2_oracle.py, and compares, for gold, no-op and perturbed
action sequences on every airline base task: each tool result text and error flag, the DB hash, and the reward and
its breakdown. Without that environment (or τ²'s data) the tests say why they skip.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from mcpworld.synth.importers.tau2.airline import KINDS, TABLES
from mcpworld.synth.importers.tau2.evaluate import state_hash
from mcpworld.synth.importers.tau2.package import load_package, write_package
from mcpworld.worlds.runtime import WorldRuntime

ROOT = Path(__file__).resolve().parents[2]
TAU2 = ROOT.parent / "shared" / "thirdparty" / "tau2-bench"
DATA = TAU2 / "data" / "tau2"
ORACLE = ROOT / ".venv" / "tau2-oracle" / "bin" / "python"

pytestmark = pytest.mark.skipif(not (DATA / "domains" / "airline" / "db.json").is_file(),
                                reason=f"τ²-bench data not found at {DATA}")


RUNTIMES: dict[str, WorldRuntime] = {}


def runtime_for(domain: str, tmp: Path) -> WorldRuntime:
    if domain not in RUNTIMES:
        RUNTIMES[domain] = WorldRuntime(load_package(write_package(DATA, domain, tmp / f"tau2-{domain}")))
    return RUNTIMES[domain]


def tasks_for(domain: str) -> list[dict[str, Any]]:
    return json.loads((DATA / "domains" / domain / "tasks.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tau2")


@pytest.fixture(scope="module")
def runtime(packages: Path) -> WorldRuntime:
    return runtime_for("airline", packages)


@pytest.fixture(scope="module")
def tasks() -> list[dict[str, Any]]:
    return tasks_for("airline")


def gold_calls(task: dict[str, Any]) -> list[list[Any]]:
    return [[a["name"], a["arguments"]] for a in task["evaluation_criteria"]["actions"]]


def perturb(arguments: dict[str, Any]) -> dict[str, Any]:
    """One argument of a write call changed to a plausible wrong value."""
    args = copy.deepcopy(arguments)
    for key in ("nonfree_baggages", "amount", "cabin", "flights", "passengers", "reason", "new_item_ids", "address1",
                "item_ids", "payment_id", "payment_method_id", "reservation_id", "order_id", "user_id"):
        if key not in args:
            continue
        value = args[key]
        if isinstance(value, int):
            args[key] = value + 1
        elif key == "cabin":
            args[key] = "business" if value != "business" else "economy"
        elif key == "reason":
            args[key] = "ordered by mistake" if value != "ordered by mistake" else "no longer needed"
        elif key in ("new_item_ids", "item_ids") and value:
            args[key] = value[1:] + value[:1] if len(set(value)) > 1 else value[:-1] + [value[-1] + "0"]
        elif key == "flights" and value:
            args[key] = value[:-1] if len(value) > 1 else [{**value[0], "date": "2024-05-30"}]
        elif key == "passengers" and value:
            args[key] = [{**value[0], "dob": "1990-01-01"}, *value[1:]]
        elif isinstance(value, str):
            args[key] = value + "X"
        return args
    return args


def retyped(arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The call with an integer argument sent as text, or one argument missing: τ² does not validate either."""
    args = copy.deepcopy(arguments)
    for key, value in args.items():
        if isinstance(value, int) and not isinstance(value, bool):
            args[key] = str(value)
            return args
    if args:
        args.pop(next(iter(args)))
        return args
    return None


def cases(task: dict[str, Any], kinds: dict[str, str] = KINDS) -> dict[str, list[list[Any]]]:
    gold = gold_calls(task)
    writes = [i for i, (name, _) in enumerate(gold) if kinds.get(name) == "write"]
    out = {"gold": gold, "noop": []}
    if writes:
        first, last = writes[0], writes[-1]
        out["perturbed"] = [*gold[:first], [gold[first][0], perturb(gold[first][1])], *gold[first + 1:]]
        out["dropped"] = gold[:last] + gold[last + 1:]
        out["doubled"] = gold + gold
        bad = retyped(gold[first][1])
        if bad is not None:
            out["retyped"] = [*gold[:first], [gold[first][0], bad], *gold[first + 1:]]
    return out


EDGE_TASKS = ("0", "7", "14", "23")  # where the edge sequence is played too


def edges(db: dict[str, Any]) -> list[list[Any]]:
    """Reads and odd arguments: searches, statuses, bad types, unhashable ids, unexpected or missing arguments,
    arithmetic, certificates until none is left, and failing writes that leave partial changes."""
    user = "mia_li_3668"
    reservation = db["users"][user]["reservations"][0]
    return [
        ["list_all_airports", {}],
        ["book_a_spaceship", {"destination": "Mars"}],  # a tool the domain does not have: τ²'s own error text
        ["search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}],
        ["search_onestop_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}],
        ["search_onestop_flight", {"origin": "SFO", "destination": "BOS", "date": "2024-05-30"}],
        ["get_flight_status", {"flight_number": "HAT001", "date": "2024-05-15"}],
        ["get_flight_status", {"flight_number": "HAT001", "date": "2099-01-01"}],
        ["get_user_details", {"user_id": ["x"]}],
        ["get_user_details", {"user_id": user, "extra": 1}],
        ["get_reservation_details", {}],
        ["calculate", {"expression": "(2 + 3) * 4 / 3"}],
        ["calculate", {"expression": "1 / 0"}],
        ["calculate", {"expression": "abc"}],
        ["send_certificate", {"user_id": user, "amount": "100"}],
        ["send_certificate", {"user_id": user, "amount": 100.5}],
        ["send_certificate", {"user_id": user, "amount": "abc"}],
        ["send_certificate", {"user_id": user, "amount": 50}],
        ["send_certificate", {"user_id": user, "amount": 50}],
        ["update_reservation_passengers", {"reservation_id": reservation, "passengers": "ab"}],
        ["update_reservation_baggages", {"reservation_id": reservation, "total_baggages": 2,
                                         "nonfree_baggages": "1", "payment_id": "x"}],
        ["update_reservation_flights", {"reservation_id": reservation, "cabin": "first",
                                        "flights": [{"flight_number": "HAT001", "date": "2024-05-20"}],
                                        "payment_id": "x"}],
        ["book_reservation", {"user_id": user, "origin": "JFK", "destination": "SEA", "flight_type": "one_way",
                              "cabin": "economy", "flights": [{"flight_number": "HAT069", "date": "2024-05-20"}],
                              "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
                              "payment_methods": [{"payment_id": "certificate_3221322", "amount": 50},
                                                  {"payment_id": "certificate_3221322", "amount": 50}],
                              "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no"}],
        ["cancel_reservation", {"reservation_id": reservation}],
        ["get_reservation_details", {"reservation_id": reservation}],
        ["get_user_details", {"user_id": user}],
    ]


RETAIL_EDGE_TASKS = ("0", "5", "20", "50")


def retail_edges(db: dict[str, Any]) -> list[list[Any]]:
    """Retail reads and odd arguments (see `edges`)."""
    user_id, user = next(iter(db["users"].items()))
    order = user["orders"][0]
    product_id, product = next(iter(db["products"].items()))
    item = next(iter(product["variants"]))
    return [
        ["list_all_product_types", {}],
        ["find_user_id_by_name_zip", {"first_name": user["name"]["first_name"].upper(),
                                      "last_name": user["name"]["last_name"], "zip": user["address"]["zip"]}],
        ["find_user_id_by_name_zip", {"first_name": 1, "last_name": "x", "zip": "0"}],
        ["find_user_id_by_email", {"email": user["email"].upper()}],
        ["find_user_id_by_email", {"email": "nobody@example.com"}],
        ["get_product_details", {"product_id": product_id}],
        ["get_item_details", {"item_id": item}],
        ["get_item_details", {"item_id": ["x"]}],
        ["get_order_details", {"order_id": order}],
        ["get_user_details", {"user_id": user_id, "extra": 1}],
        ["cancel_pending_order", {"order_id": order, "reason": ["x"]}],
        ["cancel_pending_order", {"order_id": order, "reason": "because"}],
        ["modify_user_address", {"user_id": user_id, "address1": "1 Main St", "address2": None, "city": "X",
                                 "state": "CA", "country": "USA", "zip": "12345"}],
        ["modify_user_address", {"user_id": user_id, "address1": "1 Main St", "address2": "", "city": "X",
                                 "state": "CA", "country": "USA", "zip": 12345}],
        ["modify_pending_order_items", {"order_id": order, "item_ids": "ab", "new_item_ids": "cd",
                                        "payment_method_id": "x"}],
        ["return_delivered_order_items", {"order_id": order, "item_ids": [], "payment_method_id": "x"}],
        ["exchange_delivered_order_items", {"order_id": order, "item_ids": [], "new_item_ids": [],
                                            "payment_method_id": next(iter(user["payment_methods"]))}],
        ["modify_pending_order_payment", {"order_id": order, "payment_method_id": next(iter(user["payment_methods"]))}],
        ["calculate", {"expression": "10 / 3"}],
        ["get_order_details", {"order_id": order}],
        ["get_user_details", {"user_id": user_id}],
    ]


def answer_of(task: dict[str, Any]) -> str | None:
    infos = task["evaluation_criteria"].get("communicate_info") or []
    return ("Done: " + ", ".join(infos)) if infos else None


def ours(runtime: WorldRuntime, task_id: str, calls: list[list[Any]], answer: str | None,
         tables: tuple[str, ...] = TABLES) -> dict[str, Any]:
    episode = runtime.fork(task_id)
    try:
        results = []
        for name, arguments in calls:
            result = runtime.call(episode, name, arguments)
            results.append([result.value if result.error is None else result.error, result.error is not None])
        db_hash = state_hash(runtime, episode, tables)
        tau2 = runtime.verify(episode, answer).evidence["tau2"]
        return {"results": results, "db_hash": db_hash, "reward": tau2["reward"], "breakdown": tau2["breakdown"]}
    finally:
        episode.close()


def test_gold_scores_one_and_noop_passes_exactly_what_tau2_passes(runtime: WorldRuntime, tasks: list[dict]) -> None:
    noop_passes = []
    for task in tasks:
        assert ours(runtime, task["id"], gold_calls(task), answer_of(task))["reward"] == 1.0, task["id"]
        if ours(runtime, task["id"], [], None)["reward"] == 1.0:
            noop_passes.append(task["id"])
    # the measured fact: τ² rewards a no-op on 23 of the 50 airline tasks
    assert len(noop_passes) == 23, noop_passes


def test_errors_keep_partial_writes_as_tau2_does(runtime: WorldRuntime) -> None:
    """Paying twice with one certificate: τ² pops the certificate on the first payment, then fails on the second
    with a KeyError; the certificate stays gone (no rollback), and no reservation is made."""
    user, cert = "mia_li_3668", "certificate_7504069"  # a 250 certificate
    episode = runtime.fork("0")
    try:
        found = json.loads(runtime.call(episode, "search_direct_flight",
                                        {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}).value)
        flight = next(f for f in found if f["prices"]["economy"] <= 500)
        price = flight["prices"]["economy"]
        result = runtime.call(episode, "book_reservation", {
            "user_id": user, "origin": "JFK", "destination": "SEA", "flight_type": "one_way", "cabin": "economy",
            "flights": [{"flight_number": flight["flight_number"], "date": "2024-05-20"}],
            "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
            "payment_methods": [{"payment_id": cert, "amount": price // 2},
                                {"payment_id": cert, "amount": price - price // 2}],
            "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no"})
        assert result.error == f"Error: '{cert}'"
        after = json.loads(runtime.call(episode, "get_user_details", {"user_id": user}).value)
        assert cert not in after["payment_methods"]  # kept: the call was not rolled back
        assert "HATHAT" not in after["reservations"]
        assert runtime.call(episode, "get_reservation_details", {"reservation_id": "HATHAT"}).error == \
            "Error: Reservation HATHAT not found"
    finally:
        episode.close()


def test_strict_fails_every_wrong_policy_on_tasks_tau2_lets_a_noop_pass(runtime: WorldRuntime) -> None:
    """`strict` (the default reward): a refusal must be declined; no-op and a bare answer fail it."""
    for task_id in ("0", "1", "49"):
        assert not runtime.judge.play(task_id, None, calls=[]).passed
        assert runtime.judge.play(task_id, "I cannot do that.").passed  # the reference: decline citing `policy`


def oracle(request: dict[str, Any], workers: int = 2, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """τ²'s answers for `request`, from `workers` driver processes side by side. Each case's answer is kept in
    .venv/tau2-oracle/cache under a digest of the case, the driver and τ²'s source (the oracle is deterministic:
    a rerun, or a run with a few new cases, costs only what is new)."""
    base = hashlib.sha256((ROOT / "tests" / "synth" / "tau2_oracle.py").read_bytes()
                          + b"".join(p.read_bytes() for p in sorted((TAU2 / "src").rglob("*.py"))))
    cache = ORACLE.parent.parent / "cache"
    files = []
    for case in request["cases"]:
        digest = base.copy()
        digest.update(json.dumps([request["domain"], case], sort_keys=True).encode())
        files.append(cache / f"{digest.hexdigest()}.json")
    todo = [i for i, f in enumerate(files) if not f.is_file()]
    if todo:
        env = {**os.environ, "TAU2_DATA_DIR": str(TAU2 / "data"), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
               **(env or {})}
        chunks = [todo[i::workers] for i in range(workers)]
        chunks = [c for c in chunks if c]
        inputs = []
        for c in chunks:  # each process reads its request from a file, so all start at once
            f = tempfile.TemporaryFile("w+", encoding="utf-8")
            f.write(json.dumps({**request, "cases": [request["cases"][i] for i in c]}))
            f.seek(0)
            inputs.append(f)
        procs = [subprocess.Popen([str(ORACLE), str(ROOT / "tests" / "synth" / "tau2_oracle.py")], stdin=f,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for f in inputs]
        outs = [p.communicate(timeout=1700) for p in procs]
        for f in inputs:
            f.close()
        cache.mkdir(parents=True, exist_ok=True)
        for p, c, (out, err) in zip(procs, chunks, outs, strict=True):
            assert p.returncode == 0, err[-3000:]
            for i, answer in zip(c, json.loads(out), strict=True):
                files[i].write_text(json.dumps(answer), encoding="utf-8")
    return [json.loads(f.read_text(encoding="utf-8")) for f in files]


@pytest.mark.timeout(1800)  # the first run: τ² re-validates its database four times per sequence (minutes)
@pytest.mark.skipif(not ORACLE.is_file(), reason="τ² oracle environment .venv/tau2-oracle is absent (.ci/run makes "
                                                  "it: Python >= 3.12, pip install ../shared/thirdparty/tau2-bench)")
@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_matches_tau2_on_every_base_task(domain: str, packages: Path) -> None:
    """Every base task (retail: the 74 whose NL assertions are empty; the 40 others need the judge, not served):
    gold, no-op and perturbed sequences give τ²'s result texts, DB hash, reward and breakdown.

    τ² re-validates its database for every sequence (about 1-3 s each on 2 cores, 632 sequences): by default every
    fourth base task is compared, so CI stays in its time; MCPWORLD_TAU2_ALL=1 compares them all (answers are
    cached, so a second full run costs seconds)."""
    from mcpworld.synth.importers.tau2 import retail

    runtime = runtime_for(domain, packages)
    kinds, tables = (KINDS, TABLES) if domain == "airline" else (retail.KINDS, retail.TABLES)
    request: dict[str, Any] = {"domain": domain, "cases": []}
    keys = []
    db = json.loads((DATA / "domains" / domain / "db.json").read_text(encoding="utf-8"))
    skipped = 0
    every = 1 if os.environ.get("MCPWORLD_TAU2_ALL") == "1" else 4
    for index, task in enumerate(tasks_for(domain)):
        if task["evaluation_criteria"].get("nl_assertions") and "NL_ASSERTION" in \
                task["evaluation_criteria"].get("reward_basis", []):
            skipped += 1
            continue
        if index % every and task["id"] not in (*EDGE_TASKS, *RETAIL_EDGE_TASKS):
            continue
        sequences = cases(task, kinds)
        if domain == "airline" and task["id"] in EDGE_TASKS:
            sequences["edges"] = edges(db)
        if domain == "retail" and task["id"] in RETAIL_EDGE_TASKS:
            sequences["edges"] = retail_edges(db)
        for label, calls in sequences.items():
            request["cases"].append({"task": task["id"], "calls": calls, "answer": answer_of(task)})
            keys.append((task["id"], label))
    theirs = oracle(request)
    unequal = []
    for (task_id, label), case, expected in zip(keys, request["cases"], theirs, strict=True):
        got = ours(runtime, task_id, case["calls"], case["answer"], tables)
        for part in ("results", "db_hash", "reward", "breakdown"):
            if got[part] != expected[part]:
                unequal.append(f"task {task_id} {label}: {part}: ours {str(got[part])[:300]} τ² "
                               f"{str(expected[part])[:300]}")
    tasks_compared = len({k[0] for k in keys})
    print(f"τ² {domain}: {len(keys)} sequences over {tasks_compared} tasks ({skipped} NL-judged tasks not compared), "
          f"{len(keys) - len(unequal)} equal")
    assert not unequal, "\n".join(unequal[:20])


def test_import_command_installs_the_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from mcpworld.app.cli import main

    monkeypatch.setenv("MCPWORLD_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(main, ["synth", "import-tau2", str(DATA), "--domain", "airline", "--registry",
                                       "http://127.0.0.1:9"])
    assert result.exit_code == 0, result.output
    assert "ok   tau2-airline: 14 tools, 50 tasks" in result.output
    manifest = json.loads((tmp_path / "home" / "worlds" / "tau2-airline" / "manifest.json").read_text())
    assert manifest["descriptions"] == "tau2 source docstrings"
    assert {t["name"] for t in manifest["tools"]} == set(KINDS)


def test_audit_reports_what_tau2_lets_a_wrong_policy_pass(runtime: WorldRuntime) -> None:
    """`strict` fails every wrong policy; the report lists the tasks τ²'s own reward lets pass (no-op: task 0, a
    refusal; not 3, whose answer must say "4"; not 7, which must write)."""
    from mcpworld.worlds.audit import audit

    report = audit(runtime, ["0", "3", "7"])
    assert report.ok, [f"{f.task}: {f.policy}: {f.detail}" for f in report.failures]
    assert report.tau2["noop"] == ["0"]
    assert report.as_dict()["tau2"]["noop"] == ["0"]


CONVERSATION_USER = ["Hi, I need help with my booking.", "Yes, please go ahead.", "Thanks. ###STOP###"]


@pytest.mark.skipif(not ORACLE.is_file(), reason="τ² oracle environment .venv/tau2-oracle is absent (.ci/run makes "
                                                  "it: Python >= 3.12, pip install ../shared/thirdparty/tau2-bench)")
@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_a_conversation_scores_as_tau2_scores_it(domain: str, packages: Path) -> None:
    """Served with a user model (a replay server), a τ² task is a conversation: the agent is not given the user's
    scenario, the user model is prompted with τ²'s own simulation guidelines and the scenario, and what the agent
    says through `message_user` is what τ²'s COMMUNICATE reads. For tasks that want facts communicated, the gold
    calls with the facts said in a message, and without them, score as τ²'s evaluator scores the same
    conversation (the agent's messages and the user's replies, ended by an agent stop)."""
    import anyio
    from mcp import Client

    from mcpworld.core.llm import ChatClient
    from mcpworld.core.llm_replay import ReplayLLM, serve
    from mcpworld.core.protocol import EpisodeControl
    from mcpworld.core.testing import free_port
    from mcpworld.worlds.server import WorldServer
    from mcpworld.worlds.users import UserModel

    runtime_for(domain, packages)
    servable = [t for t in tasks_for(domain) if not (t["evaluation_criteria"].get("nl_assertions")
                                                     and "NL_ASSERTION" in t["evaluation_criteria"]["reward_basis"])]
    chosen = [t for t in servable if "COMMUNICATE" in t["evaluation_criteria"]["reward_basis"]
              and t["evaluation_criteria"].get("communicate_info")][:3] or servable[:2]
    llm = ReplayLLM({"How can I help": [{"content": c} for c in CONVERSATION_USER]})
    cases, keys = [], []
    for task in chosen:
        infos = task["evaluation_criteria"].get("communicate_info") or []
        gold = gold_calls(task)
        for label, said in (("told", f"Here is what you asked: {', '.join(infos)}."), ("untold", "All done.")):
            calls = [["message_user", {"message": "How can I help with it?", "reply": CONVERSATION_USER[1]}],
                     *gold, ["message_user", {"message": said, "reply": CONVERSATION_USER[2]}]]
            cases.append({"task": task["id"], "calls": calls, "answer": None})
            keys.append((task["id"], label))
    theirs = oracle({"domain": domain, "cases": cases})
    with serve(llm, free_port()) as base:
        runtime = WorldRuntime(load_package(packages / f"tau2-{domain}"))
        server = WorldServer(runtime, user_model=UserModel(ChatClient(base_url=base, model="user")))

        async def play(case: dict[str, Any]) -> dict[str, Any]:
            async with Client(server.server) as client:
                ctl = EpisodeControl(client)
                started = await ctl.start(case["task"])
                assert started.user == "model" and started.instruction.startswith(CONVERSATION_USER[0])
                for name, arguments in case["calls"]:
                    if name == "message_user":
                        arguments = {"message": arguments["message"]}
                    await ctl.call(started.episode, name, arguments)
                verdict = (await ctl.verify(started.episode, token=None)).verdict
                assert "tau2" not in verdict.evidence  # sealed for a policy: τ²'s reward reaches token holders
                return {}

        async def judged(case: dict[str, Any]) -> dict[str, Any]:
            episode = runtime.fork(case["task"])
            conversation = runtime.open_conversation(episode)
            assert conversation is not None
            conversation.messages.append({"role": "user", "content": CONVERSATION_USER[0]})
            try:
                for name, arguments in case["calls"]:
                    if name == "message_user":
                        conversation.messages += [{"role": "assistant", "content": arguments["message"]},
                                                  {"role": "user", "content": arguments["reply"]}]
                    else:
                        runtime.call(episode, name, arguments)
                return runtime.verify(episode, None).evidence["tau2"]
            finally:
                episode.close()

        anyio.run(play, cases[0])
        first = llm.requests[0]["messages"]
        guidelines = (DATA / "user_simulator" / "simulation_guidelines.md").read_text(encoding="utf-8")
        assert guidelines.strip()[:200] in first[0]["content"]  # τ²'s guidelines, then the task's scenario
        assert chosen[0]["user_scenario"]["instructions"]["reason_for_call"].strip()[:80] in first[0]["content"]
        unequal = []
        for (task_id, label), case, expected in zip(keys, cases, theirs, strict=True):
            got = anyio.run(judged, case)
            if (got["reward"], got["breakdown"]) != (expected["reward"], expected["breakdown"]):
                unequal.append(f"task {task_id} {label}: ours {got} τ² {expected['reward']} {expected['breakdown']}")
        told = [expected["reward"] for (_, label), expected in zip(keys, theirs) if label == "told"]
        assert all(r == 1.0 for r in told) and not unequal, "\n".join(unequal)


@pytest.mark.timeout(900)
@pytest.mark.skipif(not ORACLE.is_file(), reason="τ² oracle environment .venv/tau2-oracle is absent (.ci/run makes "
                                                  "it: Python >= 3.12, pip install ../shared/thirdparty/tau2-bench)")
def test_nl_assertions_score_as_tau2_scores_them(packages: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Retail's 40 tasks judged by NL assertions: with a judge model (a replay server standing in for the LLM,
    answering both systems alike), the gold actions score τ²'s reward and breakdown when the judge finds every
    assertion met and when it finds one unmet; without a judge the reward is reported as not served, never
    invented. Every fourth task by default, all with MCPWORLD_TAU2_ALL=1."""
    import anyio

    from mcpworld.core.llm_replay import ReplayLLM, serve
    from mcpworld.core.testing import free_port

    runtime_for("retail", packages)
    every = 1 if os.environ.get("MCPWORLD_TAU2_ALL") == "1" else 4
    judged = [t for t in tasks_for("retail") if t["evaluation_criteria"].get("nl_assertions")
              and "NL_ASSERTION" in t["evaluation_criteria"]["reward_basis"]][::every]
    assert judged

    def key(task: dict[str, Any]) -> str:
        first = task["evaluation_criteria"]["nl_assertions"][0]
        return re.split(r"['\"\\]", first)[0][:50]

    def verdicts(met: bool) -> dict[str, list[dict[str, Any]]]:
        out = {}
        for task in judged:
            assertions = task["evaluation_criteria"]["nl_assertions"]
            results = [{"expectedOutcome": a, "reasoning": "recorded", "metExpectation": met or i > 0}
                       for i, a in enumerate(assertions)]
            out[key(task)] = [{"content": json.dumps({"results": results})}]
        return out

    runtime = runtime_for("retail", packages)
    episode = runtime.fork(judged[0]["id"])
    try:
        note = runtime.verify(episode, None).evidence["tau2"]
        assert note["reward"] is None and "MCPWORLD_JUDGE_MODEL" in note["note"]  # no judge: not scored
    finally:
        episode.close()
    for met in (True, False):
        with serve(ReplayLLM(verdicts(met)), free_port()) as base:
            cases = [{"task": t["id"], "calls": gold_calls(t), "answer": answer_of(t), "judge": f"met={met}"}
                     for t in judged]
            theirs = oracle({"domain": "retail", "cases": cases},
                            env={"OPENAI_API_BASE": base, "OPENAI_BASE_URL": base, "OPENAI_API_KEY": "replay"})
            monkeypatch.setenv("MCPWORLD_JUDGE_MODEL", "judge")
            monkeypatch.setenv("MCPWORLD_JUDGE_BASE_URL", base)
            unequal = []
            for case, expected in zip(cases, theirs, strict=True):
                episode = runtime.fork(case["task"])
                try:
                    for name, arguments in case["calls"]:
                        runtime.call(episode, name, arguments)
                    anyio.run(runtime.world.prejudge, runtime, episode, case["answer"])
                    got = runtime.verify(episode, case["answer"]).evidence["tau2"]
                finally:
                    episode.close()
                if (got["reward"], got["breakdown"]) != (expected["reward"], expected["breakdown"]):
                    unequal.append(f"task {case['task']} met={met}: ours {got} τ² {expected['reward']} "
                                   f"{expected['breakdown']}")
            assert not unequal, "\n".join(unequal[:10])
            assert any(e["breakdown"].get("NL_ASSERTION") == (1.0 if met else 0.0) for e in theirs)
