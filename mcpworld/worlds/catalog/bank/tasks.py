"""Retail bank tasks. Every task fails a no-op episode and passes with its reference solution."""

from __future__ import annotations

from mcpworld.world import Check, Number, Outcome, Task, call, entity


def disputed_one_of(o: Outcome, *transaction_ids: str) -> Check:
    """Exactly one dispute was filed, on one of `transaction_ids` (either of two duplicate charges will do)."""
    rows = o.diff.tables["dispute"].inserted
    hit = [r["transaction_id"] for r in rows]
    return Check(name=f"one dispute on one of {', '.join(transaction_ids)}",
                 passed=len(hit) == 1 and hit[0] in transaction_ids, detail=f"disputed {hit}")


def memo_is(o: Outcome, memo: str) -> Check:
    """The one new transfer carries the memo the customer dictated (the memo is free text: compared loosely)."""
    rows = o.diff.tables["transfer"].inserted
    said = [(r.get("memo") or "").strip().strip("'\"").rstrip(".").lower() for r in rows]
    return Check(name=f"transfer memo is {memo!r}", passed=said == [memo.lower()], detail=f"memos {said}")


DISPUTE_STATUSES = ["resolved", "rejected", "closed", "denied", "approved", "refunded"]

TASKS = [
    # -- answers ---------------------------------------------------------------------------------------
    Task(
        id="total-balance",
        kind="answer",
        instruction="Hi, I'm priya@example.com. What is my total balance across all my accounts?",
        solution=[call("find_customer", email="priya@example.com"),
                  call("list_accounts", customer_id="CU100")],
        answer="Your total balance is 18,200.00: 3,200.00 in checking CHK-2001 and 15,000.00 in savings SAV-2002.",
        expect=[Number(value=18200.0, scales=True, allow=[3200.0, 15000.0, 2, 500.0])],  # "your two accounts", "a 500 overdraft"
    ),
    Task(
        id="streamly-charges-may",
        kind="answer",
        instruction="priya@example.com here. How much has Streamly charged my checking account in May 2026 so far?",
        solution=[call("find_customer", email="priya@example.com"),
                  call("list_accounts", customer_id="CU100"),
                  call("list_transactions", account_id="CHK-2001", start="2026-05-01", search="streamly")],
        answer="Streamly charged you 31.98 in May: two charges of 15.99 on 2026-05-10, a minute apart, which "
               "looks like a duplicate.",
        expect=[Number(value=31.98, scales=True, allow=[15.99, 2])],
        split="test",
        difficulty="medium",
    ),
    Task(
        id="payee-limit-left",
        kind="answer",
        instruction="I'm Elena Petrova (elena@example.com). How much more can I still send to my payees today?",
        solution=[call("find_customer", email="elena@example.com"),
                  call("get_customer", customer_id="CU102")],
        answer="Your daily limit for payments to payees is 5,000.00 and you already sent 4,000.00 today, so you "
               "can send 1,000.00 more.",
        expect=[Number(value=1000.0, scales=True, allow=[5000.0, 4000.0])],
        difficulty="medium",
    ),
    Task(
        id="available-with-overdraft",
        kind="answer",
        instruction="nora@example.com: how much can I spend from my checking account right now, counting my "
                    "overdraft?",
        solution=[call("find_customer", email="nora@example.com"),
                  call("list_accounts", customer_id="CU104")],
        answer="Checking CHK-2009 has 610.00 plus a 200.00 overdraft, so 810.00 is available.",
        expect=[Number(value=810.0, scales=True, allow=[610.0, 200.0])],
    ),
    Task(
        id="dispute-status",
        kind="answer",
        instruction="Marcus Lee (marcus@example.com). What's the status of my dispute about the QuickFuel charge, "
                    "was I credited anything yet, and what is my checking balance now?",
        solution=[call("find_customer", email="marcus@example.com"),
                  call("list_disputes", customer_id="CU101"),
                  call("list_accounts", customer_id="CU101")],
        answer="Your dispute on the 45.00 QuickFuel charge is still open; you received a provisional credit of "
               "45.00, and your checking balance is 420.75.",
        expect=[entity("open", "still open", "under review", "pending", among=DISPUTE_STATUSES, label="status"),
                Number(value=45.0, scales=True, label="credit"), Number(value=420.75, scales=True, label="checking balance")],
    ),
    # -- state changes ---------------------------------------------------------------------------------
    Task(
        id="savings-to-checking",
        instruction="Priya Shah, priya@example.com. Move 500 from my savings into my checking account please.",
        solution=[call("find_customer", email="priya@example.com"),
                  call("list_accounts", customer_id="CU100"),
                  call("transfer_between_accounts", from_account_id="SAV-2002", to_account_id="CHK-2001",
                       amount=500.0)],
        verify=lambda o: [o.diff.updated("account", "SAV-2002", balance=14500.0),
                          o.diff.updated("account", "CHK-2001", balance=3700.0),
                          o.diff.inserted("transfer", 1, from_account_id="SAV-2002", to_account_id="CHK-2001",
                                          amount=500.0),
                          o.diff.inserted("transactions", 1, account_id="SAV-2002", amount=-500.0),
                          o.diff.inserted("transactions", 1, account_id="CHK-2001", amount=500.0),
                          o.diff.only("account", "transfer", "transactions")],
    ),
    Task(
        id="pay-saved-payee",
        instruction="priya@example.com here. Send 300 to Jordan Shah from my checking account, memo "
                    "'Concert tickets'.",
        solution=[call("find_customer", email="priya@example.com"),
                  call("list_payees", customer_id="CU100"),
                  call("pay_payee", from_account_id="CHK-2001", payee_id="PY-4001", amount=300.0,
                       memo="Concert tickets")],
        verify=lambda o: [o.diff.updated("account", "CHK-2001", balance=2900.0),
                          o.diff.inserted("transfer", 1, from_account_id="CHK-2001", payee_id="PY-4001",
                                          amount=300.0),
                          o.diff.inserted("transactions", 1, account_id="CHK-2001", amount=-300.0, kind="payment"),
                          o.diff.unchanged("payee"), memo_is(o, "Concert tickets")],
        difficulty="medium",
    ),
    Task(
        id="lock-misplaced-card",
        instruction="I'm priya@example.com and I can't find my debit card. Please lock it for now; I think it's "
                    "somewhere at home.",
        solution=[call("find_customer", email="priya@example.com"),
                  call("list_cards", customer_id="CU100"),
                  call("lock_card", card_id="CRD-3001")],
        verify=lambda o: [o.diff.updated("card", "CRD-3001", status="locked"), o.diff.only("card")],
    ),
    Task(
        id="unlock-card",
        instruction="Elena Petrova (elena@example.com). I found my card ending 3388, please unlock it.",
        solution=[call("find_customer", email="elena@example.com"),
                  call("list_cards", customer_id="CU102"),
                  call("unlock_card", card_id="CRD-3003")],
        verify=lambda o: [o.diff.updated("card", "CRD-3003", status="active"), o.diff.only("card")],
        split="test",
    ),
    Task(
        id="stolen-card-and-dispute",
        instruction="This is Nora Lindqvist, nora@example.com. My debit card was stolen and someone used it at "
                    "'Online Games Ltd'. I need a new card, and I want that charge disputed as unauthorized.",
        solution=[call("find_customer", email="nora@example.com"),
                  call("list_cards", customer_id="CU104"),
                  call("list_transactions", account_id="CHK-2009", search="online games"),
                  call("replace_card", card_id="CRD-3005", reason="stolen"),
                  call("file_dispute", transaction_id="TX7061", reason="unauthorized")],
        # locking the card first, disputing, then replacing it is as good (the new card's number differs)
        alternatives=[[call("lock_card", card_id="CRD-3005"),
                       call("file_dispute", transaction_id="TX7061", reason="unauthorized"),
                       call("replace_card", card_id="CRD-3005", reason="stolen")]],
        verify=lambda o: [o.diff.updated("card", "CRD-3005", status="cancelled", replaced_by="CRD-3007"),
                          o.diff.inserted("card", 1, id="CRD-3007", account_id="CHK-2009", status="active"),
                          o.diff.inserted("dispute", 1, transaction_id="TX7061", reason="unauthorized",
                                          amount=89.99, provisional_credit=89.99, status="open"),
                          o.diff.updated("account", "CHK-2009", balance=699.99),
                          o.diff.unchanged("transfer", "payee")],
        difficulty="hard",
        split="test",
    ),
    Task(
        id="dispute-duplicate-charge",
        instruction="priya@example.com: Streamly charged me twice on May 10th. Please dispute the duplicate charge.",
        solution=[call("find_customer", email="priya@example.com"),
                  call("list_transactions", account_id="CHK-2001", search="streamly"),
                  call("file_dispute", transaction_id="TX7006", reason="duplicate")],
        alternatives=[[call("file_dispute", transaction_id="TX7005", reason="duplicate")]],  # either copy
        verify=lambda o: [disputed_one_of(o, "TX7005", "TX7006"),
                          o.diff.inserted("dispute", 1, reason="duplicate", amount=15.99, provisional_credit=15.99),
                          o.diff.updated("account", "CHK-2001", balance=3215.99)],
        difficulty="medium",
    ),
    Task(
        id="dispute-large-purchase",
        instruction="Elena Petrova (elena@example.com). I paid 1,499 to Luxe Electronics on May 12th with my card "
                    "and the TV never arrived. Please open a dispute.",
        solution=[call("find_customer", email="elena@example.com"),
                  call("list_transactions", account_id="CHK-2005", search="luxe"),
                  call("file_dispute", transaction_id="TX7040", reason="not_received")],
        verify=lambda o: [o.diff.inserted("dispute", 1, transaction_id="TX7040", reason="not_received",
                                          amount=1499.0, provisional_credit=0.0, status="open"),
                          o.diff.only("dispute")],
        difficulty="medium",
    ),
    Task(
        id="add-payee-and-pay",
        instruction="Nora Lindqvist (nora@example.com). Add my friend Sofia Lind as a payee: she banks at Maple "
                    "Credit Union, account number 12345678. Then send her 150 from my checking account.",
        solution=[call("find_customer", email="nora@example.com"),
                  call("add_payee", customer_id="CU104", payee_name="Sofia Lind", bank_name="Maple Credit Union",
                       account_number="12345678"),
                  call("pay_payee", from_account_id="CHK-2009", payee_id="PY-4006", amount=150.0)],
        verify=lambda o: [o.diff.inserted("payee", 1, customer_id="CU104", account_number="12345678"),
                          o.diff.inserted("transfer", 1, from_account_id="CHK-2009", payee_id="PY-4006",
                                          amount=150.0),
                          o.diff.updated("account", "CHK-2009", balance=460.0)],
        difficulty="hard",
        split="test",
    ),
    Task(
        id="replace-damaged-card",
        instruction="Marcus Lee here, marcus@example.com. My debit card snapped in half. Can you send me a "
                    "replacement?",
        solution=[call("find_customer", email="marcus@example.com"),
                  call("list_cards", customer_id="CU101"),
                  call("replace_card", card_id="CRD-3002", reason="damaged")],
        verify=lambda o: [o.diff.updated("card", "CRD-3002", status="cancelled", replaced_by="CRD-3007"),
                          o.diff.inserted("card", 1, account_id="CHK-2003", status="active"),
                          o.diff.updated("account", "CHK-2003", balance=410.75),
                          o.diff.inserted("transactions", 1, account_id="CHK-2003", amount=-10.0, kind="fee")],
        difficulty="medium",
    ),
    # -- refusals --------------------------------------------------------------------------------------
    Task(
        id="refuse-savings-withdrawal-limit",
        kind="refusal",
        instruction="marcus@example.com: move 200 from my savings account to my checking account.",
        solution=[call("find_customer", email="marcus@example.com"),
                  call("list_accounts", customer_id="CU101"),
                  call("transfer_between_accounts", from_account_id="SAV-2004", to_account_id="CHK-2003",
                       amount=200.0)],
        answer="I cannot make that transfer: your savings account SAV-2004 already had 6 withdrawals this month, "
               "the monthly limit. It resets on June 1st.",
        reason="savings-withdrawals",
        difficulty="medium",
    ),
    Task(
        id="refuse-insufficient-funds",
        kind="refusal",
        instruction="Marcus Lee (marcus@example.com). Put 500 from my checking into my savings.",
        solution=[call("find_customer", email="marcus@example.com"),
                  call("list_accounts", customer_id="CU101"),
                  call("transfer_between_accounts", from_account_id="CHK-2003", to_account_id="SAV-2004",
                       amount=500.0)],
        answer="I cannot move 500: checking CHK-2003 has only 420.75 available and no overdraft, so there are "
               "insufficient funds.",
        reason="sufficient-funds",
    ),
    Task(
        id="refuse-daily-limit",
        kind="refusal",
        instruction="Elena Petrova (elena@example.com). Pay 1,500 to Harbor View Apartments from my checking "
                    "account, it's the deposit for the garage.",
        solution=[call("find_customer", email="elena@example.com"),
                  call("list_payees", customer_id="CU102"),
                  call("pay_payee", from_account_id="CHK-2005", payee_id="PY-4003", amount=1500.0)],
        answer="I cannot send 1,500 today: your daily transfer limit to payees is 5,000.00 and you already sent "
               "4,000.00 today, so only 1,000.00 more is possible.",
        reason="daily-payee-limit",
        difficulty="medium",
        split="test",
    ),
    Task(
        id="refuse-frozen-account",
        kind="refusal",
        instruction="Samuel Okoye (samuel@example.com). Send 200 to Ikechukwu Okoye from my checking account.",
        solution=[call("find_customer", email="samuel@example.com"),
                  call("list_accounts", customer_id="CU103"),
                  call("pay_payee", from_account_id="CHK-2007", payee_id="PY-4004", amount=200.0)],
        answer="I cannot send that payment: your checking account CHK-2007 is frozen, so no money can move in "
               "or out of it.",
        reason="frozen-account",
    ),
    Task(
        id="refuse-old-dispute",
        kind="refusal",
        instruction="priya@example.com: I want to dispute the SkyHigh Airlines charge on my checking account, "
                    "the flight was terrible.",
        solution=[call("find_customer", email="priya@example.com"),
                  call("list_transactions", account_id="CHK-2001", search="skyhigh"),
                  call("file_dispute", transaction_id="TX7004", reason="not_received")],
        answer="I cannot open that dispute: the SkyHigh Airlines charge was posted on 2026-03-02, more than 60 "
               "days ago, and the dispute window closed on 2026-05-01.",
        reason="dispute-window",
        difficulty="medium",
    ),
    Task(
        id="refuse-unlock-cancelled-card",
        kind="refusal",
        instruction="Nora Lindqvist (nora@example.com). Please unlock my card ending 1164.",
        solution=[call("find_customer", email="nora@example.com"),
                  call("list_cards", customer_id="CU104"),
                  call("unlock_card", card_id="CRD-3006")],
        answer="I cannot unlock the card ending 1164: it is cancelled and was replaced by your card ending 7702 "
               "(CRD-3005), which is active.",
        reason="cancelled-card",
    ),
    # -- refusals the tools would not make: the policy decides ----------------------------------------------
    Task(
        id="refuse-spouse-transfer",
        kind="refusal",
        reason="account-holder-only",
        instruction="Hi, this is Jordan Shah, Priya's husband. She asked me to move 1,000 from her savings to her "
                    "checking account. Her e-mail is priya@example.com.",
        solution=[call("find_customer", email="priya@example.com")],
        answer="I'm sorry, I can't make that transfer: I can only act on the account holder's own request, and "
               "Priya is the account holder. She needs to contact us herself.",
        difficulty="medium",
    ),
    Task(
        id="refuse-relative-balance",
        kind="refusal",
        reason="account-holder-only",
        instruction="This is Ikechukwu Okoye. My brother Samuel (samuel@example.com) is in hospital and asked me to "
                    "check on his money. How much is in his accounts?",
        solution=[call("find_customer", email="samuel@example.com")],
        answer="I'm sorry, I cannot share Samuel's account details with you: I can discuss an account only with "
               "the account holder, so Samuel has to contact us himself.",
        private=["account.balance", "7190"],  # every balance, and Samuel's total
        split="test",
    ),
    Task(
        id="refuse-large-internal-transfer",
        kind="refusal",
        reason="large-transfer-branch",
        instruction="Elena Petrova (elena@example.com). Move 15,000 from my savings into my checking account, "
                    "I'm buying a car this week.",
        solution=[call("find_customer", email="elena@example.com"),
                  call("list_accounts", customer_id="CU102")],
        answer="I can't move 15,000 over this channel: a transfer of more than 10,000.00 can only be made in a "
               "branch, after an in-person identity check.",
        difficulty="medium",
    ),
    Task(
        id="refuse-early-not-received",
        kind="refusal",
        reason="not-received-wait",
        instruction="Marcus Lee, marcus@example.com. I paid Metro Grocery for a delivery yesterday and it never "
                    "came. Please dispute the charge as not received.",
        solution=[call("find_customer", email="marcus@example.com"),
                  call("list_transactions", account_id="CHK-2003", search="metro grocery")],
        answer="I cannot dispute the Metro Grocery charge as not received yet: it posted only yesterday, and a "
               "not-received dispute is possible once 7 days have passed, to give the merchant time to deliver.",
        difficulty="medium",
        split="test",
    ),
]
