"""The world authoring API in one import: state models, tools, tasks, rules and typed answers.

    from mcpworld.world import Count, Rule, Session, Task, User, World, call, tool, world_base

See docs/worlds.md. Everything here is defined in `mcpworld.worlds.world`, `mcpworld.worlds.answers` and
`mcpworld.worlds.users` (a conversational task's `User`).
"""

from mcpworld.worlds.answers import Count, DateAnswer, Entities, Number, TimeAnswer, YesNo, entity
from mcpworld.worlds.users import User
from mcpworld.worlds.world import (
    Check,
    Outcome,
    Rule,
    Session,
    Task,
    Timestamp,
    ToolError,
    Verdict,
    World,
    call,
    db_time,
    fetch,
    new_id,
    not_found,
    now,
    tool,
    world_base,
)

__all__ = [
    "Check", "Count", "DateAnswer", "Entities", "Number", "Outcome", "Rule", "Session", "Task", "TimeAnswer",
    "Timestamp", "ToolError", "User", "Verdict", "World", "YesNo", "call", "db_time", "entity", "fetch", "new_id",
    "not_found", "now", "tool", "world_base",
]
