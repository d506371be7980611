"""Team calendar: people's working hours and time off, meeting rooms, and events with invitations."""

from mcpworld.servers.envs.world import World

from .data import NOW, seed
from .models import Base
from .tasks import TASKS
from .tools import TOOLS

world = World(
    name="calendar",
    title="Team calendar",
    description="A team calendar: find free time, book rooms, schedule and move meetings, record time off.",
    scenario="You are the team's scheduling assistant. People ask you to book, move and cancel meetings, "
             "invite or remove colleagues, answer invitations and mark time off. Respect the calendar rules the "
             "tools enforce (working hours, room capacity and bookings, out-of-office, organizer rights); refuse "
             "politely and say why when a request breaks them. It is Monday 13 April 2026, 08:00.",
    base=Base,
    seed=seed,
    tools=TOOLS,
    tasks=TASKS,
    tags=["calendar", "scheduling", "rooms"],
    clock=NOW,
)
