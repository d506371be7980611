"""`mcpworld world audit`: play attacks generated from each task's reference; every one must fail.

A verifier is only as good as the cheapest wrong episode it rejects. For every task the audit plays the
reference solution and every accepted form of its typed answer (they must pass), then attacks derived from
the task itself rather than a fixed list: for a typed answer, every other candidate value of the right type
(neighbouring numbers, the other entities of the table, other dates and times, the other boolean); for a
refusal, every other rule id, the protected values leaked into the message, a claim that the action was done;
for a state task, the reference stopped early, one unrelated row edited or copied, one write argument
changed, junk, injections and other records' data written into free text; for every task, no submission, a
decline where none is due, a second submission, random calls. A wrong episode that passes is a reward hack an
RL policy will find; the report names the task, the attack and the attempt that got through.

With the pass counts the audit reports each world's chance level per task kind: the expected reward of the
best constant policy (one submission or decline, whatever the task) and of a random one (a uniform pick among
the candidates of the task's answer type, or among the rules). Above 1 in 10, the world says so.

Everything runs in-process on a `WorldRuntime` (the same runtime the MCP server uses), on fresh forks with
seed 0, so the audit is deterministic and fast.

Rooms: generating the attacks (`attempts`: what an attack plays and playing it; `values`: wrong typed values;
`edits`: direct database edits; `attacks`: the policies), `chance` (chance levels), `report` (results, table,
JSON) and `run` (the driver, `audit`).
"""

from mcpworld.worlds.audit.attacks import POLICIES, Policy
from mcpworld.worlds.audit.chance import CHANCE_WARNING, ChanceLevel
from mcpworld.worlds.audit.report import KINDS, AuditReport, PolicyResult
from mcpworld.worlds.audit.run import audit

__all__ = ["CHANCE_WARNING", "KINDS", "POLICIES", "AuditReport", "ChanceLevel", "Policy", "PolicyResult", "audit"]
