"""Retail bank: accounts, transfers, payees, cards and disputes, with banking limits to respect."""

from mcpworld.world import World

from .data import NOW, seed
from .models import Base
from .policy import RULES
from .tasks import TASKS
from .tools import TOOLS

world = World(
    name="bank",
    title="Retail bank",
    description="A retail bank's desk: balances, transfers, payees, debit cards and card disputes.",
    scenario="You are a retail bank's customer service agent. Customers ask about balances and transactions, "
             "move money between their accounts, pay their payees, lock, unlock and replace cards, and dispute "
             "card charges. Follow the bank's policy, including the rules the tools do not enforce themselves: an "
             "action the tools would allow may still be against policy. Refuse politely and say which rule "
             "applies when a request breaks one.",
    base=Base,
    seed=seed,
    tools=TOOLS,
    tasks=TASKS,
    names=["customer.name"],
    amounts=["customer.daily_transfer_limit", "account.balance", "account.overdraft_limit", "transactions.amount",
             "transfer.amount", "dispute.amount", "dispute.provisional_credit"],
    vary=True,
    rules=RULES,
    free_fields={"transfer": ("memo",)},  # the customer's words; a task that dictates a memo checks it
    tags=["finance", "banking", "payments", "disputes"],
    clock=NOW,
)
