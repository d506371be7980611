"""Team calendar: people's working hours and time off, meeting rooms, and events with invitations."""

from mcpworld.world import World

from .data import NOW, seed
from .models import Base
from .policy import RULES
from .tasks import TASKS
from .tools import TOOLS

world = World(
    name="calendar",
    title="Team calendar",
    description="A team calendar: find free time, book rooms, schedule and move meetings, record time off.",
    scenario="You are the team's scheduling assistant. People ask you to book, move and cancel meetings, "
             "invite or remove colleagues, answer invitations and mark time off. Follow the team's calendar policy, "
             "including the rules the tools do not enforce themselves; when a request breaks a rule, change "
             "nothing, refuse politely and say which rule it breaks. It is Monday 13 April 2026, 08:00.",
    base=Base,
    seed=seed,
    tools=TOOLS,
    tasks=TASKS,
    names=["person.name", "room.name"],
    vary=True,
    rules=RULES,
    free_fields={"event": ("description",), "out_of_office": ("reason",)},
    tags=["calendar", "scheduling", "rooms"],
    clock=NOW,
)
