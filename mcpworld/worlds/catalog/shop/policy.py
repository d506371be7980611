"""The shop's policy: one rule per store rule the tools enforce, plus rules only the agent can follow.

A refusal cites its rule by one of the rule's cues and no cue of another rule, so every cue below is a phrase
only an answer about that rule would use (`mcpworld world validate` rejects cues that overlap).
"""

from __future__ import annotations

from mcpworld.world import Rule

RULES = [
    # -- enforced by the tools --------------------------------------------------------------------------------
    Rule("cancel-before-shipping",
         "An order can be cancelled, or sent to a new address, only while it is placed and has not left the "
         "warehouse; after that the customer waits for delivery and returns it.",
         cues=("already shipped", "has shipped", "been shipped", "in transit", "on its way")),
    Rule("final-sale",
         "Final-sale items cannot be returned.",
         cues=("final sale", "final-sale")),
    Rule("return-window",
         "Only delivered orders can be returned, within 30 days of delivery, and only units not returned yet; "
         "electronics returned for a change of mind lose a 15% restocking fee.",
         cues=("30 days", "30-day", "thirty days", "thirty-day", "return window")),
    Rule("code-valid",
         "A discount code must be active and not expired.",
         cues=("expired", "no longer valid", "inactive", "not active")),
    Rule("code-once-per-customer",
         "Each customer may use a discount code once.",
         cues=("once per customer", "already used", "only once", "one use", "used it before")),
    Rule("code-minimum-spend",
         "A discount code applies only while the cart subtotal meets the code's minimum spend.",
         cues=("minimum spend", "min spend", "minimum purchase")),
    Rule("stock",
         "An order can hold no more units of a product than are in stock.",
         cues=("in stock", "out of stock", "units left")),
    Rule("per-order-limit",
         "An order can hold no more units of a product than the product's per-order limit.",
         cues=("per order", "per-order")),
    Rule("discontinued",
         "Discontinued products cannot be ordered.",
         cues=("discontinued", "no longer sold")),
    Rule("store-credit-covers-total",
         "Store credit pays for an order only when the customer's credit covers the whole total.",
         cues=("not enough store credit", "store credit balance", "insufficient store credit", "credit balance")),
    Rule("refund-once",
         "A return is refunded once.",
         cues=("already refunded",)),
    # -- policy only: the tools would allow these, the agent must not ----------------------------------------
    Rule("own-orders-only",
         "Act only for the customer who owns the order, cart or account: never cancel, re-address or return an "
         "order at the request of someone else, not even a friend or relative of its customer.",
         cues=("not your order", "isn't your order", "belongs to another customer", "on behalf of",
               "account holder"),
         enforced=False),
    Rule("us-shipping-only",
         "We ship only to addresses in the United States: never check out or re-address an order to an address "
         "abroad.",
         cues=("united states", "only ship within", "international", "abroad", "outside the us"),
         enforced=False),
]
