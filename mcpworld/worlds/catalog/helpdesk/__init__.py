"""IT helpdesk: tickets with SLAs, hardware assets, license seats and access requests, under company rules."""

from mcpworld.world import World

from .data import NOW, seed
from .models import Base
from .policy import RULES
from .tasks import TASKS
from .tools import TOOLS

world = World(
    name="helpdesk",
    title="IT helpdesk",
    description="A company IT desk: tickets with SLAs, hardware, license seats and access requests.",
    scenario="You are an IT helpdesk operator. Employees and IT staff ask you to open, assign, escalate, "
             "close and reopen tickets, hand out or take back hardware and software licenses, and approve access "
             "requests. Follow the IT policy, including the rules the tools do not enforce themselves: an action "
             "the tools would allow may still be against policy. Refuse politely and say which rule applies when "
             "a request breaks one. It is Monday 16 March 2026, 10:00.",
    base=Base,
    seed=seed,
    tools=TOOLS,
    tasks=TASKS,
    names=["employee.name"],
    vary=True,
    rules=RULES,
    # worded by the agent; the tasks that ask for specific content check it
    free_fields={"ticket": ("title", "description", "resolution"), "ticket_comment": ("body",),
                 "access_request": ("decision_note",)},
    tags=["it", "ticketing", "assets", "permissions"],
    clock=NOW,
)
