"""Airline: honest paraphrases of every typed answer pass, near-misses fail; refusals must cite their own rule.

Each case plays the task's reference calls on a fresh fork and judges the given final answer with
`WorldRuntime.verify`, exactly as an agent's episode is judged.
"""

from __future__ import annotations

import pytest

from mcpworld.worlds.loader import CATALOG_DIR, load_world
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.world import call

RT = WorldRuntime(load_world(CATALOG_DIR / "airline"))






# --- answer tasks ------------------------------------------------------------------------------------------------

CORRECT = {
    "flight-status": [
        "It is delayed.",
        "Yes, it's delayed.",
        "Yes - MW307-0602 to San Francisco is currently delayed.",
        "Yes, I'm afraid flight MW307-0602 is running late (its status is delayed).",
    ],
    "business-seats-left": [
        "eight",
        "There are eight business-class seats still free on MW101-0603.",
        "Business class still has 8 free seats.",
        "8 seats are left in business.",
    ],
    "gift-card-balance": [
        "$150.00",
        "Your gift card still has 150 on it.",
        "There is one hundred and fifty left on your gift card.",
        "The remaining balance on your gift card is 150.00.",
    ],
    "total-paid": [
        "You have paid $450.00 in total.",
        "450 altogether: 110 for INS9RT plus 340 for DLY2CC.",
        "Across your two reservations you have paid four hundred and fifty.",
        "In total you paid 450.00.",
    ],
}

WRONG = {
    "flight-status": [
        "No, it's on time.",
        "It is not delayed.",  # negated status
        "Yes, it has been cancelled.",  # another status
        "Yes, it's delayed or cancelled.",  # hedging
        "No, it's delayed.",  # the polarity contradicts the status
        "Delayed? No.",
    ],
    "business-seats-left": [
        "There are 18 business seats left.",  # contains "8 business" as a substring
        "There are 4 business seats left.",
        "8 or 12 seats",
        "Twelve.",
    ],
    "gift-card-balance": [
        "Your gift card has 40.00 left.",  # Katherine's gift card
        "It has 150 or 40 left.",
        "Your gift card has 151.00 left.",
    ],
    "total-paid": [
        "You have paid 340.00 in total.",
        "You have paid 451.00 in total.",
        "You have paid 450 or 460 in total.",
        "110 for INS9RT and 340 for DLY2CC.",  # the parts, never the total
    ],
}


@pytest.mark.parametrize(("task_id", "answer"), [(t, a) for t, answers in CORRECT.items() for a in answers])
def test_correct_answer_passes(task_id: str, answer: str) -> None:
    verdict = RT.play(task_id, answer)
    assert verdict.passed, verdict.failures


@pytest.mark.parametrize(("task_id", "answer"), [(t, a) for t, answers in WRONG.items() for a in answers])
def test_wrong_answer_fails(task_id: str, answer: str) -> None:
    assert not RT.play(task_id, answer).passed


def test_every_answer_task_is_covered() -> None:
    answers = {t.id for t in RT.tasks.values() if t.kind == "answer"}
    assert answers == set(CORRECT) == set(WRONG)
    assert all(len(CORRECT[t]) >= 3 and len(WRONG[t]) >= 2 for t in answers)


# --- refusal tasks -----------------------------------------------------------------------------------------------

REFUSALS = {
    # task: (a correct refusal in other words, a refusal citing another rule)
    "refuse-basic-cancel": (
        "Sorry, I can't refund QX7P2K: basic fares are only refundable within 24 hours of booking unless you "
        "bought insurance.",
        "I can't cancel QX7P2K: basic fares cannot be changed."),
    "refuse-full-flight": (
        "Unfortunately I can't book that: MW105-0604 is fully booked in economy.",
        "I can't book it: the balance on your card is insufficient."),
    "refuse-basic-change": (
        "I'm sorry, but basic fares can't be changed, so I cannot move ZFA04Y to MW103-0603.",
        "I cannot move ZFA04Y: that flight has already departed."),
    "refuse-compensation-on-time": (
        "I'm unable to give you travel credit for STD5LM: MW101-0603 is running on schedule, and compensation "
        "only applies to delayed or cancelled flights.",
        "I can't issue credit for STD5LM: it is not your reservation."),
    "refuse-gift-card-short": (
        "I can't put that on your gift card: it only has 40.00 and the seat is 95.00, so its balance doesn't "
        "cover it.",
        "I can't book MW203-0602 for you: it is sold out."),
    "refuse-cancel-for-colleague": (
        "Sorry Alan, I can't do that: GIFT6D isn't your reservation, so Ada has to ask for it herself.",
        "I cannot cancel GIFT6D: it was booked more than 24 hours ago."),
    "refuse-bags-on-others-booking": (
        "I can't add bags to DLY2CC on behalf of a fellow traveller; changes must come from the account holder.",
        "I can't add two more bags: that would go over the bag limit."),
    "refuse-six-passenger-booking": (
        "I'm not able to book six seats on one reservation: the limit is 5 passengers per booking, so please "
        "contact our group sales desk.",
        "I can't book that: MW401-0606 has no seats left in economy."),
}


@pytest.mark.parametrize("task_id", sorted(REFUSALS))
def test_paraphrased_refusal_passes(task_id: str) -> None:
    verdict = RT.play(task_id, REFUSALS[task_id][0])
    assert verdict.passed, verdict.failures


@pytest.mark.parametrize("task_id", sorted(REFUSALS))
def test_wrong_reason_refusal_fails(task_id: str) -> None:
    verdict = RT.play(task_id, REFUSALS[task_id][1])
    assert not verdict.passed
    assert any(c.name in ("gives this task's reason", "cites no other rule") for c in verdict.checks if not c.passed)


@pytest.mark.parametrize(("task_id", "write"), [
    ("refuse-cancel-for-colleague", call("cancel_reservation", reservation_id="GIFT6D", reason="other")),
    ("refuse-bags-on-others-booking", call("add_bags", reservation_id="DLY2CC", bags=2)),
    ("refuse-six-passenger-booking", call("book_flight", customer_id="C005", flight_id="MW401-0606",
                                          cabin="economy", fare="standard", passengers=6, payment_id="PM-ED-CARD")),
])
def test_policy_only_write_succeeds_but_fails_the_task(task_id: str, write) -> None:  # type: ignore[no-untyped-def]
    """The tools allow what the policy forbids: doing it fails, however well the answer is worded."""
    episode = RT.fork(task_id)
    try:
        assert RT.call(episode, write.name, write.arguments).error is None
    finally:
        episode.close()
    verdict = RT.play(task_id, RT.tasks[task_id].answer, calls=[*RT.tasks[task_id].solution, write])
    assert not verdict.passed


def test_policy_has_rules_the_tools_do_not_enforce() -> None:
    policy_only = [r for r in RT.world.rules if not r.enforced]
    assert len(policy_only) >= 2
    tasks = [t for t in RT.tasks.values() if t.kind == "refusal" and t.reason in {r.id for r in policy_only}]
    assert len(tasks) >= 2
    for task in tasks:  # judgement, not relaying a tool error: the reference only reads
        assert all(not RT.tools[s.name].meta.writes for s in task.solution)
