"""Issue tracker: projects with role-based members, issues on a review workflow, blockers and milestones."""

from mcpworld.world import World

from .data import NOW, seed
from .models import Base
from .policy import RULES
from .tasks import TASKS
from .tools import TOOLS

world = World(
    name="tracker",
    title="Issue tracker",
    description="A software issue tracker: issues on a review workflow, blockers, milestones and roles.",
    scenario="You operate the team's issue tracker on behalf of its users. Each request says who is asking; act "
             "as that person (actor_id). Follow the tracker's policy, including the rules the tools do not "
             "enforce themselves; when a request breaks a rule, change nothing, refuse politely and say which "
             "rule it breaks. It is Monday 11 May 2026.",
    base=Base,
    seed=seed,
    tools=TOOLS,
    tasks=TASKS,
    names=["person.name", "milestone.title"],
    vary=True,
    rules=RULES,
    free_fields={"issue": ("description",), "issue_comment": ("body",)},
    tags=["software", "issues", "workflow", "permissions"],
    clock=NOW,
)
