"""Shop: honest paraphrases of every typed answer pass, near-misses fail; refusals must cite their own rule.

Each case plays the task's reference calls on a fresh fork and judges the given final answer with
`WorldRuntime.verify`, exactly as an agent's episode is judged.
"""

from __future__ import annotations

import pytest

from mcpworld.worlds.loader import CATALOG_DIR, load_world
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.world import call

RT = WorldRuntime(load_world(CATALOG_DIR / "shop"))






# --- answer tasks ------------------------------------------------------------------------------------------------

CORRECT = {
    "track-shipped-order": [
        "It's with FedEx, tracking number 784512390017.",
        "Your order is in transit. Carrier: FedEx. Tracking number: 784512390017.",
        "FedEx is carrying it (tracking no. 784512390017).",
        "O1003 shipped on March 12 with FedEx; you can follow it with tracking number 784512390017.",
    ],
    "cheapest-electronics": [
        "The USB-C Charger 65W, at $34.99.",
        "It's the USB-C charger (P108), which costs 34.99.",
        "Our cheapest in-stock electronics item is the 65 W USB-C Charger for $34.99.",
    ],
    "return-deadline": [
        "You can return it until April 4, 2026.",
        "The return window for the speaker closes on 4 April.",
        "Until 2026-04-04 (it was delivered on March 5).",
        "You have until April 4th to send the Pulse Bluetooth Speaker back.",
    ],
    "order-total-and-discount": [
        "You paid $63.70 and the code saved you $11.24.",
        "The discount was 11.24, so the total came to 63.70.",
        "O1002 cost 63.70 after a 15% discount of 11.24 on the 74.94 subtotal.",
    ],
    "code-savings-on-cart": [
        "It would save you $8.90.",
        "SPRING10 gives 10% off the 89.00 in your cart: 8.90 off.",
        "You'd save 8.9 with that code.",
    ],
}

WRONG = {
    "track-shipped-order": [
        "It's with UPS, tracking number 784512390017.",  # another carrier
        "FedEx, tracking number 784512388842.",  # Hana's FedEx parcel
        "It is in transit with FedEx.",  # no tracking number
        "FedEx or UPS, tracking 784512390017.",
    ],
    "cheapest-electronics": [
        "The Pulse Bluetooth Speaker at 59.50.",  # in stock, but not the cheapest
        "The USB-C Charger 65W at 35.99.",
        "The USB-C Charger 65W at 34.99, or the Pulse Bluetooth Speaker at 59.50.",
    ],
    "return-deadline": [
        "You can return it until April 5, 2026.",
        "You can return it until March 5.",  # the delivery date, not the deadline
        "Until April 4 or April 5.",
    ],
    "order-total-and-discount": [
        "You paid 74.94 and the code saved you 11.24.",  # the subtotal as the total
        "You paid 63.70 and the code saved you 11.42.",
        "You paid 63.70.",  # the saving is missing
    ],
    "code-savings-on-cart": [
        "It would save you 89.00.",
        "It would save you 8.09.",
        "It would save you 8.90 or 13.35.",
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
    "refuse-cancel-shipped": (
        "Sorry, O1003 can't be cancelled any more: it's already shipped with FedEx and is on its way to you.",
        "I can't cancel O1003: its return window has closed."),
    "refuse-return-final-sale": (
        "Unfortunately the Clearance Denim Jacket was sold as final sale, so I'm unable to take it back.",
        "I can't return the jacket: it was delivered more than 30 days ago."),
    "refuse-return-after-window": (
        "I'm sorry, but I can't accept a return for O1004: it was delivered more than thirty days ago, outside "
        "the return window.",
        "I can't return the rain jacket: it was a final-sale item."),
    "refuse-expired-code": (
        "I can't apply WINTER25, it expired at the end of February.",
        "I can't apply WINTER25: you have already used it."),
    "refuse-code-reuse": (
        "I couldn't apply WELCOME15: it's limited to one use per customer and you already used it on O1002, so "
        "your cart stays as it was.",
        "I can't apply WELCOME15: that code has expired."),
    "refuse-over-stock": (
        "I can't add three: we only have 2 Pulse Bluetooth Speakers in stock.",
        "I can't add three: that is over the per-order limit."),
    "refuse-cancel-for-neighbour": (
        "I'm sorry, Lucia, but I can't cancel O1007: it isn't your order, so Ravi has to ask us himself.",
        "I can't cancel O1007: it has already shipped."),
    "refuse-readdress-others-order": (
        "I can't re-address O1002 for you: changes to an order have to come from its account holder, Maya.",
        "I can't re-address O1002: we only ship within the United States."),
    "refuse-ship-abroad": (
        "Sorry, I can't send O1007 to London: we only ship to addresses in the United States.",
        "I can't change the address: O1007 is already in transit."),
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
    ("refuse-cancel-for-neighbour", call("cancel_order", order_id="O1007", reason="ordered_by_mistake")),
    ("refuse-readdress-others-order", call("update_shipping_address", order_id="O1002",
                                           address="77 Lake Shore Dr, Chicago, IL 60611")),
    ("refuse-ship-abroad", call("update_shipping_address", order_id="O1007",
                                address="221B Baker Street, London NW1 6XE, United Kingdom")),
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
