"""The AWM pipeline against a real local replay model: a whole world, one self-correction, one dropped task."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest
from click.testing import CliRunner

from mcpworld.core.llm import ChatClient
from mcpworld.core.llm_replay import ReplayLLM, serve
from mcpworld.core.testing import free_port
from mcpworld.synth.cli import synth_group
from mcpworld.synth.importers.install import register_record
from mcpworld.synth.synthesis.pipeline import Pipeline, existing_world_ok, read_scenarios, slug
from mcpworld.worlds.audit import audit
from mcpworld.worlds.loader import discover
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.validate import validate

FIXTURE = Path(__file__).parents[1] / "data" / "synth" / "library_world.json"


def fixture() -> tuple[str, dict]:
    data = json.loads(FIXTURE.read_text())
    return data["scenario"], data["scripts"]


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A real registry app on a free port, with a known token."""
    import uvicorn

    from mcpworld.registry.api import create_app
    from mcpworld.registry.store import RegistryStore

    monkeypatch.setenv("MCPWORLD_REGISTRY_TOKEN", "synth-token")
    store = RegistryStore(f"sqlite:///{tmp_path / 'registry.db'}")
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(store, "synth-token"), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def test_whole_world_from_a_scenario_with_self_correction(isolated_home: Path, registry: str) -> None:
    scenario, scripts = fixture()
    llm = ReplayLLM(scripts)
    with serve(llm, free_port()) as base_url:
        pipeline = Pipeline(ChatClient(base_url=base_url, model="replay"), max_retries=1)
        result = anyio.run(lambda: pipeline.synthesize(scenario, "library", registry=registry))
    assert result.ok, result.problems
    attempts = {s.stage: s.attempts for s in result.stages}
    assert attempts == {"tasks": 1, "schema": 1, "seed": 2, "tools": 1, "verifiers": 2}
    seed = next(s for s in result.stages if s.stage == "seed")
    assert "FOREIGN KEY constraint failed" in seed.errors[0]
    # the error really went back to the model, in the same conversation as its broken output
    retry = [r for r in llm.requests if "[synth:seed]" in r["messages"][1]["content"]][1]
    assert retry["messages"][2]["role"] == "assistant" and 'book_id="B9"' in retry["messages"][2]["content"]
    assert "FOREIGN KEY constraint failed" in retry["messages"][3]["content"]
    assert result.dropped == ["dune-on-shelf"] and "a no-op episode passes" in result.drop_reasons["dune-on-shelf"]
    first_try = next(s for s in result.stages if s.stage == "verifiers").errors[0]
    assert "a no-op episode passes" in first_try
    # the wrong typed answer of the first try went back to the model, which fixed it
    assert "task count-loans: verify: the reference solution fails" in first_try
    assert "'You have 2 books on loan.' does not state the expected 3" in first_try

    path = isolated_home / "worlds" / "library"
    assert Path(result.path) == path and {p.name for p in path.iterdir()} >= {
        "__init__.py", "models.py", "data.py", "tools.py", "tasks.py", "tasks.json", "world.json"}
    # nothing the model wrote is pasted into code mcpworld writes: __init__.py and tasks.py are constant
    assert "Lending Library" not in (path / "__init__.py").read_text() + (path / "tasks.py").read_text()
    spec = json.loads((path / "tasks.json").read_text())
    assert {r["id"]: r["enforced"] for r in spec["rules"]} == {
        "loan-limit": True, "on-loan": True, "borrower-returns": False, "member-privacy": False}
    count = next(t for t in spec["tasks"] if t["id"] == "count-loans")
    assert count["check"] == {"type": "answer", "parts": [{"type": "count", "value": 2, "allow": [], "label": "",
                                                              "scales": False}]}
    assert "library" in {r.name for r in discover()}
    assert result.tools == 5 and result.tasks == 5
    assert result.registry.startswith("registered io.mcpworld/library")
    doc = httpx.get(f"{registry}/v0/servers/io.mcpworld%2Flibrary/versions/latest").json()["server"]
    assert doc["_meta"]["io.mcpworld/server"]["kind"] == "world"

    # Served from this interpreter, the world is a proxy: validate passes with generated code run in workers.
    world, problems = validate(path)
    assert not problems and [t.id for t in world.tasks] == [
        "lend-dune", "return-emma", "count-loans", "refuse-limit", "refuse-return-for-grace"]
    assert [r.id for r in world.rules] == ["loan-limit", "on-loan", "borrower-returns", "member-privacy"]
    assert "Only the member who borrowed a book may return it." in world.policy
    tasks = {t.id: t for t in world.tasks}
    assert tasks["refuse-limit"].reason == "loan-limit" and tasks["count-loans"].expect[0].value == 2
    assert all(t.verify is None for t in world.tasks)  # judged by the runtime: no generated verifier runs
    # the audit in this interpreter agrees with the one the pipeline ran in its worker
    report = audit(WorldRuntime(world))
    assert report.ok, [(f.task, f.policy, f.detail) for f in report.failures]
    generated = [m for m in sys.modules.values() if str(getattr(m, "__file__", "") or "").startswith(str(path))
                 and not str(m.__file__).endswith("__init__.py")]
    assert generated == []
    runtime = WorldRuntime(world)
    episode = runtime.fork()
    assert runtime.call(episode, "lend_book", {"member_id": "M3", "book_id": "B1"}).error == \
        "Alan Turing is at the loan limit of 1 book(s)"
    assert runtime.call(episode, "lend_book", {"member_id": "M1", "book_id": "B1"}).error is None
    assert runtime.call(episode, "lend_book", {"member_id": 7}).error.startswith("invalid arguments for lend_book")
    diff = runtime.diff(episode)
    assert diff.tables["book"].updated[0]["changed"] == {"available": [1, 0]} and len(diff.tables["loan"].inserted) == 1
    assert existing_world_ok("library")


def test_a_stage_that_never_works_fails_cleanly(isolated_home: Path) -> None:
    scenario, scripts = fixture()
    broken = "```python\nfrom sqlmodel import Field\nclass Nothing:\n    pass\n```"
    scripts = {k: v for k, v in scripts.items() if "[synth:tasks]" in k}
    scripts[f"[synth:schema] {scenario}"] = [{"content": broken}, {"content": broken}]
    with serve(ReplayLLM(scripts), free_port()) as base_url:
        pipeline = Pipeline(ChatClient(base_url=base_url, model="replay"), max_retries=1)
        result = anyio.run(lambda: pipeline.synthesize(scenario, "broken-world", registry="http://127.0.0.1:9"))
    assert not result.ok and result.stages[-1].stage == "schema" and result.stages[-1].attempts == 2
    assert "Base = world_base()" in result.problems[0]
    assert not (isolated_home / "worlds" / "broken-world").exists()


def test_unreachable_registry_is_reported_not_fatal() -> None:
    note = register_record("x", "X", "An x.", "1.0.0", [], 1, 1, "synth", f"http://127.0.0.1:{free_port()}")
    assert not note.registered and "not reachable" in note.message and "mcpworld up" in note.message


def test_batch_cli_resumes_and_reads_both_formats(tmp_path: Path, isolated_home: Path) -> None:
    scenario, scripts = fixture()
    lines = tmp_path / "scenarios.jsonl"
    lines.write_text(json.dumps({"scenario": scenario, "name": "library"}) + "\n# a comment\nA cat cafe\n")
    assert read_scenarios(lines) == [(scenario, "library"), ("A cat cafe", None)]
    assert slug("A cat cafe") == "cat-cafe"
    only = tmp_path / "one.jsonl"
    only.write_text(json.dumps({"scenario": scenario, "name": "library"}) + "\n")
    with serve(ReplayLLM(scripts), free_port()) as base_url:
        args = ["world", "--scenarios", str(only), "--model", "replay", "--base-url", base_url, "--max-retries", "1",
                "--registry", "http://127.0.0.1:9", "--json"]
        first = CliRunner().invoke(synth_group, args)
        assert first.exit_code == 0, first.output
        assert json.loads(first.output.strip().splitlines()[-1])["ok"] is True
        again = CliRunner().invoke(synth_group, args)
    assert again.exit_code == 0 and json.loads(again.output.strip().splitlines()[-1])["skipped"] is True
