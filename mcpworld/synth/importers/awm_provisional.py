"""Provisional AWM tasks: kept without a reference solution, judged by AWM's own verifier, until trajectories
promote them.

AWM publishes no reference solutions. A task without one is kept in the *provisional* tier (`Task.provisional`:
the runtime judges it by its verifier alone, and `run`/`train` play it only with `--include-provisional`) when
AWM's code verifier runs cleanly on the initial database, does not already pass there (the target already holds:
AWM issue #16, such a task is dropped), and rejects every wrong policy that needs no reference:

| policy | what it plays |
| --- | --- |
| noop | no calls, no answer |
| echo | no calls; the instruction repeated as the answer |
| refusal | no calls; "I'm sorry, I can't help with that." and the like |
| db-spam | every write tool, several times, with the first rows' ids and random values |
| crawler | every read tool, then a dump of everything it read as the answer |
| random | random schema-valid calls, then "Done." (the audit's own) |

`awm_promote` turns them into referenced tasks once trajectories agree (`mcpworld synth promote RUNS...`).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from mcpworld.core.models import ToolCall
from mcpworld.core.schemas import random_value
from mcpworld.worlds.audit import POLICIES, Policy, audit
from mcpworld.worlds.audit.attempts import Attempt, TaskContext, dump
from mcpworld.worlds.runtime import WorldRuntime

REFUSALS = ("I'm sorry, but I can't help with that.", "I cannot complete this request.",
            "I am unable to do that: it is not allowed.")
ALREADY_HOLDS = ("the target already holds in the initial database: AWM's code verifier passes a no-op (AWM issue "
                 "#16), so no episode can be told from doing nothing")


def _echo(ctx: TaskContext) -> Iterator[Attempt]:
    yield Attempt("the instruction as the answer", [], ctx.task.instruction)


def _refusal(ctx: TaskContext) -> Iterator[Attempt]:
    for text in REFUSALS:
        yield Attempt(f"refuses: {text}", [], text)


def _filled(schema: dict[str, Any], rng: random.Random, ident: int) -> dict[str, Any]:
    """Schema-valid arguments with every integer (ids, mostly) set to `ident`."""
    args = random_value(schema, rng) or {}
    props = schema.get("properties") or {}
    for name, prop in props.items():
        kinds = {prop.get("type")} | {o.get("type") for o in prop.get("anyOf") or [] if isinstance(o, dict)}
        if "integer" in kinds:
            args[name] = ident
    for name in schema.get("required") or []:
        args.setdefault(name, ident if "integer" in str(props.get(name)) else f"x{ident}")
    return args


def _spam(ctx: TaskContext) -> Iterator[Attempt]:
    rng = random.Random(7)
    writes = [s for s in ctx.runtime.tools.values() if s.meta.writes]
    if writes:
        calls = [ToolCall(name=s.name, arguments=_filled(s.input_schema, rng, ident))
                 for ident in (1, 2, 3) for s in writes]
        yield Attempt(f"{len(calls)} writes: {', '.join(s.name for s in writes)} with ids 1-3", calls, "Done.")


def _crawler(ctx: TaskContext) -> Iterator[Attempt]:
    rng = random.Random(11)
    reads = [s for s in ctx.runtime.tools.values() if not s.meta.writes]
    if not reads:
        return
    calls = [ToolCall(name=s.name, arguments=_filled(s.input_schema, rng, ident))
             for ident in (1, 2) for s in reads]

    def everything(results: list[Any]) -> str:
        return dump([r.value for r in results if getattr(r, "error", None) is None])[:6000]

    yield Attempt(f"reads {', '.join(s.name for s in reads)}; answers with all it saw", calls, everything)


_AUDIT = {p.name: p for p in POLICIES}
REFERENCE_FREE: list[Policy] = [
    _AUDIT["noop"],
    Policy("echo", False, _echo, "no calls; the instruction repeated as the answer"),
    Policy("refusal", False, _refusal, "no calls; a refusal as the answer"),
    Policy("db-spam", False, _spam, "every write tool several times, ids 1-3 and random values"),
    Policy("crawler", False, _crawler, "every read tool, then everything read as the answer"),
    _AUDIT["random"],
]


def reference_free_problems(runtime: WorldRuntime, ids: list[str]) -> dict[str, tuple[str, str]]:
    """Provisional tasks that a reference-free wrong policy passes: id -> (policy, what it played)."""
    if not ids:
        return {}
    report = audit(runtime, ids, policies=REFERENCE_FREE)
    out: dict[str, tuple[str, str]] = {}
    for r in report.failures:
        if r.task not in out:
            attempt = f"{r.attempt}: " if r.attempt else ""
            out[r.task] = (r.policy, f"wrong policy {r.policy} passed: {attempt}{r.detail}"[:600])
    return out


__all__ = ["ALREADY_HOLDS", "REFERENCE_FREE", "reference_free_problems"]
