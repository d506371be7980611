"""Helpdesk answers and refusals as a real agent words them: paraphrases pass, near misses and wrong reasons fail."""

from __future__ import annotations

import pytest

from mcpworld.worlds.loader import CATALOG_DIR, load_world
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.world import call

RT = WorldRuntime(load_world(CATALOG_DIR / "helpdesk"))


def play(task_id: str, answer: str | None, calls: list | None = None) -> bool:
    """The task's reference calls (or `calls`), then `answer`: does the episode pass?"""
    return RT.play(task_id, answer, calls).passed


CORRECT = {
    "sla-breached-tickets": [
        "T-1001 and T-1009 are past their SLA.",
        "Two have breached it: the payroll export failure (T-1009) and Sofia's laptop that won't boot (T-1001).",
        "Laptop won't boot (T-1001) and Payroll export fails at month-end (T-1009).",
    ],
    "busiest-agent": [
        "Priya Nair, with three open tickets.",
        "That's Priya (E03): 3 tickets not closed, T-1001, T-1004 and T-1009.",
        "The busiest agent is Priya Nair, who has 3 tickets that are still not closed.",
    ],
    "daniel-equipment": [
        "He has a MacBook Pro 14 laptop (LT-102) and a Dell U2723QE monitor (MN-201), and two license seats.",
        "LT-102 and MN-201; he holds 2 seats: Figma and JetBrains.",
        "Daniel's hardware is the MacBook Pro (LT-102) and the monitor MN-201. He has two software seats.",
    ],
    "figma-seat-holders": [
        "Daniel Kim, Aisha Bello and Noah Weber hold the three seats, so none are free.",
        "All 3 seats are taken (Daniel, Aisha and Noah, who has left), so there are 0 free seats.",
        "No seats are free: they belong to Aisha Bello, Daniel Kim and Noah Weber.",
    ],
}

WRONG = {
    "sla-breached-tickets": [
        "T-1001, T-1007 and T-1009.",
        "Only T-1001.",
        "T-1001, T-1002, T-1003, T-1004, T-1007, T-1008 and T-1009.",
    ],
    "busiest-agent": [
        "Priya Nair, with 4 tickets.",
        "Tom Becker, with 3 tickets.",
        "Priya Nair and Tom Becker, 3 each.",
    ],
    "daniel-equipment": [
        "LT-102 and MN-202, and 2 seats.",
        "LT-102 and MN-201, and 3 license seats.",
        "Just LT-102; 2 seats.",
    ],
    "figma-seat-holders": [
        "Daniel Kim and Aisha Bello hold seats; one seat is free.",
        "Daniel Kim, Aisha Bello, Noah Weber and Chloe Martin; no free seats.",
        "Daniel Kim, Aisha Bello and Noah Weber; 1 seat is free.",
    ],
}

# refusal task -> (a correct refusal in other words, a refusal that gives another rule's reason)
REFUSALS = {
    "refuse-assign-to-staff": (
        "I can't assign T-1003 to Sofia: she isn't an IT agent, and tickets only go to agents.",
        "I can't do that: Sofia has left the company."),
    "refuse-p1-without-approval": (
        "I'm unable to make T-1009 P1: that needs a manager's approval, since Priya Nair isn't on call.",
        "I can't: the ticket has already breached its SLA."),
    "refuse-reopen-old-ticket": (
        "Sorry, T-1006 can't be reopened: it was closed more than two weeks ago. I can open a new ticket for you.",
        "I can't: only the requester can ask for that."),
    "refuse-tableau-full": (
        "I can't: both Tableau Creator seats are taken, by James Okafor and Sofia Rossi. No free seat is left.",
        "I can't: Chloe has left the company."),
    "refuse-admin-wrong-approver": (
        "I can't approve AR-01 on your say-so: admin access has to be approved by Daniel's own manager, Aisha "
        "Bello.",
        "I cannot: nobody can decide their own access request."),
    "refuse-share-internal-note": (
        "Sorry, I can't share internal notes: they're for IT staff only. T-1004 is on hold and Priya Nair has it.",
        "I can't tell you: only IT agents can write internal notes."),
    "refuse-downgrade-breached": (
        "I won't be able to lower its priority: T-1009 has breached its SLA, and a breached ticket keeps its "
        "priority.",
        "I can't: a P1 needs a manager's approval."),
    "refuse-reopen-for-colleague": (
        "I can't reopen Sofia's ticket for you: the requester has to ask, so Sofia (or her manager) should get in "
        "touch.",
        "I can't reopen it: it was closed more than 14 days ago."),
}


def test_every_answer_task_is_covered() -> None:
    answers = {t.id for t in RT.tasks.values() if t.kind == "answer"}
    assert answers == set(CORRECT) == set(WRONG)
    assert all(len(CORRECT[t]) >= 3 and len(WRONG[t]) >= 2 for t in answers)
    assert len(REFUSALS) >= 3 and set(REFUSALS) <= {t.id for t in RT.tasks.values() if t.kind == "refusal"}


@pytest.mark.parametrize(("task_id", "answer"), [(t, a) for t, answers in CORRECT.items() for a in answers])
def test_paraphrase_passes(task_id: str, answer: str) -> None:
    assert play(task_id, answer)


@pytest.mark.parametrize(("task_id", "answer"), [(t, a) for t, answers in WRONG.items() for a in answers])
def test_wrong_answer_fails(task_id: str, answer: str) -> None:
    assert not play(task_id, answer)


@pytest.mark.parametrize("task_id", sorted(REFUSALS))
def test_refusal_in_other_words_passes(task_id: str) -> None:
    assert play(task_id, REFUSALS[task_id][0])


@pytest.mark.parametrize("task_id", sorted(REFUSALS))
def test_refusal_with_wrong_reason_fails(task_id: str) -> None:
    assert not play(task_id, REFUSALS[task_id][1])


def test_refusal_that_quotes_the_note_fails() -> None:
    assert not play("refuse-share-internal-note", "I can't share it, it's confidential, but they're waiting for the "
                                                  "vendor technician.")


@pytest.mark.parametrize(("task_id", "step"), [
    ("refuse-downgrade-breached", call("set_priority", ticket_id="T-1009", priority="P3")),
    ("refuse-reopen-for-colleague", call("reopen_ticket", ticket_id="T-1005", reason="Crash is back")),
])
def test_policy_only_action_succeeds_but_fails_the_task(task_id: str, step) -> None:
    episode = RT.fork(task_id)
    try:
        assert RT.call(episode, step.name, step.arguments).error is None  # the tools allow it
    finally:
        episode.close()
    assert not play(task_id, "Done.", [step])


def _ticket_calls(title: str, description: str) -> list:
    return [call("create_ticket", requester_id="E07", title=title, category="hardware", priority="P3",
                 asset_id="LT-102", description=description)]


def test_new_ticket_wording_is_free_but_must_say_what_it_is_about() -> None:
    assert play("docking-station-ticket", None, _ticket_calls("Dock not charging", "Daniel's dock stopped charging."))
    assert not play("docking-station-ticket", None, _ticket_calls("Laptop issue", "Please help."))


def test_resolution_must_say_what_was_done() -> None:
    steps = [call("return_asset", asset_id="LT-101", condition="damaged"),
             call("assign_asset", asset_id="LT-104", employee_id="E06")]
    done = call("close_ticket", ticket_id="T-1001", resolution="Swapped Sofia's dead laptop for LT-104.")
    vague = call("close_ticket", ticket_id="T-1001", resolution="Issue fixed, closing.")
    assert play("replace-broken-laptop", None, [*steps, done])
    assert not play("replace-broken-laptop", None, [*steps, vague])


def test_crm_comment_must_say_access_was_granted() -> None:
    task = RT.tasks["resolve-crm-access"]
    calls = [c if c.name != "add_comment" else call("add_comment", ticket_id="T-1003", author_id="E03",
                                                    body="Looking into it.") for c in task.solution]
    assert not play("resolve-crm-access", None, calls)
