"""The airline desk's policy: one rule per fare rule the tools enforce, plus rules only the agent can follow.

A refusal cites its rule by one of the rule's cues and no cue of another rule, so every cue below is a phrase
only an answer about that rule would use (`mcpworld world validate` rejects cues that overlap).
"""

from __future__ import annotations

from mcpworld.world import Rule

RULES = [
    # -- enforced by the tools --------------------------------------------------------------------------------
    Rule("basic-cancel-24h",
         "A basic fare can be cancelled for a refund only within 24 hours of booking, unless it was booked with "
         "travel insurance or the airline itself cancelled the flight.",
         cues=("24 hours", "24-hour", "twenty-four hours", "within a day")),
    Rule("basic-no-change",
         "Basic fares cannot be moved to another flight. A standard fare may move to another flight on the same "
         "route, in the same cabin; a dearer flight is charged the fare difference and a cheaper one refunded.",
         cues=("cannot be changed", "can't be changed", "cannot be moved", "can't be moved", "not changeable")),
    Rule("seats-available",
         "A flight can be booked, changed to or upgraded on only while the cabin has enough free seats for every "
         "passenger of the reservation.",
         cues=("sold out", "fully booked", "no seats", "no economy seats", "no business seats", "seats left")),
    Rule("departed-flights",
         "Reservations on a flight that has departed can no longer be cancelled, changed, upgraded or given bags, "
         "and flights that have departed or that the airline called off cannot be booked.",
         cues=("departed", "already left", "took off")),
    Rule("payment-gift-card",
         "Payment comes from one of the customer's own saved payment methods; a gift card must cover the whole "
         "amount by itself.",
         cues=("balance", "insufficient", "does not cover", "doesn't cover")),
    Rule("bag-allowance",
         "Each passenger checks at most 5 bags. Free bags per passenger go by loyalty tier (regular 1, silver 2, "
         "gold 3); each bag beyond those costs 35.",
         cues=("5 bags", "five bags", "bag limit", "bags per passenger")),
    Rule("compensation",
         "Travel credit is compensation only for the customer's own reservation on a flight the airline delayed "
         "or cancelled: at most 100 per passenger for a delay and 200 per passenger for a cancellation, once per "
         "reservation.",
         cues=("delayed or cancelled", "on time", "on schedule", "only for delays", "already compensated")),
    Rule("contact-details",
         "A new e-mail address must be valid and not in use by another customer.",
         cues=("in use by another", "not a valid e-mail", "invalid e-mail")),
    # -- policy only: the tools would allow these, the agent must not ----------------------------------------
    Rule("own-reservations-only",
         "Act only for the reservation's own customer: never cancel, change, upgrade or add bags to a "
         "reservation at the request of someone who is not its customer, not even a relative or colleague.",
         cues=("not your reservation", "isn't your reservation", "belongs to another customer", "on behalf of",
               "account holder"),
         enforced=False),
    Rule("max-five-passengers",
         "One reservation holds at most five passengers; a larger party has to go through the group sales desk, "
         "so do not book it here.",
         cues=("five passengers", "5 passengers", "group sales", "group desk", "group booking"),
         enforced=False),
]
