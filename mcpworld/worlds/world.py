"""The world authoring API: state models, tools, tasks and verifiers.

A world is data + tools + tasks, nothing more. Authors write SQLModel tables, typed tool functions whose
first argument is the episode's `Session`, and `Task`s whose `verify` judges the state left behind.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import NaiveDatetime
from sqlalchemy.orm import registry as sa_registry
from sqlmodel import Session, SQLModel

from mcpworld.core.models import Check, ToolCall, Verdict
from mcpworld.core.tools import ToolMeta, ToolSpec, tool
from mcpworld.worlds.users import User

if TYPE_CHECKING:
    from mcpworld.worlds.answers import AnswerPart
    from mcpworld.worlds.diff import StateDiff

__all__ = [
    "Check",
    "Outcome",
    "Rule",
    "Session",
    "Task",
    "Timestamp",
    "ToolError",
    "Verdict",
    "World",
    "call",
    "db_time",
    "fetch",
    "new_id",
    "on_close",
    "not_found",
    "now",
    "tool",
    "world_base",
]


T = TypeVar("T")
Timestamp = NaiveDatetime
"""The type for date-times in world models: naive, in the world's own clock (no time zones to confuse)."""


REFUSAL_WORDS = ("cannot", "can't", "can not", "unable", "not able", "not possible", "not allowed", "refused",
                 "not eligible", "declined")


def db_time(moment: datetime) -> str:
    """A date-time as SQLite stores it, which is how raw rows in a state diff show it."""
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def _dump_in_field_order(self: SQLModel, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """`model_dump` with the model's fields in declaration order, then any other keys sorted.

    Why: a table row's attributes sit in its `__dict__` in the order SQLAlchemy happened to load them (a fresh
    load, a refresh after a write, an expired attribute), so the same row dumped after different calls, or in
    another process, came out in another key order, and a trajectory's bytes with it.
    """
    data = SQLModel.model_dump(self, *args, **kwargs)
    fields = type(self).model_fields
    ordered = {k: data[k] for k in fields if k in data}
    if len(ordered) < len(data):
        ordered.update((k, data[k]) for k in sorted(data) if k not in ordered)
    return ordered


def world_base() -> type[SQLModel]:
    """A fresh SQLModel base with its own metadata, so two worlds may both have a `user` table; its rows dump
    their fields in one order, whatever loaded them."""
    return type("WorldBase", (SQLModel,), {"model_dump": _dump_in_field_order},  # type: ignore[call-arg]
                registry=sa_registry())


class ToolError(Exception):
    """A business rule refused the call. The message goes back to the agent; the transaction rolls back."""


class KeptError(Exception):
    """A tool error whose writes stand: the message goes back to the agent as an error, and the call's
    transaction commits. For imported worlds whose own tools keep partial writes when they fail (τ²-bench's
    tools mutate in place and never roll back: `mcpworld/synth/importers/tau2/`)."""


RAW_SPEC = "__mcpworld_raw_spec__"


def raw_tool(name: str, description: str, schema: dict[str, Any], fn: Callable[[Session, dict[str, Any]], Any],
             *, writes: bool) -> Callable[..., Any]:
    """A tool that takes its arguments as the raw JSON object (`fn(db, arguments)`), unvalidated: `schema` is only
    advertised. For imported worlds whose tools must see arguments exactly as the agent sent them (τ²-bench).
    The runtime reads the spec from the returned function (`RAW_SPEC`)."""
    from pydantic import ConfigDict, create_model

    def shown(s: dict[str, Any], _cls: Any = None) -> None:
        s.clear()
        s.update(schema)

    model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="allow", json_schema_extra=shown))

    def call(db: Session, arguments: dict[str, Any]) -> Any:
        return fn(db, arguments)

    call.__name__ = call.__qualname__ = name
    meta = ToolMeta(name=name, writes=writes, destructive=writes, idempotent=not writes, description=description)
    setattr(call, RAW_SPEC, ToolSpec(name=name, description=description, fn=call, meta=meta, args_model=model))
    return tool(call, writes=writes, name=name, description=description)  # marked too: `validate` lists its name


def first_line(exc: BaseException) -> str:
    """What a tool, seed or verifier that raised is reported by: the first line of its message, at most 500 chars."""
    text = str(exc).strip().splitlines()
    return text[0][:500] if text else ""


def not_found(kind: str, key: Any) -> ToolError:
    """The error for a missing record, worded the same way in every world."""
    return ToolError(f"{kind} {key!r} not found")


def fetch(db: Session, model: type[T], key: Any, kind: str | None = None) -> T:
    """The row of `model` with primary key `key`, or the standard not-found error (named `kind`)."""
    row = db.get(model, key)
    if row is None:
        raise not_found(kind or model.__name__.lower(), key)
    return row


def now(db: Session) -> datetime:
    """The episode's clock: fixed per world, so the same task and seed always behave the same."""
    return db.info["now"]


ON_CLOSE = "on_close"


def on_close(db: Session, hook: Callable[[], None]) -> None:
    """Run `hook` when the episode of `db` closes: what a world holds for it elsewhere (a worker session) ends too."""
    db.info.setdefault(ON_CLOSE, []).append(hook)


def new_id(db: Session, prefix: str = "", length: int = 6) -> str:
    """A fresh id drawn from the episode's seeded generator (deterministic, unlike uuid4)."""
    rng: random.Random = db.info["rng"]
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
    value = prefix + "".join(rng.choice(alphabet) for _ in range(length))
    # Recorded so the reference comparison treats a generated id as "a new PREFIX id", not a literal.
    db.info.setdefault("generated", {})[value] = prefix
    return value


def call(name: str, /, **arguments: Any) -> ToolCall:
    """One step of a reference solution."""
    return ToolCall(name=name, arguments=arguments)


@dataclass
class Outcome:
    """What a verifier sees: the states before and after, their row-level diff, and the final answer."""

    diff: StateDiff
    answer: str | None
    _initial: Callable[[], Session]
    final: Session

    @property
    def initial(self) -> Session:
        """The episode's starting state (opened on first use: most verifiers only need the diff)."""
        return self._initial()


Verifier = Callable[[Outcome], "bool | Check | Verdict | Iterable[bool | Check]"]


@dataclass
class Task:
    """A task: an instruction, a reference solution, and what a correct episode must leave behind.

    Every task is judged against its reference: the final database must equal the one the reference
    solution leaves (row by row, except the world's `free_fields`), so collateral writes, wrong argument
    values and missing writes fail by construction. On top of that:

    - an `answer` task declares its typed answer in `expect` (a count, an amount, a date, entities…);
    - a `refusal` task names the world rule it must cite in `reason` (the id of one of `World.rules`);
    - `verify` adds hand-written checks for what a diff cannot see, and partial credit.

    `alternatives` lists other reference solutions whose final states are equally correct. The reference's
    submission (`submit_answer` with the `expect` values, or `decline` citing `reason` with `answer` as the
    message) is added by the runtime (`WorldRuntime.solution`): authors never write it.
    """

    id: str
    instruction: str
    verify: Verifier | None = None
    solution: list[ToolCall] = field(default_factory=list)
    answer: str | None = None
    kind: Literal["answer", "state", "refusal"] = "state"
    setup: Callable[[Session], None] | None = None
    rubric: list[str] = field(default_factory=list)
    split: Literal["train", "test"] = "train"
    difficulty: Literal["easy", "medium", "hard"] = "easy"
    expect: list[AnswerPart] = field(default_factory=list)
    reason: str | None = None
    alternatives: list[list[ToolCall]] = field(default_factory=list)
    private: list[str] = field(default_factory=list)
    """For a refusal: what neither the decline's message nor the final reply may reveal, stated in any form
    (a number within 2%, a text case aside): each item a "table.column" of the world (every starting value of
    that column: balances, titles) or a literal value ("7190", "vendor")."""
    user: User | None = None
    """Makes the task a conversation (`mcpworld.worlds.users`): the agent talks to a simulated user with the
    `message_user` tool instead of being handed `instruction` (which is then the user's scenario, shown only when
    no simulator can play the user)."""
    provisional: bool = False
    """A task with no reference yet, judged by its `verify` alone (an imported verifier: AWM's): kept apart, played
    only when asked (`mcpworld run --include-provisional`), until agreeing trajectories give it a reference."""


@dataclass(frozen=True)
class Rule:
    """One rule of a world's policy: its text for the agent, and the cues by which an answer cites it.

    `enforced=False` marks a rule that lives only in the policy: the tools would allow the action, so only
    an agent that read and followed the policy refuses it.
    """

    id: str
    text: str
    cues: tuple[str, ...]
    enforced: bool = True


@dataclass
class World:
    """A world package's single export: metadata, state models, seed, tools and tasks."""

    name: str
    title: str
    description: str
    scenario: str
    base: type[SQLModel]
    seed: Callable[[Session], None]
    tools: list[Callable[..., Any]]
    tasks: list[Task]
    version: str = "1.0.0"
    tags: list[str] = field(default_factory=list)
    clock: datetime = datetime(2026, 6, 1, 12, 0, 0)
    source: str = ""
    rules: list[Rule] = field(default_factory=list)
    free_fields: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Columns (per table) that may differ from the reference: free text the agent words itself, judged by
    the task's own checks. Everything else in the final database must match the reference exactly."""
    names: list[str] = field(default_factory=list)
    """Columns ("table.column") holding names (people's, rooms'): a seed other than 0 renames them
    (variation.py)."""
    codes: list[str] = field(default_factory=list)
    """Columns holding identifiers that are not keys (a tracking number): renamed like keys on other seeds."""
    amounts: list[str] = field(default_factory=list)
    """Numeric columns ("table.column": prices, balances, limits) scaled together on other seeds for an answer
    task whose numbers follow the data (`Number(..., scales=True)`); list them all or none, since a sum or
    difference holds only when every amount in it moves by the same factor (variation.py)."""
    vary: bool = False
    """Whether seeds other than 0 rename ids and names and move dates (variation.py). Off unless a world opts in:
    a tool that holds an id or a date in its code (a prize drawn from ["A1", "A2"]) breaks under a renaming, so
    a world opts in once its references pass and its no-op fails on other seeds (tests/worlds/test_variation.py)."""
    user_tools: list[Callable[..., Any]] = field(default_factory=list)
    """Tools the task's user holds on their own side (dual control: τ² telecom's phone): never listed to the agent;
    called by the simulated user, or over MCP by a call whose `_meta` says role "user" (`ROLE_META_KEY`)."""
    user_guidelines: str = ""
    """How a model plays this world's users (τ² worlds: τ²'s simulation guidelines); empty: the project's own."""
    max_answer_chars: int = 400
    """The longest decline message a world accepts."""
    digest: str = ""
    """A content hash of the world's package, set by the loader (empty for a world built in code)."""
    unknown_tool: Callable[[str], str] | None = None
    """The error text for a call of a tool the world does not have, when it must be its original's (τ² worlds:
    "Error: Tool 'x' not found."); None: the project's, which lists the tools there are."""
    prejudge: Callable[[Any, Any, str | None], Awaitable[None]] | None = None
    """Work a verdict needs that awaits a model (τ²'s NL assertions judged by an LLM): the server awaits
    `prejudge(runtime, episode, answer)` before judging and it leaves what it found on `Episode.prejudged`; an
    LLMError from it is the server's failure (the episode is not judged). Paths without a server skip it."""
    evidence: Callable[[Any, Any, str | None], dict[str, Any]] | None = None
    """Extra verdict evidence: `evidence(runtime, episode, answer)` is called after the standard judging and its
    keys are added to the verdict's evidence (τ² worlds add `tau2: {reward, breakdown}`). A world that sets it has
    every call of its episodes recorded on `Episode.log` (name, arguments, CallResult)."""

    @property
    def policy(self) -> str:
        """The rules as a document the agent is given (and must follow even where the tools would not), each
        with the id a decline cites, and how an episode ends (a submission or a decline)."""
        from mcpworld.worlds.submissions import HOW_TO_SUBMIT

        rules = "\n".join(f"- [{r.id}] {r.text}" for r in self.rules)
        return f"{rules}\n\n{HOW_TO_SUBMIT}" if rules else HOW_TO_SUBMIT

    def rule(self, rule_id: str) -> Rule:
        for r in self.rules:
            if r.id == rule_id:
                return r
        raise KeyError(f"world {self.name}: no rule {rule_id!r}; rules: {', '.join(r.id for r in self.rules)}")
