"""Typed submissions: every accepted form of a right answer passes, every other value of the type fails, and a
value of the wrong type is refused (it does not count) instead of judged.

Each catalog case plays the task's reference calls on a fresh fork, then `submit_answer`, and judges the episode
with `WorldRuntime.verify`, exactly as an agent's episode is judged.
"""

from __future__ import annotations

import datetime

import pytest

from mcpworld.core.models import ToolCall
from mcpworld.worlds.answers import (
    Count,
    DateAnswer,
    Entities,
    Number,
    SubmissionError,
    TimeAnswer,
    YesNo,
    accepted_forms,
    answer_schema,
    describe_answer,
    judge_answer,
    part_keys,
    read_submission,
    reference_submission,
)
from mcpworld.worlds.loader import CATALOG_DIR, load_world
from mcpworld.worlds.runtime import WorldRuntime

WORLDS = ("airline", "shop", "bank", "helpdesk", "calendar", "tracker")
RUNTIMES = {name: WorldRuntime(load_world(CATALOG_DIR / name)) for name in WORLDS}
ANSWER_TASKS = [(w, t) for w in WORLDS for t, task in RUNTIMES[w].tasks.items() if task.expect]


def judged(parts: list, answer: object) -> bool:
    return all(c.passed for c in judge_answer(parts, read_submission(parts, answer)))


def play(world: str, task_id: str, answer: object, calls: list[ToolCall] | None = None) -> bool:
    rt = RUNTIMES[world]
    task = rt.tasks[task_id]
    submit = ToolCall(name="submit_answer", arguments={"answer": answer})
    return rt.judge.play(task_id, None, [*(task.solution if calls is None else calls), submit]).passed


# --- per answer type --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", [8, 8.0, "8", " 8 ", {"count": 8}])
def test_a_count_is_accepted_in_every_form(form: object) -> None:
    assert judged([Count(8)], form)


@pytest.mark.parametrize("wrong", [7, 9, 0, "9"])
def test_a_count_off_by_anything_fails(wrong: object) -> None:
    assert not judged([Count(8)], wrong)


@pytest.mark.parametrize("bad", [True, "eight", "8 or 12", "a dozen", 8.5, "8 (or 0x9)", None, [8], {"n": 8}])
def test_a_count_of_another_type_is_refused_not_judged(bad: object) -> None:
    with pytest.raises(SubmissionError):
        read_submission([Count(8)], bad)


@pytest.mark.parametrize("form", [18200, 18200.0, "18200", "18,200.00", "$18,200", 18200.004])
def test_a_number_within_tolerance_passes(form: object) -> None:
    assert judged([Number(18200.0)], form)


@pytest.mark.parametrize("wrong", [18201, 18199.99, 1820, 0, "18,200.01"])
def test_a_number_outside_tolerance_fails(wrong: object) -> None:
    assert not judged([Number(18200.0)], wrong)


@pytest.mark.parametrize("bad", ["$18.2k", "18200 or 1.5k", "eighteen thousand", float("nan"), False])
def test_a_number_in_prose_or_hedged_is_refused(bad: object) -> None:
    with pytest.raises(SubmissionError):
        read_submission([Number(18200.0)], bad)


def test_a_date_is_iso_and_exact() -> None:
    part = DateAnswer(datetime.date(2026, 4, 4))
    assert judged([part], "2026-04-04")
    assert not judged([part], "2026-04-05")
    for bad in ("04.04.2026", "April 4", "2026-04-04 or 2026-03-05", "2026-02-30"):
        with pytest.raises(SubmissionError):
            read_submission([part], bad)


def test_a_time_and_a_range() -> None:
    assert judged([TimeAnswer("11:00")], "11:00") and judged([TimeAnswer("11:00")], "11:00:00")
    assert not judged([TimeAnswer("11:00")], "11:30")
    with pytest.raises(SubmissionError):
        read_submission([TimeAnswer("11:00")], "11 am")
    part = TimeAnswer("10:00", "10:30")
    for form in ({"start": "10:00", "end": "10:30"}, "10:00-10:30", ["10:00", "10:30"]):
        assert judged([part], form)
    assert not judged([part], {"start": "10:00", "end": "11:00"})


def test_yes_no_is_a_boolean() -> None:
    assert judged([YesNo(True)], True) and judged([YesNo(True)], "yes") and judged([YesNo(True)], "TRUE")
    assert not judged([YesNo(True)], False) and not judged([YesNo(True)], "no")
    with pytest.raises(SubmissionError):
        read_submission([YesNo(True)], "Yes, delayed flights get rebooked, but MW307-0602 itself is on time")


def test_entities_are_a_set_matched_by_id_or_exact_name() -> None:
    part = Entities(expected=[["Priya Nair", "E03"], ["Lucas", "E05"]])
    for form in (["Priya Nair", "Lucas"], ["E05", "E03"], ["priya  nair", "e05"], ["E03", "Priya Nair", "E05"]):
        assert judged([part], form), form
    assert judged([part], '["E03", "E05"]')
    assert not judged([part], ["E03"])  # one missing
    assert not judged([part], ["E03", "E05", "E07"])  # one too many: listing every candidate fails
    assert not judged([part], ["Priya", "E05"])  # not an alias the task knows
    assert not judged([part], ["Priy\u0430 Nair", "E05"])  # a Cyrillic "а"
    assert not judged([part], ["E03 (or E07)", "E05"])


def test_several_parts_take_an_object_with_one_key_each() -> None:
    parts = [YesNo(True), Entities(expected=[["delayed"]], label="status")]
    assert part_keys(parts) == ["yes", "status"]
    schema = answer_schema(parts)
    assert schema["required"] == ["yes", "status"] and schema["properties"]["yes"]["type"] == "boolean"
    assert judged(parts, {"yes": True, "status": "delayed"})
    assert judged(parts, '{"yes": true, "status": ["delayed"]}')  # as JSON text, from a string-typed tool schema
    assert not judged(parts, {"yes": True, "status": "on time"})
    with pytest.raises(SubmissionError, match="missing status"):
        read_submission(parts, {"yes": True})
    with pytest.raises(SubmissionError, match="unknown note"):
        read_submission(parts, {"yes": True, "status": "delayed", "note": "8"})
    assert "submit_answer" in describe_answer(parts) and "delayed" not in describe_answer(parts)


# --- the catalog -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("world", "task_id"), ANSWER_TASKS)
def test_every_accepted_form_of_every_catalog_answer_passes(world: str, task_id: str) -> None:
    task = RUNTIMES[world].tasks[task_id]
    for form in accepted_forms(list(task.expect)):
        assert play(world, task_id, form), form


@pytest.mark.parametrize(("world", "task_id"), ANSWER_TASKS)
def test_a_right_answer_with_no_calls_passes_and_its_side_remark_forms_are_refused(world: str, task_id: str) -> None:
    """A typed answer is judged on its value, not on whether the agent looked (the reference's diff is empty);
    the prose forms the old checker let through are not values of the type at all."""
    rt = RUNTIMES[world]
    task = rt.tasks[task_id]
    right = reference_submission(list(task.expect))
    episode = rt.fork(task_id)
    try:
        hedge = rt.call(episode, "submit_answer", {"answer": f"A dozen ({right} were sold this week)"})
        if hedge.error is None:  # a name-typed answer takes the text as a name: recorded, and wrong
            assert not rt.verify(episode, None).passed
            return
        assert episode.submission is None  # refused, nothing recorded: the agent may submit again
        assert rt.call(episode, "submit_answer", {"answer": right}).error is None
        assert rt.verify(episode, "A dozen, really.").passed  # prose is evidence only, never judged
    finally:
        episode.close()


def test_only_the_first_submission_counts() -> None:
    rt = RUNTIMES["airline"]
    episode = rt.fork("business-seats-left")
    try:
        assert rt.call(episode, "submit_answer", {"answer": 9}).error is None
        second = rt.call(episode, "submit_answer", {"answer": 8})
        assert second.error is not None and "only the first counts" in second.error
        assert not rt.verify(episode, None).passed
    finally:
        episode.close()


def test_a_question_has_no_decline_and_a_state_task_no_answer() -> None:
    rt = RUNTIMES["airline"]
    assert play("airline", "business-seats-left", 8, calls=[])  # the value alone is enough: no reads required
    episode = rt.fork("add-free-bags")
    try:
        refused = rt.call(episode, "submit_answer", {"answer": 3})
        assert refused.error is not None and "asks no question" in refused.error
    finally:
        episode.close()
    declined = rt.judge.play("business-seats-left", None, [ToolCall(name="decline", arguments={
        "rule": rt.world.rules[0].id, "message": "I cannot."})])
    assert not declined.passed and declined.checks[1].name == "answer submitted"
