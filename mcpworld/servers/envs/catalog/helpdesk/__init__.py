"""IT helpdesk: tickets with SLAs, hardware assets, license seats and access requests, under company rules."""

from mcpworld.servers.envs.world import World

from .data import NOW, seed
from .models import Base
from .tasks import TASKS
from .tools import TOOLS

world = World(
    name="helpdesk",
    title="IT helpdesk",
    description="A company IT desk: tickets with SLAs, hardware, license seats and access requests.",
    scenario="You are an IT helpdesk operator. Employees and IT staff ask you to open, assign, escalate, "
             "close and reopen tickets, hand out or take back hardware and software licenses, and approve access "
             "requests. Follow the company rules the tools enforce; refuse politely and say why when a request "
             "breaks them. It is Monday 16 March 2026, 10:00.",
    base=Base,
    seed=seed,
    tools=TOOLS,
    tasks=TASKS,
    tags=["it", "ticketing", "assets", "permissions"],
    clock=NOW,
)
