"""The calendar world's typed answers and refusals: correct paraphrases pass, near-misses and wrong reasons fail.

Each case plays the task's reference calls on a fresh fork, then judges the given final answer.
"""

from __future__ import annotations

import pytest

from mcpworld.core.models import ToolCall
from mcpworld.worlds.loader import CATALOG_DIR, load_world
from mcpworld.worlds.runtime import WorldRuntime

RT = WorldRuntime(load_world(CATALOG_DIR / "calendar"))






CORRECT = {
    "who-is-out-wednesday": [
        "Two people are out that day: Lucas Moreau and Grace Liu.",
        "Grace Liu and Lucas Moreau - 2 in total.",
        "On Wednesday 15 April, Lucas (on vacation) and Grace (at a sales conference) are out of office, so two "
        "people.",
        "2: P04 Lucas Moreau and P05 Grace Liu.",
    ],
    "big-projector-rooms": [
        "Two rooms: Cedar and Echo.",
        "There are 2: Echo, which seats 20, and Cedar, which seats 12.",
        "Cedar (floor 3) and Echo (floor 4) \u2013 two rooms.",
        "RM-CEDAR and RM-ECHO, so two in all.",
    ],
    "hannah-thursday": [
        "She has two meetings: the 1:1 with Emma (10:00\u201310:30, Dune) and the Roadmap sync (15:00\u201316:00, "
        "Boreal).",
        "Two: Roadmap sync in Boreal from 3 to 4 pm, and 1:1 Emma / Hannah in Dune from 10 to 10:30 am.",
        "Hannah has 2 meetings on Thursday: EV-104 '1:1 Emma / Hannah', 10:00-10:30 in Dune; EV-105 'Roadmap "
        "sync', 15:00-16:00 in Boreal.",
    ],
    "earliest-common-slot": [
        "11:00 to 11:30.",
        "The earliest slot is at 11 am.",
        "All three are free from 11:00, so 11:00-11:30 on Tuesday works.",
        "The first 30-minute window is 11am-11:30am on Tuesday 14 April.",
    ],
}

WRONG = {
    "who-is-out-wednesday": [
        "Three people: Lucas Moreau, Grace Liu and Emma Johansson.",  # a wrong person and count
        "Two people: Lucas Moreau and Emma Johansson.",  # the right count, one wrong person
        "Only one person: Lucas Moreau.",
        "Two: Lucas Moreau and Grace Liu, and Emma is out too.",  # the answer plus a wrong candidate
        "Lucas Moreau and Grace Liu.",  # the count was asked for
    ],
    "big-projector-rooms": [
        "Three: Boreal, Cedar and Echo.",
        "Two: Cedar and Boreal.",
        "Only Echo, so one room.",
    ],
    "hannah-thursday": [
        "Three: the 1:1 (10:00-10:30, Dune), Lunch & learn (12:00-13:00, Echo) and Roadmap sync (15:00-16:00, "
        "Boreal).",
        "Two: the 1:1 from 10:00 to 10:30 in Dune and the Roadmap sync from 15:00 to 16:00 in Cedar.",  # room
        "Two: the 1:1 from 10:00 to 11:00 in Dune and the Roadmap sync from 15:00 to 16:00 in Boreal.",  # time
    ],
    "earliest-common-slot": [
        "14:00-14:30.",  # the next window
        "11:00 or 14:00.",  # hedging
        "13:00.",
        "The earliest is 11:30.",
    ],
}

# (task, a correct refusal in other words, a refusal that gives another rule's reason)
REFUSALS = [
    ("refuse-room-double-booked",
     "Sorry, I can't book Boreal for 10:30-11:30 on Tuesday: it's already booked for Omar's Sprint planning from "
     "10:00 to 11:00.",
     "I can't book that: it's outside your working hours."),
    ("refuse-invite-out-of-office",
     "I'm unable to invite Lucas: he is on vacation on Tuesday and Wednesday.",
     "I can't add Lucas: only the organizer can invite people."),
    ("refuse-outside-working-hours",
     "I can't set that up: 15:30-16:30 falls after your working hours end at 15:00.",
     "I can't schedule it: the room is already booked."),
    ("refuse-non-organizer-cancel",
     "I can't cancel it for you, Hannah - the Sprint planning is organized by Omar Haddad, and only he can cancel "
     "it.",
     "I can't cancel it: it is in the past."),
    ("refuse-interview-details",
     "Sorry, I can't tell you who's on the interview loop or where it is: interview loops are confidential to the "
     "people invited.",
     "I can't: Ravi is out of office then."),
    ("refuse-accept-for-colleague",
     "I can't accept on Ravi's behalf - he has to answer his own invitation.",
     "I can't do that: only the organizer can change the event."),
]


def test_every_answer_task_is_covered() -> None:
    answer_tasks = {t.id for t in RT.tasks.values() if t.kind == "answer"}
    assert answer_tasks == set(CORRECT) == set(WRONG)
    assert all(len(CORRECT[t]) >= 3 and len(WRONG[t]) >= 2 for t in answer_tasks)
    assert len(REFUSALS) >= 3 and all(RT.tasks[t].kind == "refusal" for t, _, _ in REFUSALS)


@pytest.mark.parametrize(("task_id", "answer"), [(t, a) for t, answers in CORRECT.items() for a in answers])
def test_correct_paraphrase_passes(task_id: str, answer: str) -> None:
    verdict = RT.play(task_id, answer)
    assert verdict.passed, verdict.failures


@pytest.mark.parametrize(("task_id", "answer"), [(t, a) for t, answers in WRONG.items() for a in answers])
def test_wrong_answer_fails(task_id: str, answer: str) -> None:
    assert not RT.play(task_id, answer).passed


@pytest.mark.parametrize(("task_id", "correct", "wrong_reason"), REFUSALS)
def test_refusal_paraphrase_passes_and_wrong_reason_fails(task_id: str, correct: str, wrong_reason: str) -> None:
    verdict = RT.play(task_id, correct)
    assert verdict.passed, verdict.failures
    verdict = RT.play(task_id, wrong_reason)
    assert not verdict.passed
    assert any(c.name == "cites no other rule" and not c.passed for c in verdict.checks)


@pytest.mark.parametrize(("task_id", "write"), [
    ("refuse-accept-for-colleague",
     ToolCall(name="respond_to_invite", arguments={"person_id": "P08", "event_id": "EV-101", "response": "accepted"})),
    ("refuse-interview-details", None),
])
def test_policy_only_rules(task_id: str, write: ToolCall | None) -> None:
    """The tools would allow these requests: complying (or answering the question) fails, the refusal passes."""
    task = RT.tasks[task_id]
    assert task.kind == "refusal" and not RT.world.rule(task.reason).enforced
    assert not any(RT.tools[c.name].meta.writes for c in task.solution), "the reference only reads"
    if write is not None:
        episode = RT.fork(task_id)
        assert RT.call(episode, write.name, write.arguments).error is None, "the tool allows it"
        episode.close()
        assert not RT.play(task_id, "Done: I accepted Ravi's invitation.", [*task.solution, write]).passed
    else:
        assert not RT.play(task_id, "Ravi Patel and Omar Haddad, in Cedar from 10:00 to 11:00.").passed
    assert RT.play(task_id, task.answer).passed
