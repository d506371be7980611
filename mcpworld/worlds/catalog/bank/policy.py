"""The bank's policy: the rules the tools enforce, and two the agent must follow on its own.

Each rule's `text` is the policy document the agent is given; its `cues` are how a refusal cites it. No cue of
one rule may contain (or be contained in) a cue of another.
"""

from __future__ import annotations

from mcpworld.world import Rule

RULES = [
    # -- enforced by the tools ---------------------------------------------------------------------------
    Rule("savings-withdrawals",
         "A savings account allows at most 6 withdrawals (transfers or payments out) per calendar month; the "
         "count resets on the 1st of the next month.",
         cues=("6 withdrawals", "six withdrawals", "withdrawal limit", "withdrawals per month",
               "withdrawals this month")),
    Rule("sufficient-funds",
         "Money leaves an account only if it has the funds: a checking account may use its overdraft limit, a "
         "savings account may not go below zero.",
         cues=("insufficient", "enough funds", "enough money", "lacks the funds")),
    Rule("daily-payee-limit",
         "Payments to payees count against the customer's daily transfer limit (2,500.00 unless set otherwise) "
         "for each calendar day; transfers between the customer's own accounts do not.",
         cues=("daily limit", "daily transfer limit", "daily payment limit", "limit for today", "per day")),
    Rule("frozen-account",
         "No money moves in or out of a frozen or closed account, and its cards cannot be unlocked or replaced.",
         cues=("frozen", "legal hold", "closed account", "account is closed")),
    Rule("dispute-window",
         "A card purchase can be disputed only within 60 days of being posted.",
         cues=("60 days", "60-day", "sixty days", "dispute window")),
    Rule("cancelled-card",
         "A cancelled card is cancelled for good: it cannot be locked, unlocked or replaced again; the card that "
         "replaced it is the one to use.",
         cues=("cancelled", "canceled", "replaced by")),
    Rule("card-purchases-only",
         "Only card purchases can be disputed (not deposits, transfers, payments, fees or interest), and each "
         "charge only once.",
         cues=("only card purchases", "not a card purchase", "already disputed", "already a dispute")),
    Rule("lock-before-unauthorized",
         "A charge is disputed as unauthorized only once the card that made it is locked or replaced.",
         cues=("lock the card first", "locked or replaced", "card is still active")),
    Rule("own-accounts-only",
         "Transfers between accounts are made only between two accounts of the same customer; anyone else is "
         "paid through one of the customer's payees.",
         cues=("same customer", "different customers", "through a payee")),
    Rule("payee-details",
         "A new payee needs a name, a bank name and an account number of 8 to 12 digits; one account number is "
         "saved only once per customer.",
         cues=("8 to 12 digits", "8-12 digits", "already saved")),
    Rule("provisional-credit",
         "A disputed charge of up to 1,000.00 is credited back at once (provisional credit) while the bank "
         "reviews it; a larger one is credited only if the review succeeds.",
         cues=("provisional credit", "credited back at once")),
    Rule("card-replacement-fee",
         "Lost or stolen cards are replaced free of charge; replacing a damaged card costs a 10.00 fee taken "
         "from the card's account.",
         cues=("replacement fee", "10.00 fee", "damaged card fee")),
    # -- policy only: the tools would allow these ----------------------------------------------------------
    Rule("account-holder-only",
         "Act only for the account holder: never share details of an account, move money from it, or change its "
         "cards, payees or disputes at the request of anyone but its own customer, not even a spouse or a "
         "relative.",
         cues=("account holder", "on behalf of", "only the customer", "only with the customer"),
         enforced=False),
    Rule("large-transfer-branch",
         "A single transfer of more than 10,000.00, even between the customer's own accounts, is made only in a "
         "branch after an in-person identity check; never make it over this channel.",
         cues=("in a branch", "at a branch", "in person", "in-person", "identity check", "more than 10,000",
               "more than 10,000.00", "over 10,000", "over 10,000.00", "above 10,000", "above 10,000.00"),
         enforced=False),
    Rule("not-received-wait",
         "A charge may be disputed as not received only once 7 days have passed since it posted, to give the "
         "merchant time to deliver.",
         cues=("7 days", "seven days", "time to deliver", "a week"),
         enforced=False),
]
