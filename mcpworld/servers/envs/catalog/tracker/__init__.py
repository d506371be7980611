"""Issue tracker: projects with role-based members, issues on a review workflow, blockers and milestones."""

from mcpworld.servers.envs.world import World

from .data import NOW, seed
from .models import Base
from .tasks import TASKS
from .tools import TOOLS

world = World(
    name="tracker",
    title="Issue tracker",
    description="A software issue tracker: issues on a review workflow, blockers, milestones and roles.",
    scenario="You operate the team's issue tracker on behalf of its users. Each request says who is asking; act "
             "as that person (actor_id) and respect the project permissions and workflow the tools enforce "
             "(viewers are read-only, only maintainers delete issues or close milestones, issues go open -> "
             "in_progress -> review -> done). Refuse politely and say why when a request breaks a rule. It is "
             "Monday 11 May 2026.",
    base=Base,
    seed=seed,
    tools=TOOLS,
    tasks=TASKS,
    tags=["software", "issues", "workflow", "permissions"],
    clock=NOW,
)
