"""The AWM pipeline's prompts: the world format every stage writes to, and each stage's instruction.

Each stage's conversation starts with a `[synth:STAGE]` marker (see `synth.chat`); a failed stage is asked
again in the same conversation (`chat.retry_message`).
"""

from __future__ import annotations

from typing import Any

STAGES = ("tasks", "schema", "seed", "tools", "verifiers")

FORMAT = """You write environments for training tool-using AI agents, as Python packages for mcpworld.
A world is data + tools + tasks:
- models.py: SQLModel tables on a private base.
    from sqlmodel import Field
    from mcpworld.worlds.world import Timestamp, world_base
    Base = world_base()
    class Member(Base, table=True):
        id: str = Field(primary_key=True)
        name: str
  Every table needs a primary key; foreign keys are `Field(foreign_key="table.column")` and are enforced.
- data.py: `def seed(db: Session) -> None` that adds the starting rows with db.add / db.add_all
  (import the models with `from .models import *`; datetimes are naive, the world's clock is 2026-06-01 12:00).
- tools.py: typed functions marked @tool; the first parameter is the episode's Session, the others become the
  JSON Schema. `@tool` is read-only, `@tool(writes=True)` writes. Raise `ToolError("why")` for a business rule and
  `not_found("kind", key)` for a missing row. Use `now(db)` for the time and `new_id(db, "PREFIX")` for new ids.
    from sqlmodel import select
    from mcpworld.worlds.world import Session, ToolError, new_id, not_found, now, tool
    from .models import *
- tasks.json (data, not code): the world's policy and its tasks.
    {"rules": [{"id": "loan-limit", "text": "A member never has more books on loan than their loan limit.",
                "cues": ["loan limit"], "enforced": true}, ...],
     "free_fields": {"loan": ["note"]},
     "tasks": [{"id": "kebab-id", "kind": "state|answer|refusal", "instruction": "what the user says",
                "solution": [{"name": "tool", "arguments": {"arg": "value"}}, ...],
                "answer": "short reference answer (answer and refusal tasks)",
                "expect": [typed parts, answer tasks only], "reason": "rule id (refusal tasks only)"}]}
  mcpworld judges every task itself; you write no verifier code:
  * The agent's final database must equal the one the reference `solution` leaves, row by row (the columns in
    `free_fields`, free text the agent words itself, excepted). So the instruction must determine every value
    the solution writes, and a task must change something or ask something: one that passes when the agent
    does nothing is rejected.
  * An answer task's `expect` lists what the final answer must state: {"type": "count", "value": 2},
    {"type": "number", "value": 12.5}, {"type": "date", "value": "2026-06-03"}, {"type": "time", "start":
    "14:00"}, {"type": "yesno", "value": true}, {"type": "entities", "expected": [["Dune", "B1"]], "among":
    "book.title"} (each inner list holds the aliases of one expected entity; `among` is the wrong candidates: a
    list, or "table.column" for every value of that column). An answer that also states another number, date or
    candidate, or negates the answer, fails; so does one longer than 400 characters.
  * A refusal task's `reason` is the id of the rule the agent must cite: its answer must refuse, mention a cue of
    THAT rule and no cue of another rule, and its reference solution must change nothing.
  * `rules` is the policy the agent is given: one rule per business rule the tools enforce ("enforced": true),
    and at least 2 rules the tools do NOT enforce ("enforced": false: the call would succeed, the policy forbids
    it; their refusal tasks' solutions only read). Each rule has 1-4 short, distinctive cues; no cue may contain,
    or be contained in, a cue of another rule. Every refusal task names one of these rules.
  Each task is also attacked by wrong policies (doing nothing, dumping the database or the tools' output as the
  answer, refusing with every rule's cues, changing an argument, writing extra rows); one that a wrong policy
  passes is dropped.
Answer with exactly one fenced code block and nothing else."""


def _header(stage: str, scenario: str) -> str:
    return f"[synth:{stage}] {scenario.strip()}"


def stage_messages(stage: str, scenario: str, context: dict[str, str]) -> list[dict[str, Any]]:
    """The first messages of one stage's conversation (system + user)."""
    parts = [_header(stage, scenario), ""]
    for key in ("plan", "models.py", "data.py", "tools.py", "tool signatures", "seeded rows"):
        if key in context:
            parts += [f"--- {key} ---", context[key], ""]
    parts.append(INSTRUCTIONS[stage])
    return [{"role": "system", "content": FORMAT}, {"role": "user", "content": "\n".join(parts)}]


INSTRUCTIONS = {
    "tasks": "Stage 1 of 5, plan. Plan a small world for this scenario: a title, a one-line description "
             "(at most 100 characters), the rules of its policy (those the tools will enforce, and at least 2 that "
             "only the policy states), and 4 to 6 tasks a user could ask of an agent here (mix state changes, "
             "questions and requests the rules must refuse). Reply with one ```json block: "
             '{"title": ..., "description": ..., "rules": [{"id": "kebab-id", "text": ..., "enforced": true}], '
             '"tasks": [{"id": "kebab-id", "kind": "state|answer|refusal", "instruction": ...}]}',
    "schema": "Stage 2 of 5, schema. Write models.py: the SQLModel tables this world needs to support every "
              "planned task. Reply with one ```python block.",
    "seed": "Stage 3 of 5, seed data. Write data.py with seed(db): enough rows (5-20 per table) for every task to "
            "be possible, and none of the tasks already done. Respect every constraint. Reply with one ```python "
            "block.",
    "tools": "Stage 4 of 5, tools. Write tools.py: the 4-10 tools an agent needs for the planned tasks, with "
             "the enforced rules of the plan enforced by ToolError (and the policy-only rules NOT enforced). "
             "Reply with one ```python block.",
    "verifiers": "Stage 5 of 5, tasks and their checks. Write tasks.json for the planned tasks: the rules with "
                 "their cues, and for each task a reference solution that uses the tools above with real ids "
                 "from the seed data, its short reference answer, and its typed `expect` (answer tasks) or "
                 "`reason` (refusal tasks). Reply with one ```json block.",
}
