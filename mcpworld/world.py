"""The world authoring API in one import: state models, tools, tasks, rules and typed answers.

    from mcpworld.world import Count, Rule, Session, Task, World, call, tool, world_base

See docs/worlds.md. Everything here is defined in `mcpworld.worlds.world` and `mcpworld.worlds.answers`.
"""

from mcpworld.worlds.answers import Count, DateAnswer, Entities, Number, TimeAnswer, YesNo, entity
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
    "Timestamp", "ToolError", "Verdict", "World", "YesNo", "call", "db_time", "entity", "fetch", "new_id",
    "not_found", "now", "tool", "world_base",
]
