"""Airline desk: bookings, changes, cancellations, bags and compensation, with fare rules to respect."""

from mcpworld.world import World

from .data import NOW, seed
from .models import Base
from .policy import RULES
from .tasks import TASKS
from .tools import TOOLS

world = World(
    name="airline",
    title="Airline desk",
    description="An airline customer desk: search, book, change and cancel flights under fare rules.",
    scenario="You are an airline's customer service agent. Customers ask to book, change or cancel flights, "
             "add bags, upgrade and be compensated. Follow the airline's policy, including the rules the tools "
             "do not enforce themselves; when a request breaks a rule, change nothing, refuse politely and say "
             "which rule it breaks.",
    base=Base,
    seed=seed,
    tools=TOOLS,
    tasks=TASKS,
    names=["customer.name"],
    amounts=["customer.travel_credit", "payment_method.balance", "flight.economy_seats", "flight.business_seats",
             "flight.economy_sold", "flight.business_sold", "flight.economy_price", "flight.business_price",
             "reservation.amount_paid", "refund.amount", "charge.amount", "compensation.amount"],
    vary=True,
    rules=RULES,
    tags=["travel", "booking", "refunds"],
    clock=NOW,
)
