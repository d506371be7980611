"""AWM's published format imported as worlds: a hand-built AgentWorldModel-1K folder (tests/data/awm, the seven
gen_*.jsonl files) imports, serves over MCP with isolated episodes, verifies with both of AWM's verifier modes,
and every task is audited: a task whose target already holds is dropped with that reason, a broken scenario is
reported and skipped, and a second run resumes (tests/synth/test_awm_provisional.py: tasks without a reference)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters

from mcpworld.agent.trajectory import Trajectory
from mcpworld.core.llm import ChatClient
from mcpworld.core.llm_replay import ReplayLLM, serve
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.testing import free_port
from mcpworld.synth.cli import synth_group
from mcpworld.synth.importers.awm_format import read_dataset
from mcpworld.trainer.rewards import JudgeReward
from mcpworld.worlds.loader import load_world
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.server import WorldServer

DATA = Path(__file__).parents[1] / "data" / "awm"
pytestmark = pytest.mark.usefixtures("awm_runtime")  # AWM's scenarios run under AWM's lock (skips saying why without)


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(synth_group, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("awm")
    code, output = run_cli("import-awm", str(DATA), "--references", str(DATA / "references.jsonl"), "-o", str(out),
                           "--parallel", "2", "--json")
    assert code == 0, output
    report = json.loads(output[output.index("{"):])
    return {"out": out, "report": report, "scenarios": {s["scenario"]: s for s in report["scenarios"]}}


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def test_every_published_file_is_read_by_its_normalized_scenario_name() -> None:
    scenarios = {s.key: s for s in read_dataset(DATA)}
    assert list(scenarios) == ["pet_clinic_1", "library_loans", "bakery_orders", "ghost_gym"]
    pet = scenarios["pet_clinic_1"]
    assert len(pet.tasks) == 7 and pet.db_schema and pet.sample_data and "FastAPI" in (pet.full_code or "")
    assert sorted(pet.code_verifiers) == [0, 1, 2, 3, 5, 6] and sorted(pet.sql_verifiers) == [1, 4]
    assert scenarios["ghost_gym"].full_code is None and scenarios["ghost_gym"].db_schema is None


def test_import_report_says_what_was_kept_provisional_and_dropped_and_why(imported: dict) -> None:
    summary, pet = imported["report"]["summary"], imported["scenarios"]["pet_clinic_1"]
    assert summary["scenarios"] == 4 and summary["imported"] == 2
    assert pet["ok"] and pet["tools"] == 4 and pet["kept"] == ["task-0", "task-1", "task-3", "task-4"]
    assert json.loads((Path(pet["path"]) / "scenario.json").read_text())["served_as"] == "awm"  # as AWM's server
    dropped = {d["task"]: d["reason"] for d in pet["dropped"]}
    # AWM issue #16: the target already holds in the initial database, so a no-op passes AWM's own verifier;
    # dropped with that reason, never "repaired" (task-6's verifier only checks that Luna has some appointment)
    assert "target already holds" in dropped["task-2"] and "target already holds" in dropped["task-6"]
    # no reference: provisional only if AWM's verifier rejects every reference-free wrong policy; task-5's
    # verifier accepts any answer naming Milo and Luna, so a crawler's dump of the pets passes it
    assert "wrong policy crawler passed" in dropped["task-5"] and pet["provisional"] == []
    assert summary["dropped_by_reason"] == {"the target already holds at the start (AWM issue #16)": 2,
                                            "wrong policy crawler passed": 1}
    assert summary["kept"] == 6 and summary["provisional"] == 0
    assert summary["kept_by_reason"] == {"reference (file) passes AWM's verifier and the audit": 6}
    # sample rows that break the schema or a foreign key are left out of the template, and listed
    assert any("2 values for 3 columns" in s for s in pet["skipped_inserts"])
    assert any("FOREIGN KEY" in s and "Ghost" in s for s in pet["skipped_inserts"])
    failed = {s: r["problems"][0] for s, r in imported["scenarios"].items() if not r["ok"]}
    assert "does not start" in failed["bakery_orders"] and "declarative_bass" in failed["bakery_orders"]
    assert "no gen_envs.jsonl record" in failed["ghost_gym"]
    assert not (imported["out"] / "awm-ghost-gym").exists() and not (imported["out"] / "awm-bakery-orders").exists()


def test_tools_keep_awm_names_and_episodes_are_isolated_over_mcp(imported: dict) -> None:
    world = load_world(imported["out"] / "awm-pet-clinic-1")
    server = WorldServer(WorldRuntime(world))

    async def main() -> None:
        async with Client(server.server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"list_pets", "get_appointment", "create_appointment", "cancel_appointment",
                                  "submit_answer", "decline"}
            assert set(tools["create_appointment"].input_schema["properties"]) == {"pet_id", "date"}
            assert tools["list_pets"].annotations.read_only_hint
            assert not tools["cancel_appointment"].annotations.read_only_hint
            ctl = EpisodeControl(client)
            a, b = (await ctl.start("task-1")).episode, (await ctl.start("task-1")).episode
            done = await ctl.call(a, "cancel_appointment", {"appointment_id": 2})
            assert not done.is_error and '"cancelled"' in text(done)
            again = await ctl.call(a, "cancel_appointment", {"appointment_id": 2})
            assert again.is_error and "already cancelled" in text(again)  # the generated server's own 400
            seen = await ctl.call(b, "get_appointment", {"appointment_id": 2})
            assert '"scheduled"' in text(seen), "episode A's write leaked into episode B"
            bad = await ctl.call(b, "get_appointment", {"appointment_id": "two"})
            assert bad.is_error
            token = os.environ["MCPWORLD_REGISTRY_TOKEN"]  # the harness's: verdicts in full, not sealed
            passed = (await ctl.verify(a, token=token)).verdict
            assert passed.passed, passed.checks
            names = [c.name for c in passed.checks]
            assert "AWM code verifier says complete" in names
            sql = next(c for c in passed.checks if c.name.startswith("AWM SQL verifier findings"))
            assert '"final_status": "cancelled"' in sql.detail and "success_criteria" in sql.detail
            noop = (await ctl.verify(b, token=token)).verdict
            assert not noop.passed
            code = next(c for c in noop.checks if c.name == "AWM code verifier says complete")
            assert not code.passed and '"status": "scheduled"' in code.detail

    anyio.run(main)


def test_sql_mode_findings_reach_the_code_augmented_judge(imported: dict) -> None:
    runtime = WorldRuntime(load_world(imported["out"] / "awm-pet-clinic-1"))
    episode = runtime.fork("task-4")
    assert runtime.call(episode, "cancel_appointment", {"appointment_id": 1}).error is None
    verdict = runtime.verify(episode, "Cancelled.")
    episode.close()
    assert verdict.passed and [c.name for c in verdict.checks] == [
        "final state matches the reference", "AWM SQL verifier findings (evidence for the judge)"]
    llm = ReplayLLM({"Automatic checks": [{"role": "assistant", "content": json.dumps(
        {"classification": "complete", "reason": "appointment 1 went from scheduled to cancelled"})}]})
    with serve(llm, free_port()) as base:
        judge = JudgeReward(ChatClient(base_url=base, model="judge"), {"task-4": "Cancel Rex's appointment 1."})
        trajectory = Trajectory(server="awm-pet-clinic-1", task="task-4", policy="test", verdict=verdict,
                                messages=[{"role": "system", "content": ""}, {"role": "user", "content": ""}])
        reward = anyio.run(judge, trajectory)
    assert reward.value == 1.0 and reward.label == "complete"
    prompt = llm.requests[0]["messages"][0]["content"]
    assert '"initial_status": "scheduled"' in prompt and '"final_status": "cancelled"' in prompt
    assert "final_status is 'cancelled'" in prompt  # AWM's success criteria travel with the findings


def test_weak_verifier_is_guarded_by_the_reference_footprint(imported: dict) -> None:
    runtime = WorldRuntime(load_world(imported["out"] / "awm-pet-clinic-1"))
    # task-3's AWM verifier only counts appointments: booking the wrong pet satisfies it, the reference does not
    episode = runtime.fork("task-3")
    runtime.call(episode, "create_appointment", {"pet_id": 1, "date": "2026-06-12"})
    verdict = runtime.verify(episode, None)
    episode.close()
    checks = {c.name: c for c in verdict.checks}
    assert checks["AWM code verifier says complete"].passed
    assert not checks["final state matches the reference"].passed and "pet_id" in checks[
        "final state matches the reference"].detail
    assert not verdict.passed


def test_second_run_resumes_and_only_and_limit_select(imported: dict, tmp_path: Path) -> None:
    out = tmp_path / "again"
    shutil.copytree(imported["out"], out)
    began = time.monotonic()
    code, output = run_cli("import-awm", str(DATA), "--references", str(DATA / "references.jsonl"), "-o", str(out))
    assert code == 0 and "(4 resumed)" in output, output
    assert time.monotonic() - began < 20
    code, output = run_cli("import-awm", str(DATA), "--only", "Ghost Gym", "-o", str(tmp_path / "one"), "--json")
    report = json.loads(output[output.index("{"):])
    assert code == 1 and [s["scenario"] for s in report["scenarios"]] == ["ghost_gym"]
    code, output = run_cli("import-awm", str(DATA), "--limit", "0", "-o", str(tmp_path / "none"), "--json")
    assert code == 0 and json.loads(output[output.index("{"):])["scenarios"] == []


def test_bad_input_is_refused_with_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "gen_tasks.jsonl").write_text("{}\n")
    code, output = run_cli("import-awm", str(tmp_path))
    assert code != 0 and "no gen_scenario.jsonl" in output and "gen_envs.jsonl" in output
    code, output = run_cli("import-awm", str(DATA), "--only", "nowhere_1")
    assert code != 0 and "no scenario named nowhere_1" in output and "pet_clinic_1" in output
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "gen_scenario.jsonl").write_text('{"name": "A"}\nnot json\n')
    code, output = run_cli("import-awm", str(broken), "-o", str(tmp_path / "out"))
    assert code != 0 and "gen_scenario.jsonl:2: not JSON" in output


def test_a_model_proposes_references_and_each_is_checked(tmp_path: Path) -> None:
    calls = {"Check out Dune": {"calls": [{"name": "search_books", "arguments": {"q": "Dune"}},
                                          {"name": "checkout_book", "arguments": {"book_id": 1, "member": "Ana"}}]},
             "Loan 1 has come back": {"calls": [{"name": "return_loan", "arguments": {"loan_id": 3}}]}}
    llm = ReplayLLM({key: [{"role": "assistant", "content": json.dumps(plan)}] for key, plan in calls.items()})
    with serve(llm, free_port()) as base:
        code, output = run_cli("import-awm", str(DATA), "--only", "library_loans", "--model", "m", "--base-url", base,
                               "-o", str(tmp_path), "--json")
    report = json.loads(output[output.index("{"):])["scenarios"][0]
    assert code == 0 and report["kept"] == ["task-0"], report
    # the model's plan for task-1 returns a loan that does not exist: the reference fails, so the task is dropped
    assert [d["task"] for d in report["dropped"]] == ["task-1"] and "Loan not found" in report["dropped"][0]["reason"]
    assert len(llm.requests) == 2 and "checkout_book" in llm.requests[0]["messages"][0]["content"]


def test_installed_scenario_is_served_over_stdio(isolated_home: Path) -> None:
    code, output = run_cli("import-awm", str(DATA), "--references", str(DATA / "references.jsonl"), "--only",
                           "library_loans", "--install", "--no-audit", "--registry", "http://127.0.0.1:9")
    assert code == 0 and "ok   awm-library-loans" in output and "not reachable" in output, output
    assert (isolated_home / "worlds" / "awm-library-loans" / "report.json").is_file()
    assert (isolated_home / "awm-import.json").is_file()
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcpworld", "serve", "world",
                                                                 "awm-library-loans", "--stdio"],
                                   env={**os.environ, "MCPWORLD_HOME": str(isolated_home)})

    async def main() -> None:
        async with Client(params) as client:
            assert {t.name for t in (await client.list_tools()).tools} == {"search_books", "checkout_book",
                                                                           "return_loan", "submit_answer", "decline"}
            found = await client.call_tool("search_books", {"q": "dune"})
            assert not found.is_error and "Frank Herbert" in text(found)
            lent = await client.call_tool("checkout_book", {"book_id": 2, "member": "Ana"})
            assert lent.is_error and "No copy of this book is available" in text(lent)

    anyio.run(main)


def test_dataset_sql_has_a_deadline_and_deep_json_a_clear_error(tmp_path: Path) -> None:
    """Issue 30: a recursive query in a sample row never ended; a deeply nested line aborted with RecursionError."""
    import sqlite3

    from mcpworld.synth.importers.awm_format import AwmFormatError, guarded, jsonl_records

    conn = sqlite3.connect(":memory:")
    forever = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
    with pytest.raises(sqlite3.OperationalError, match="interrupted"), guarded(conn, limit_s=0.5):
        conn.execute(forever).fetchall()
    assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection is usable again, the handler gone
    deep = tmp_path / "gen_scenario.jsonl"
    deep.write_text('{"name": "ok", "description": "x"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(AwmFormatError, match=r"gen_scenario.jsonl:2: JSON nested too deeply"):
        list(jsonl_records(deep))


def test_bad_lines_are_reported_and_skipped_not_fatal(tmp_path: Path) -> None:
    """Issue 30: one bad line (not JSON, nested too deeply, a verifier without its task index) aborted the whole
    import; now it is said and skipped, a scenario whose own record is malformed fails alone, and the others are
    still tried."""
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    with (data / "gen_tasks.jsonl").open("a") as f:
        f.write("not json\n")
    with (data / "gen_sample.jsonl").open("a") as f:
        f.write("[" * 100_000 + "]" * 100_000 + "\n")
    with (data / "gen_verifier.jsonl").open("a") as f:
        f.write(json.dumps({"scenario": "Library Loans", "verification": {"code": "x = 1  # no task index"}}) + "\n")
    code, output = run_cli("import-awm", str(data), "--only", "Library Loans", "--only", "Ghost Gym",
                           "-o", str(tmp_path / "out"), "--json")
    assert "warning: skipped" in output and "gen_tasks.jsonl:" in output and "nested too deeply" in output
    report = json.loads(output[output.index("{"):])
    problems = {s["scenario"]: s["problems"][0] for s in report["scenarios"]}
    assert "malformed record" in problems["library_loans"] and "no integer 'task_idx'" in problems["library_loans"]
    assert "no gen_envs.jsonl record" in problems["ghost_gym"] and code == 1


# -- what the agent sees and what calls do, as AWM's own server (FastAPI + FastApiMCP + the MCP SDK) -----------

@pytest.fixture(scope="module")
def faithful(awm_faithful: Path) -> WorldRuntime:
    """Pet Clinic 1 with two more endpoints (tests/synth/conftest.py)."""
    return WorldRuntime(load_world(awm_faithful))


def count(episode: object, table: str) -> int:
    return episode.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[attr-defined]


def test_input_schemas_are_fastapi_mcps(faithful: WorldRuntime) -> None:
    """A required field is plain T (no anyOf with null, no null default), and nothing forbids extra properties."""
    create = faithful.tools["create_appointment"].input_schema
    assert create["required"] == ["pet_id", "date"] and "additionalProperties" not in create
    assert create["properties"]["pet_id"]["type"] == "integer" and "anyOf" not in create["properties"]["pet_id"]
    assert "default" not in create["properties"]["pet_id"]
    owner = faithful.tools["list_pets"].input_schema["properties"]["owner_id"]
    assert owner["type"] == "integer" and owner["description"] == "Only pets of this owner"


def test_strings_are_not_coerced_and_nothing_is_written(faithful: WorldRuntime) -> None:
    episode = faithful.fork("task-3")
    before = count(episode, "appointments"), count(episode, "owners")
    made = faithful.call(episode, "create_appointment", {"pet_id": "2", "date": "2026-06-12"})
    assert made.error and "Input validation error" in made.error and "'2' is not of type 'integer'" in made.error
    sent = faithful.call(episode, "send_reminder", {"note": "hi", "urgent": "true"})
    assert sent.error and "'true' is not of type 'boolean'" in sent.error
    assert (count(episode, "appointments"), count(episode, "owners")) == before
    episode.close()


def test_null_for_an_optional_field_is_refused_and_unknown_arguments_ignored(faithful: WorldRuntime) -> None:
    episode = faithful.fork("task-1")
    listed = faithful.call(episode, "list_pets", {"owner_id": None})
    assert listed.error and "None is not of type 'integer'" in listed.error
    done = faithful.call(episode, "cancel_appointment", {"appointment_id": 2, "reason": "moved away"})
    assert done.error is None and done.value["status"] == "cancelled"
    episode.close()


def test_a_body_without_arguments_is_not_sent_so_fastapi_answers_422(faithful: WorldRuntime) -> None:
    """FastApiMCP sends the leftover arguments as the body only when there are some: `{}` reaches FastAPI without
    a body, which a required body model (even one whose fields are all optional) refuses with 422."""
    episode = faithful.fork("task-3")
    owners = count(episode, "owners")
    empty = faithful.call(episode, "send_reminder", {})
    assert empty.error and "Status code: 422" in empty.error and count(episode, "owners") == owners
    sent = faithful.call(episode, "send_reminder", {"urgent": True})
    assert sent.error is None and count(episode, "owners") == owners + 1
    episode.close()


def test_a_constraint_violation_says_internal_server_error_as_awm_does(faithful: WorldRuntime) -> None:
    episode = faithful.fork("task-3")
    pets = count(episode, "pets")
    bad = faithful.call(episode, "add_pet", {"owner_id": 1, "name": "Nemo", "species": "fish"})
    assert bad.error == "Error calling add_pet. Status code: 500. Response: Internal Server Error"
    assert count(episode, "pets") == pets
    episode.close()


def test_sqlite_now_is_the_worlds_clock_in_verifiers(imported: dict) -> None:
    """AWM's verifier ran with Python's clock frozen while SQLite's `'now'` stayed real: a verifier asking SQLite
    for the date got today's. Now both are the world's clock (issue 33); `CURRENT_TIMESTAMP` stays SQLite's."""
    from mcpworld.synth.importers.awm import verifier_checks
    from mcpworld.worlds.loader import load_world
    from mcpworld.worlds.runtime import WorldRuntime

    path = Path(imported["scenarios"]["pet_clinic_1"]["path"])
    clock = json.loads((path / "scenario.json").read_text())["clock"]
    data = WorldRuntime(load_world(path)).template(None).data
    code = ("def verify_task_completion(initial_db_path, final_db_path, final_answer):\n"
            "    import sqlite3\n"
            "    db = sqlite3.connect(final_db_path)\n"
            "    now = db.execute(\"SELECT datetime('now'), date('now', '-1 day'), datetime()\").fetchone()\n"
            "    return {'result': 'complete', 'now': list(now)}\n")
    [check] = verifier_checks(path, {"code": {"code": code}}, data, data, None, clock, ("code",))
    from datetime import datetime, timedelta

    stamp = clock.replace("T", " ")[:19]
    yesterday = (datetime.fromisoformat(clock) - timedelta(days=1)).date().isoformat()
    assert json.loads(check.detail)["now"] == [stamp, yesterday, stamp]


def test_calls_during_an_import_are_served_as_awm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The import's worker warms (to describe the routes) before `served_as` is written: each call carries it, so
    the references, the already-holds check and the audit play against AWM's answers, as the served world does."""
    from mcpworld.synth.importers import awm

    seen: list[str | None] = []
    already_holds = awm._already_holds

    def spy(dest: Path, candidates: list, report: awm.ScenarioReport) -> list:
        runtime = WorldRuntime(awm.load_package(dest))  # the import's own worker, still warm
        episode = runtime.fork(None)
        seen.append(runtime.call(episode, "get_appointment", {"appointment_id": 999999}).error)
        episode.close()
        return already_holds(dest, candidates, report)

    monkeypatch.setattr(awm, "_already_holds", spy)
    code, output = run_cli("import-awm", str(DATA), "--only", "Pet Clinic 1", "--references",
                           str(DATA / "references.jsonl"), "--no-audit", "-o", str(tmp_path))
    assert code == 0, output
    assert seen == ['Error calling get_appointment. Status code: 404. Response: {"detail":"Appointment not found"}']
