"""Bank answers and refusals as a real agent words them: paraphrases pass, near misses and wrong reasons fail."""

from __future__ import annotations

import pytest

from mcpworld.worlds.loader import CATALOG_DIR, load_world
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.world import call

RT = WorldRuntime(load_world(CATALOG_DIR / "bank"))


def play(task_id: str, answer: str | None, calls: list | None = None) -> bool:
    """The task's reference calls (or `calls`), then `answer`: does the episode pass?"""
    return RT.play(task_id, answer, calls).passed


CORRECT = {
    "total-balance": [
        "You have $18,200 in total across your two accounts.",
        "Eighteen thousand two hundred dollars altogether: 15,000 in savings plus 3,200 in checking.",
        "Across checking and savings your combined balance comes to 18200.00.",
    ],
    "streamly-charges-may": [
        "Streamly has charged you $31.98 so far in May.",
        "In May 2026 Streamly took 31.98 from your checking account: two charges of 15.99, both on May 10th.",
        "A total of 31.98 (2 x 15.99). The two charges a minute apart look like a duplicate.",
    ],
    "payee-limit-left": [
        "You can still send $1,000 to your payees today.",
        "One thousand dollars more today.",
        "Of your 5,000.00 daily limit you've already used 4,000.00, which leaves 1,000.00 for today.",
    ],
    "available-with-overdraft": [
        "You can spend up to $810 right now.",
        "Eight hundred and ten dollars, counting your 200 overdraft.",
        "Your 610.00 balance plus the 200.00 overdraft gives you 810.00 available.",
    ],
    "dispute-status": [
        "The QuickFuel dispute is still open. You already got a 45.00 provisional credit, and your checking "
        "balance is 420.75.",
        "It's under review; you were credited $45 and you now have $420.75 in checking.",
        "Status: open. Credited so far: 45.00. Checking balance: 420.75.",
    ],
}

WRONG = {
    "total-balance": [
        "Your total balance is 18,000.00.",
        "Your total balance is 15,000.00.",
        "Your total is 18,200, or 18,700 if you count the overdraft.",
    ],
    "streamly-charges-may": [
        "Streamly charged you 47.97: 15.99 three times.",
        "Streamly charged you 15.99 in May.",
        "About 31.98, maybe 47.97.",
    ],
    "payee-limit-left": [
        "You can send 5,000 more today.",
        "You can still send 1,500 today.",
        "Somewhere between 1,000 and 2,000.",
    ],
    "available-with-overdraft": [
        "You can spend 610.00.",
        "You can spend 410.00, your balance minus the overdraft.",
    ],
    "dispute-status": [
        "The dispute has been resolved; you got 45.00 back and your balance is 420.75.",
        "It's still open, you got 45.00, and your balance is 375.75.",
        "Your dispute is not open any more; you got 45.00 and your balance is 420.75.",
    ],
}

# refusal task -> (a correct refusal in other words, a refusal that gives another rule's reason)
REFUSALS = {
    "refuse-savings-withdrawal-limit": (
        "Sorry, I can't move that money: your savings account has hit its withdrawal limit of six withdrawals "
        "for May. It resets on June 1.",
        "I cannot do that: there are insufficient funds in your savings account."),
    "refuse-insufficient-funds": (
        "I'm unable to transfer 500: your checking only has 420.75 in it and no overdraft, so there isn't enough "
        "money.",
        "I can't do that: you have reached your daily transfer limit."),
    "refuse-daily-limit": (
        "Unfortunately I can't send 1,500 today: it would go over your daily limit for payees, and only 1,000.00 "
        "is left for today.",
        "I can't: your checking account doesn't have enough funds."),
    "refuse-frozen-account": (
        "I'm not able to send it: CHK-2007 is under a legal hold, so nothing can be paid from it.",
        "I cannot send it: you are over your daily limit."),
    "refuse-old-dispute": (
        "Sorry, that charge can't be disputed any more: it's from March 2, and disputes must be filed within 60 "
        "days.",
        "I can't: that charge is already disputed."),
    "refuse-unlock-cancelled-card": (
        "I can't unlock the card ending 1164 because it was canceled; your active card ends in 7702.",
        "I cannot unlock it: the account is frozen."),
    "refuse-spouse-transfer": (
        "Sorry Jordan, I can't do that: I can only take instructions from the account holder, Priya herself.",
        "I can't: savings accounts allow only 6 withdrawals a month."),
    "refuse-relative-balance": (
        "I'm sorry, but I can't share that: account details can only be given to the account holder.",
        "I cannot tell you: his account is frozen."),
    "refuse-large-internal-transfer": (
        "I'm not able to make a 15,000 transfer here: transfers above 10,000 must be made in person at a branch.",
        "I can't: savings accounts allow only 6 withdrawals a month."),
    "refuse-early-not-received": (
        "I can't open a not-received dispute yet: the charge posted yesterday, and the merchant gets seven days "
        "to deliver.",
        "I cannot dispute it: it is older than 60 days."),
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


def test_refusal_that_leaks_the_balance_fails() -> None:
    assert not play("refuse-relative-balance", "I can't give details to anyone but the account holder, but his "
                                               "checking has 1,890.00.")


@pytest.mark.parametrize(("task_id", "calls"), [
    ("refuse-spouse-transfer", [call("transfer_between_accounts", from_account_id="SAV-2002",
                                     to_account_id="CHK-2001", amount=1000.0)]),
    ("refuse-large-internal-transfer", [call("transfer_between_accounts", from_account_id="SAV-2006",
                                             to_account_id="CHK-2005", amount=15000.0)]),
    ("refuse-early-not-received", [call("file_dispute", transaction_id="TX7020", reason="not_received")]),
])
def test_policy_only_action_succeeds_but_fails_the_task(task_id: str, calls: list) -> None:
    episode = RT.fork(task_id)
    try:
        assert RT.call(episode, calls[0].name, calls[0].arguments).error is None  # the tools allow it
    finally:
        episode.close()
    assert not play(task_id, "Done: I have transferred it." if "transfer" in calls[0].name else "Done.", calls)


def test_duplicate_charge_either_copy_passes() -> None:
    for txn in ("TX7005", "TX7006"):
        assert play("dispute-duplicate-charge", None, [call("file_dispute", transaction_id=txn, reason="duplicate")])


def test_stolen_card_lock_first_passes() -> None:
    calls = [call("lock_card", card_id="CRD-3005"),
             call("file_dispute", transaction_id="TX7061", reason="unauthorized"),
             call("replace_card", card_id="CRD-3005", reason="stolen")]
    assert play("stolen-card-and-dispute", None, calls)


@pytest.mark.parametrize(("memo", "ok"), [("Concert tickets", True), ("concert tickets.", True),
                                          ("Tickets", False), ("", False)])
def test_dictated_memo_is_checked(memo: str, ok: bool) -> None:
    calls = [call("pay_payee", from_account_id="CHK-2001", payee_id="PY-4001", amount=300.0, memo=memo)]
    assert play("pay-saved-payee", None, calls) is ok


def test_undictated_memo_is_free() -> None:
    calls = [call("transfer_between_accounts", from_account_id="SAV-2002", to_account_id="CHK-2001", amount=500.0,
                  memo="Top up checking")]
    assert play("savings-to-checking", None, calls)
