"""A seed varies the data (issue 27, item 7): ids, people's names and dates are renamed per seed, and an answer
task's amounts scaled, so an answer or a call sequence memorised on one seed fails on another; seed 0 is the world
as written.

Before this, every seed started from the same rows: the seed-0 calls and submission of every catalog task passed
on any seed (130 of 130 tasks memorisable); with renaming alone, 18 of 26 answer tasks still were (counts, amounts,
"WEB-4", room and milestone names, a tracking number); now 2 are (a flight's status, a meeting time).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mcpworld.core.models import ToolCall
from mcpworld.worlds.loader import load_world, resolve
from mcpworld.worlds.runtime import WorldRuntime

CATALOG = ["airline", "bank", "calendar", "helpdesk", "shop", "tracker"]


def runtime(name: str) -> WorldRuntime:
    return WorldRuntime(load_world(resolve(name)))


@pytest.fixture(scope="module")
def runtimes() -> dict[str, WorldRuntime]:
    return {name: runtime(name) for name in CATALOG}


@pytest.mark.parametrize("seed", [1, 2])
def test_every_catalog_task_holds_on_other_seeds(runtimes: dict[str, WorldRuntime], seed: int) -> None:
    """The seed's reference passes and a no-op fails, for every catalog task: the view keeps each task's meaning."""
    broken = []
    for name, rt in runtimes.items():
        for task in rt.tasks.values():
            answer = rt.task_info(task, reveal=True, seed=seed).answer
            if not rt.judge.play(task.id, answer, rt.solution(task, seed), seed=seed).passed:
                broken.append((name, task.id, "reference fails"))
            if rt.judge.play(task.id, None, [], seed=seed).passed:
                broken.append((name, task.id, "no-op passes"))
    assert not broken


def test_seed_zero_is_the_world_as_written(runtimes: dict[str, WorldRuntime]) -> None:
    rt = runtimes["airline"]
    task = rt.tasks["cancel-within-24h"]
    assert rt.view(task, 0).identity and rt.solution(task, 0) == rt.solution(task)
    assert rt.instruction(task, 0) == task.instruction and rt.fork(task.id, 0).template is rt.template(task)
    seen = rt.instruction(task, 5)
    assert "ZFA04Y" not in seen and "Alan Turing" not in seen and "hour ago" in seen


def test_the_agent_sees_renamed_rows_and_moved_dates(runtimes: dict[str, WorldRuntime]) -> None:
    rt = runtimes["airline"]
    task = rt.tasks["cancel-within-24h"]
    view = rt.view(task, 5)
    episode = rt.fork(task.id, 5)
    try:
        gone = rt.call(episode, "get_reservation", {"reservation_id": "ZFA04Y"})
        assert gone.error == "reservation 'ZFA04Y' not found"
        row = rt.call(episode, "get_reservation", {"reservation_id": view.text("ZFA04Y")}).value
        assert row["customer_id"] == view.text("C003") != "C003" and row["flight_id"] == view.text("MW101-0603")
        assert row["booked_at"][:4] == str(2026 + view.years) and view.years % 28 == 0 and view.years
        customer = rt.call(episode, "get_customer", {"customer_id": row["customer_id"]}).value
        assert customer["name"] == view.text("Alan Turing") and customer["email"] == view.text("alan@example.com")
        assert customer["email"].endswith("@example.com") and "alan" not in customer["email"]
    finally:
        episode.close()


def test_memorised_calls_fail_on_another_seed(runtimes: dict[str, WorldRuntime]) -> None:
    """Seed 0's reference, replayed word for word on seed 3, fails every state task whose calls name an id or a
    person (the seed-0 id names nothing there, or its twin)."""
    named, memorised = 0, []
    for name, rt in runtimes.items():
        for task in rt.tasks.values():
            if task.kind != "state" or rt.solution(task, 3) == rt.solution(task):
                continue
            named += 1
            if rt.judge.play(task.id, task.answer, rt.solution(task), seed=3).passed:
                memorised.append((name, task.id))
    assert named >= 50 and not memorised


def test_memorised_entity_and_date_answers_fail_on_another_seed(runtimes: dict[str, WorldRuntime]) -> None:
    """An answer naming an id, a person or a date is renamed with the data: the seed-0 value fails on seed 4, the
    seed's own passes."""
    checked = []
    for name, rt in runtimes.items():
        for task in rt.tasks.values():
            if not task.expect:
                continue
            own, memorised = rt.solution(task, 4)[-1], rt.solution(task)[-1]
            if own == memorised:
                continue  # row counts, statuses, product names: the same on every seed (see docs/worlds.md)
            calls = rt.solution(task, 4)[:-1]
            assert rt.judge.play(task.id, None, [*calls, own], seed=4).passed, (name, task.id)
            assert not rt.judge.play(task.id, None, [*calls, memorised], seed=4).passed, (name, task.id)
            checked.append(task.id)
    assert "late-delivery-deadline" in checked or len(checked) >= 8, checked


def scaled_tasks(rt: WorldRuntime) -> list:
    return [t for t in rt.tasks.values() if rt.scaled_amounts(t)]


def test_memorised_amounts_and_counts_fail_on_another_seed(runtimes: dict[str, WorldRuntime]) -> None:
    """A sum of amounts or a count of free seats moves with a seed's factor: seed 0's 450 fails on seed 3, where
    the reference's own submission (450 times the factor) passes."""
    checked = []
    for name, rt in runtimes.items():
        for task in scaled_tasks(rt):
            for seed in (3, 5):
                calls, own, memorised = rt.solution(task, seed)[:-1], rt.solution(task, seed)[-1], rt.solution(task)[-1]
                assert own != memorised and rt.view(task, seed).scale > 1, (name, task.id)
                assert rt.judge.play(task.id, None, [*calls, own], seed=seed).passed, (name, task.id, seed)
                assert not rt.judge.play(task.id, None, [*calls, memorised], seed=seed).passed, (name, task.id, seed)
            checked.append(task.id)
    assert {"total-paid", "business-seats-left", "total-balance", "order-total-and-discount"} <= set(checked)


def _numbers_scale(seed0: object, viewed: object, view, path: str = "") -> list[str]:
    """Where a viewed tool result differs from seed 0's by more than the view (names, dates, the amounts' factor)."""
    if isinstance(seed0, bool) or seed0 is None or isinstance(seed0, str):
        back = view.value(viewed, back=True)
        return [] if back == seed0 else [f"{path}: {seed0!r} became {viewed!r}"]
    if isinstance(seed0, (int, float)):
        ok = isinstance(viewed, (int, float)) and (viewed == seed0 or abs(viewed - seed0 * view.scale) < 1e-6)
        return [] if ok else [f"{path}: {seed0!r} became {viewed!r}, neither kept nor times {view.scale}"]
    if isinstance(seed0, dict) and isinstance(viewed, dict) and len(seed0) == len(viewed):
        return [e for (k, v), w in zip(seed0.items(), viewed.values())
                for e in _numbers_scale(v, w, view, f"{path}.{k}")]
    if isinstance(seed0, list) and isinstance(viewed, list) and len(seed0) == len(viewed):
        return [e for i, (v, w) in enumerate(zip(seed0, viewed)) for e in _numbers_scale(v, w, view, f"{path}[{i}]")]
    return [f"{path}: shape changed"]


def test_what_a_scaled_task_reads_moves_by_one_factor(runtimes: dict[str, WorldRuntime]) -> None:
    """`scales=True` claims the answer is built from amounts alone. The witness: every number the reference's
    calls read on seed 7 is seed 0's, or seed 0's times the factor; a read that mixes a rule's constant into an
    amount (a fee, a fixed limit) would be neither, and its answer would not move by the factor."""
    problems = []
    for name, rt in runtimes.items():
        for task in scaled_tasks(rt):
            view = rt.view(task, 7)
            results = []
            for seed, calls in ((0, task.solution), (7, rt.solution(task, 7)[:-1])):
                episode = rt.fork(task.id, seed)
                try:
                    results.append([json.loads(json.dumps(rt.call(episode, c.name, c.arguments).value, default=str))
                                    for c in calls])
                finally:
                    episode.close()
            problems += [f"{name}/{task.id}{e}" for e in _numbers_scale(results[0], results[1], view)]
    assert not problems


def test_a_scaled_answer_is_accepted_in_every_form_and_only_at_the_factor(runtimes: dict[str, WorldRuntime]) -> None:
    """On seed 3 the count of free business seats is 8 times the factor: as an int, a float or a string it passes;
    one more, or seed 0's 8, fails; a count that is not a multiple of the factor never maps back to a whole one."""
    rt = runtimes["airline"]
    task = rt.tasks["business-seats-left"]
    k = rt.view(task, 3).scale
    calls = rt.solution(task, 3)[:-1]

    def passes(value: object) -> bool:
        return rt.judge.play(task.id, None, [*calls, ToolCall(name="submit_answer", arguments={"answer": value})],
                             seed=3).passed

    assert all(passes(v) for v in (8 * k, float(8 * k), str(8 * k)))
    assert not any(passes(v) for v in (8 * k + 1, 8 * k - 1, 8))


def test_short_numbered_keys_and_codes_are_renamed(runtimes: dict[str, WorldRuntime]) -> None:
    """"WEB-4" (a key whose number is too short to rename alone) and a shipment's tracking number (a code, not a
    key) are renamed on other seeds, so answers naming them are not memorisable either."""
    tracker, shop = runtimes["tracker"], runtimes["shop"]
    view = tracker.view(tracker.tasks["why-web4-blocked"], 2)
    assert view.text("WEB-4") not in ("WEB-4", "WEB-3") and view.text(view.text("WEB-4"), back=True) == "WEB-4"
    assert view.text("WEB-41") in ("WEB-41", view.text("WEB-41"))  # whole tokens only: never a prefix of another
    assert "WEB-4" not in tracker.instruction(tracker.tasks["why-web4-blocked"], 2)
    track = shop.view(shop.tasks["track-shipped-order"], 2)
    assert track.text("784512390017") != "784512390017"


def test_a_seed_zero_id_written_on_another_seed_names_its_twin(runtimes: dict[str, WorldRuntime]) -> None:
    """The renaming is its own inverse: seed 0's "C001" written on seed 6 maps back to a key seed 0 lacks."""
    rt = runtimes["airline"]
    view = rt.view(rt.tasks["gift-card-balance"], 6)
    twin = view.text("C001")
    assert twin != "C001" and view.text(twin, back=True) == "C001" and view.text("C001", back=True) == twin
    assert view.text("2026-06-03", back=True) != "2026-06-03"


def test_views_are_the_same_in_every_process(runtimes: dict[str, WorldRuntime]) -> None:
    code = ("from mcpworld.worlds.loader import load_world, resolve; from mcpworld.worlds.runtime import WorldRuntime;"
            "import json; rt = WorldRuntime(load_world(resolve('helpdesk')));"
            "print(json.dumps([rt.instruction(t, 11) for t in rt.tasks.values()]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "77", "PATH": "/usr/bin:/bin"})
    rt = runtimes["helpdesk"]
    assert json.loads(out.stdout) == [rt.instruction(t, 11) for t in rt.tasks.values()]


def test_a_world_that_does_not_opt_in_keeps_its_data_on_every_seed() -> None:
    """A tool holding ids in its code would break under a renaming, so only worlds that declare `vary` vary."""
    from mcpworld.worlds.world import World

    assert World.__dataclass_fields__["vary"].default is False
    rt = runtimes_of_test_reference()
    assert rt.view(next(iter(rt.tasks.values())), 9).identity


def runtimes_of_test_reference() -> WorldRuntime:
    from tests.worlds.test_reference import RT

    return RT


def test_submission_read_on_its_seed_is_judged_in_seed_zero_terms(runtimes: dict[str, WorldRuntime]) -> None:
    rt = runtimes["helpdesk"]
    task = next(t for t in rt.tasks.values() if t.expect and any("E03" in json.dumps(p.model_dump(), default=str)
                                                                   for p in t.expect))
    view = rt.view(task, 8)
    calls = rt.solution(task, 8)
    submitted = calls[-1].arguments["answer"]
    assert "E03" not in json.dumps(submitted) and "Priya" not in json.dumps(submitted)
    assert rt.judge.play(task.id, None, [*calls[:-1], ToolCall(name="submit_answer", arguments={"answer": submitted})],
                   seed=8).passed
    assert view.text("Priya Nair") != "Priya Nair"


def test_the_audit_reports_what_memorising_seed_zero_earns(runtimes: dict[str, WorldRuntime]) -> None:
    """`mcpworld world audit` prints a "memorised" chance level per kind: seed 0's reference replayed on seed 1."""
    from mcpworld.worlds.audit import audit

    chance = {(c.kind, c.policy): c.level for c in audit(runtimes["airline"]).chance}
    assert chance[("state", "memorised")] == 0.0  # every state task names an id or a person
    assert chance[("refusal", "memorised")] == 1.0  # the rule a refusal cites is the same on every seed
    assert chance[("answer", "memorised")] == 0.25  # amounts and seat counts move; "delayed" stays (1 of 4)


def test_validate_refuses_a_varying_world_whose_tool_holds_an_id() -> None:
    """A world that opts in to `vary` is checked on another seed: the prize tool of tests/worlds/test_reference.py draws
    from ["A1", "A2"] in its code, which a renaming breaks; `validate` says so and what to do."""
    import dataclasses

    from mcpworld.worlds.validate import task_problems

    rt = WorldRuntime(dataclasses.replace(runtimes_of_test_reference().world, vary=True))
    problems = task_problems(rt, rt.tasks["draw"], "world.py")
    assert [p.field for p in problems] == ["task draw: vary"], problems
    assert "hold an id or a date in its code" in str(problems[0]) and "vary=False" in str(problems[0])
    assert task_problems(WorldRuntime(runtimes_of_test_reference().world), rt.tasks["draw"], "world.py") == []
