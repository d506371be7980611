"""AWM scenarios imported without any reference (what a user who downloads AgentWorldModel-1K has): tasks are kept
in a provisional tier when AWM's verifier rejects every reference-free wrong policy, listed apart, played only when
asked, and promoted to referenced, audited tasks once two agreeing passing trajectories exist."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from mcpworld.agent import runner
from mcpworld.agent.trajectory import CallRecord, Step, Trajectory, TrajectoryWriter
from mcpworld.core.models import TaskInfo
from mcpworld.core.protocol import EpisodeControl
from mcpworld.synth.cli import synth_group
from mcpworld.synth.importers.awm import load_package
from mcpworld.synth.tasks.taskspec import load_tasks
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.server import WorldServer
from mcpworld.worlds.validate import validate

DATA = Path(__file__).parents[1] / "data" / "awm"
BOOK_REX = [("list_pets", {"owner_id": 1}), ("create_appointment", {"pet_id": 1, "date": "2026-06-10"})]


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(synth_group, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def imported(awm_runtime: object, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("awm-noref")
    code, output = run_cli("import-awm", str(DATA), "-o", str(out), "--parallel", "2", "--json")
    assert code == 0, output
    report = json.loads(output[output.index("{"):])
    return {"out": out, "report": report, "scenarios": {s["scenario"]: s for s in report["scenarios"]}}


def test_without_references_tasks_are_provisional_and_counted_per_reason(imported: dict) -> None:
    summary, pet = imported["report"]["summary"], imported["scenarios"]["pet_clinic_1"]
    assert summary["imported"] == 2, "a user with AWM's data and no model gets worlds"
    assert pet["kept"] == [] and pet["provisional"] == ["task-0"]
    assert imported["scenarios"]["library_loans"]["provisional"] == ["task-0"]
    dropped = {d["task"]: d for d in pet["dropped"]}
    # cancel appointment 2 / count appointments: a policy that writes everything passes those verifiers
    assert dropped["task-1"]["policy"] == "db-spam" and dropped["task-3"]["policy"] == "db-spam"
    assert dropped["task-5"]["policy"] == "crawler"
    assert "target already holds" in dropped["task-2"]["reason"] and "target already holds" in dropped["task-6"][
        "reason"]
    assert "only a SQL verifier" in json.dumps(summary["dropped_by_reason"])  # task-4: nothing would decide
    assert summary["kept"] == 0 and summary["provisional"] == 2 and summary["dropped"] == 7
    assert sum(summary["provisional_by_reason"].values()) == 2
    assert summary["dropped_by_reason"]["wrong policy db-spam passed"] == 3
    assert summary["dropped_by_reason"]["the target already holds at the start (AWM issue #16)"] == 2
    # the package validates as it is: the provisional task's no-op fails its verifier
    world, problems = validate(imported["out"] / "awm-pet-clinic-1")
    assert world is not None and not problems, problems


def test_provisional_tasks_are_listed_apart_and_judged_by_awms_verifier(imported: dict) -> None:
    runtime = WorldRuntime(load_package(imported["out"] / "awm-pet-clinic-1"))
    assert runtime.tasks["task-0"].provisional and runtime.task_info(runtime.tasks["task-0"]).provisional

    async def main() -> None:
        async with Client(WorldServer(runtime).server) as client:
            ctl = EpisodeControl(client)
            listing = (await ctl.tasks()).tasks
            assert [(t.id, t.provisional) for t in listing] == [("task-0", True)]
            good = (await ctl.start("task-0")).episode
            for name, args in BOOK_REX:
                assert not (await ctl.call(good, name, args)).is_error
            verdict = (await ctl.verify(good)).verdict
            assert verdict.passed
            wrong = (await ctl.start("task-0")).episode
            await ctl.call(wrong, "create_appointment", {"pet_id": 2, "date": "2026-06-10"})
            assert not (await ctl.verify(wrong)).verdict.passed

    anyio.run(main)


def test_run_and_train_list_provisional_tasks_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    class Fake:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        async def __aenter__(self) -> Fake:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        async def tasks(self, split: str | None = None) -> list[TaskInfo]:
            return [TaskInfo(id="a", instruction="x"), TaskInfo(id="b", instruction="y", provisional=True)]

    monkeypatch.setattr(runner, "EpisodeClient", Fake)
    assert [t.id for t in anyio.run(runner.list_tasks, "w")] == ["a"]
    assert [t.id for t in anyio.run(runner.list_tasks, "w", None, None, True)] == ["a", "b"]


def _trajectories(runtime: WorldRuntime, plays: list[list[tuple[str, dict]]]) -> list[Trajectory]:
    out = []
    for sample, calls in enumerate(plays):
        episode = runtime.fork("task-0")
        records = []
        for name, args in calls:
            result = runtime.call(episode, name, args)
            records.append(CallRecord(name=name, arguments=args, is_error=result.error is not None))
        verdict = runtime.verify(episode, "Booked.")
        episode.close()
        out.append(Trajectory(server="io.mcpworld/awm-pet-clinic-1", task="task-0", sample=sample, policy="test",
                              episode=f"e-{sample}", steps=[Step(turn=0, policy_ms=1.0, calls=records)],
                              verdict=verdict))
    return out


def test_promote_turns_agreeing_trajectories_into_an_audited_reference(imported: dict, tmp_path: Path) -> None:
    worlds = tmp_path / "worlds"
    shutil.copytree(imported["out"], worlds)
    pet = worlds / "awm-pet-clinic-1"
    runtime = WorldRuntime(load_package(pet))
    one = _trajectories(runtime, [BOOK_REX])
    TrajectoryWriter(tmp_path / "one.jsonl").append(one[0])
    code, output = run_cli("promote", str(tmp_path / "one.jsonl"), "--worlds", str(worlds))
    assert code == 0 and "promoted 0" in output and "1 passing trajectories" in output, output
    # two passing episodes that reach the same end state (one also read first) and a failing one
    plays = [BOOK_REX, BOOK_REX[1:], [("create_appointment", {"pet_id": 2, "date": "2026-06-10"})]]
    writer = TrajectoryWriter(tmp_path / "runs" / "many.jsonl")
    for t in _trajectories(runtime, plays):
        writer.append(t)
    code, output = run_cli("promote", str(tmp_path / "runs"), "--worlds", str(worlds), "--json")
    assert code == 0, output
    result = json.loads(output[output.index("["):])[0]
    assert result["promoted"] == ["task-0"], result
    task = next(t for t in load_tasks(pet / "tasks.json") if t.id == "task-0")
    assert not task.meta.get("provisional") and [c.name for c in task.solution] == ["list_pets", "create_appointment"]
    assert "2 trajectories agree" in task.meta["reference"]
    report = json.loads((pet / "report.json").read_text())
    assert report["kept"] == ["task-0"] and report["provisional"] == [] and report["promoted"] == ["task-0"]
    promoted = WorldRuntime(load_package(pet))
    assert not promoted.tasks["task-0"].provisional
    # now judged against its reference's end state too: the wrong pet fails on that check as well
    verdict = promoted.judge.play("task-0", None, [])
    assert not verdict.passed and "final state matches the reference" in [c.name for c in verdict.checks]
