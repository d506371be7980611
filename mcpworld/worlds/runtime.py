"""A loaded world at run time: seeded templates, per-episode forks, and tool calls in transactions.

Each world's seeded database is built once in memory and serialized; an episode is a fresh in-memory
SQLite connection deserialized from those bytes (tens of microseconds), never a process or a file. Judging an
episode is the `Judge`'s (`verify.py`), which `WorldRuntime.verify` hands it to; the SQLite plumbing (engines,
sessions, the change log) is `database.py`'s.
"""

from __future__ import annotations

import json
import random
import re
import secrets
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError, SAWarning
from sqlmodel import Session

from mcpworld.core.models import TaskInfo, ToolCall, Verdict
from mcpworld.core.tools import ArgumentError, ToolSpec, build_tool, to_jsonable
from mcpworld.core.workers import id_tag
from mcpworld.worlds.database import (
    CHANGES_TABLE,
    WorldSession,
    activate,
    engine_for,
    hold_rows,
    install_change_log,
    key_sql,
    shared_engine,
)
from mcpworld.worlds.diff import Row, StateDiff, TableDiff, diff_rows, row_key
from mcpworld.worlds.submissions import (
    DECLINE,
    SUBMISSION_TOOLS,
    SUBMIT_ANSWER,
    Submission,
    submit,
    task_note,
    tool_definitions,
)
from mcpworld.worlds.users import (
    GREETING,
    GUIDELINES,
    MESSAGE_USER,
    Conversation,
    Mode,
    Turn,
    User,
    UserModel,
    mode_for,
    viewed_turn,
)
from mcpworld.worlds.users import tool_definition as message_user_definition
from mcpworld.worlds.variation import IDENTITY, View, draw_view
from mcpworld.worlds.verify import VERDICT_MODE, Judge
from mcpworld.worlds.world import ON_CLOSE, RAW_SPEC, KeptError, Task, ToolError, World, first_line


def quiet_identity_warning() -> None:
    """A tool that adds a row under a key already held gets SQLAlchemy's identity warning on stderr and then the
    IntegrityError the agent is told about (`_run`): the warning says nothing more, only to the console. Set
    when a runtime is made (a filter set at import is lost where warnings are reset between phases, as pytest does)."""
    warnings.filterwarnings("ignore", message="(?s).*New instance .* conflicts with persistent instance",
                            category=SAWarning)

MAX_VIEWS = 1024  # cached seeds' views and their templates, per (task, seed)


class UnknownTask(KeyError):
    def __str__(self) -> str:
        return f"unknown task {self.args[0]!r}"


@dataclass
class Template:
    """Serialized database bytes for one starting state, plus its rows (read once, for diffs)."""

    data: bytes
    _rows: dict[str, dict[str, Row]] | None = None


@dataclass
class Episode:
    """One isolated run: a private in-memory database, its seed and clock, and which tables it wrote."""

    id: str
    task: Task | None
    seed: int
    template: Template
    conn: sqlite3.Connection
    rng: random.Random
    engine: Engine | None = None  # its own engine; None: the world's shared engine, routed by `_activate`
    created: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    calls: int = 0
    session: WorldSession | None = None  # one per episode: its identity map spares repeated reads a query
    changes_seen: int = 0  # the connection's write counter when its session's rows were last known current
    generated: dict[str, str] = field(default_factory=dict)  # ids `new_id` made in this episode -> prefix
    submission: Submission | None = None  # the episode's one submit_answer or decline
    view: View = IDENTITY  # how its seed renames the data (variation.py); undone when it is judged
    origin: Template | None = None  # the seed-0 template a viewed episode is judged against
    log: list[tuple[str, dict[str, Any], CallResult]] | None = None  # every call, for worlds with `evidence`
    conversation: Conversation | None = None  # a conversational task's messages with its user (users.py)
    failed: str | None = None  # the server failed this episode (its user simulator): never judged
    prejudged: dict[str, Any] = field(default_factory=dict)  # what `World.prejudge` found (a model's judgement)
    _serving: int = 0  # calls in progress (a blocking one may outlive its caller's timeout)
    _serving_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def busy(self) -> bool:
        """Whether a call is running on this episode: the episode table never evicts a busy episode."""
        return self._serving > 0

    @contextmanager
    def serving(self) -> Iterator[None]:
        """Mark the episode busy for the block (nestable, any thread)."""
        with self._serving_lock:
            self._serving += 1
        try:
            yield
        finally:
            with self._serving_lock:
                self._serving -= 1

    def close(self) -> None:
        if self.session is not None:
            for hook in self.session.info.pop(ON_CLOSE, []):
                hook()
            with activate(self.conn):
                self.session.close()
        if self.engine is not None:
            self.engine.dispose()
        self.conn.close()


@dataclass
class CallResult:
    """A tool call's outcome: a JSON value, or an error message (and the transaction rolled back)."""

    value: Any = None
    error: str | None = None


class WorldRuntime:
    """Everything the server needs about one world. Tools and tasks are read when the world is loaded; its
    templates (seeded databases) and reference end states are built on first use, so a server with
    hundreds of worlds installed starts without running any world's seed."""

    def __init__(self, world: World):
        quiet_identity_warning()
        self.world = world
        self.tools: dict[str, ToolSpec] = {}
        for fn in world.tools:
            spec = getattr(fn, RAW_SPEC, None) or build_tool(fn)  # a raw tool (world.raw_tool) brings its own
            if spec.name in self.tools:
                raise ValueError(f"world {world.name}: duplicate tool name {spec.name!r}")
            if spec.name in SUBMISSION_TOOLS:
                raise ValueError(f"world {world.name}: tool name {spec.name!r} is the runtime's own (submissions)")
            self.tools[spec.name] = spec
        self.user_tools: dict[str, ToolSpec] = {}  # the user's own side (dual control): called with role "user"
        for fn in world.user_tools:
            spec = getattr(fn, RAW_SPEC, None) or build_tool(fn)
            if spec.name in self.user_tools or spec.name in self.tools:
                raise ValueError(f"world {world.name}: user tool {spec.name!r} is named twice or like an agent tool")
            self.user_tools[spec.name] = spec
        self.tasks: dict[str, Task] = {}
        for task in world.tasks:
            if task.id in self.tasks:
                raise ValueError(f"world {world.name}: duplicate task id {task.id!r}")
            self.tasks[task.id] = task
        self.metadata = world.base.metadata
        self.primary_keys: dict[str, tuple[str, ...]] = {
            name: tuple(c.name for c in table.primary_key.columns) for name, table in self.metadata.tables.items()
        }
        self._templates: dict[str | None, Template] = {}
        self._failed: dict[str | None, BaseException] = {}  # a seed or setup that raised: raised again, not rerun
        self._template_lock = threading.RLock()  # one build per template, whichever thread asks first
        self._views: dict[tuple[str | None, int], tuple[View, Template]] = {}  # (template key, seed) -> its view
        self._view_sources: dict[str | None, tuple[list[str], list[str], str]] = {}  # template key -> ids, names, texts
        self.engine = shared_engine()
        self._user_model: UserModel | None = None
        self._user_scripts: dict[str, tuple[Turn, ...]] = {}
        self.judge = Judge(self)  # how its episodes are judged (verify.py)

    # -- templates -------------------------------------------------------------------------------------

    def new_session(self, engine: Engine, rng: random.Random,
                    generated: dict[str, str] | None = None, view: View = IDENTITY) -> WorldSession:
        """A session on `engine` with the episode's clock, generator and generated-id record (what tools read)."""
        session = WorldSession(engine, expire_on_commit=False)
        session.info["now"] = view.moment(self.world.clock)
        session.info["rng"] = rng
        session.info["generated"] = generated if generated is not None else {}
        return session

    def template(self, task: Task | None) -> Template:
        """The starting state for `task` (the seeded world, plus the task's setup), built once, on first use.

        Thread-safe: concurrent first episodes wait for one build. A seed or setup that raises raises the same
        error on every later use (the package is not re-imported until the server restarts)."""
        key = _template_key(task)
        made = self._templates.get(key)
        if made is not None:
            return made
        with self._template_lock:
            if key in self._templates:
                return self._templates[key]
            if key in self._failed:
                raise self._failed[key].with_traceback(None)
            try:
                made = self._build_template(task if key is not None else None)
            except BaseException as exc:
                if not isinstance(exc, (KeyboardInterrupt, GeneratorExit, MemoryError)):
                    self._failed[key] = exc
                raise
            self._templates[key] = made
            return made

    def has_template(self, task_id: str | None) -> bool:
        """Whether the template an episode of `task_id` starts from is built (or failed): starting one is fast."""
        key = _template_key(self.tasks.get(task_id) if task_id is not None else None)
        return key in self._templates or key in self._failed

    def template_error(self, task_id: str | None) -> str | None:
        """Why building the template of `task_id` failed (type and first line), or None if it did not (yet)."""
        exc = self._failed.get(_template_key(self.tasks.get(task_id) if task_id is not None else None))
        return None if exc is None else f"{type(exc).__name__}: {first_line(exc) or 'no message'}"

    def _build_template(self, task: Task | None) -> Template:
        setup = task.setup if task is not None else None
        conn = self.open_connection(self.template(None).data if setup is not None else None)
        engine = engine_for(conn)
        try:
            if setup is None:
                self.metadata.create_all(engine)
            with self.new_session(engine, random.Random(0)) as db:
                (self.world.seed if setup is None else setup)(db)
                db.commit()
            if setup is None:
                install_change_log(conn, self.primary_keys)
            else:
                conn.execute(f"DELETE FROM {CHANGES_TABLE}")
                conn.commit()
            return Template(conn.serialize())
        finally:
            engine.dispose()
            conn.close()

    @staticmethod
    def open_connection(data: bytes | None = None) -> sqlite3.Connection:
        """A private in-memory SQLite connection, loaded from serialized `data` (a template) when given."""
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        if data is not None:
            conn.deserialize(data)
        conn.execute("PRAGMA foreign_keys=ON")
        # SQLAlchemy registers REGEXP on connections it opens itself; episodes get theirs here (column.regexp_match)
        conn.create_function("regexp", 2, _regexp, deterministic=True)
        return conn

    # -- episodes --------------------------------------------------------------------------------------

    def fork(self, task_id: str | None = None, seed: int = 0, *, vary: bool = True) -> Episode:
        """A new isolated episode for `task_id` (or the plain seeded world when None), on its seed's data
        (`vary=False`: on seed 0's data, with the seed's generator: how references are played)."""
        task = None
        if task_id is not None:
            task = self.tasks.get(task_id)
            if task is None:
                raise UnknownTask(task_id)
        origin = self.template(task)
        view, template = self.viewed(task, seed) if vary else (IDENTITY, origin)
        return Episode(
            id="e-" + id_tag() + secrets.token_hex(8),  # the tag names the worker process (--workers)
            task=task,
            seed=seed,
            template=template,
            conn=self.open_connection(template.data),
            rng=random.Random(seed),
            view=view,
            origin=origin,
            log=[] if self.world.evidence is not None else None,
        )

    def view(self, task: Task | None, seed: int) -> View:
        """How `seed` renames the data of `task` (identity for seed 0, or a world that does not vary)."""
        return self.viewed(task, seed)[0]

    def viewed(self, task: Task | None, seed: int) -> tuple[View, Template]:
        """`seed`'s view of `task`'s starting state, and the template it makes (built once, kept for a while)."""
        origin = self.template(task)
        if seed == 0 or not self.world.vary:
            return IDENTITY, origin
        amounts = self.scaled_amounts(task)
        key = (_template_key(task), seed, bool(amounts))
        made = self._views.get(key)
        if made is None:
            made = self._build_view(task, seed, origin, amounts)
            with self._template_lock:
                if len(self._views) >= MAX_VIEWS:  # bounded: RL draws a new seed per sample
                    self._views.pop(next(iter(self._views)))
                self._views[key] = made
        return made

    def scaled_amounts(self, task: Task | None) -> list[tuple[str, str]]:
        """The amount columns a seed scales for `task`: the world's, when an answer of the task follows them
        (`Number.scales`); none otherwise (variation.py)."""
        from mcpworld.worlds.answers import scales

        if task is None or not any(scales(p) for p in task.expect):
            return []
        return [(table, column) for ref in self.world.amounts for table, _, column in [ref.partition(".")]]

    def _view_inputs(self, task: Task | None, origin: Template) -> tuple[list[str], list[str], str]:
        """What every seed's view of a template is drawn from (its ids, people's names, and every text no invented
        value may occur in): the same for all seeds, so read once per template."""
        key = _template_key(task)
        made = self._view_sources.get(key)
        if made is None:
            rows = self.initial_rows(origin)
            ids = [v for table, pk in self.primary_keys.items() for row in rows[table].values()
                   for v in (row[c] for c in pk) if isinstance(v, str)]
            ids += [str(row[column]) for ref in self.world.codes for table, _, column in [ref.partition(".")]
                    for row in rows.get(table, {}).values() if row.get(column)]
            names = [str(row[column]) for ref in self.world.names for table, _, column in [ref.partition(".")]
                     for row in rows.get(table, {}).values() if row.get(column)]
            texts = [self.world.policy, *(t.instruction for t in self.world.tasks),
                     *(t.answer or "" for t in self.world.tasks)]
            texts += [json.dumps([c.arguments for t in self.world.tasks for c in t.solution], default=str)]
            made = self._view_sources[key] = (ids, names, json.dumps([texts, rows], default=str, ensure_ascii=False))
        return made

    def _build_view(self, task: Task | None, seed: int, origin: Template,
                    amounts: list[tuple[str, str]]) -> tuple[View, Template]:
        view = draw_view(seed, self.world.name, *self._view_inputs(task, origin), amounts=amounts)
        conn = self.open_connection(origin.data)
        try:
            view.rewrite(conn, self.metadata.tables)
            conn.execute(f"DELETE FROM {CHANGES_TABLE}")
            return view, Template(conn.serialize())
        finally:
            conn.close()

    def call(self, episode: Episode, name: str, arguments: dict[str, Any] | None,
             role: str = "assistant") -> CallResult:
        """Run one tool in its own transaction: any error rolls back and comes back as a message. The submission
        tools (`submit_answer`, `decline`) record on the episode instead and touch no table. `role` "user" calls
        the user's own tools (`World.user_tools`), and only those."""
        result = self._call(episode, name, arguments, role)
        if episode.log is not None:  # a world with extra evidence judges the calls themselves (τ²: ACTION)
            episode.log.append((name, dict(arguments or {}), result))
        return result

    def step(self, episode: Episode, call: ToolCall) -> CallResult:
        """One step of a solution or a trajectory, on the side that makes it (`ToolCall.role`)."""
        return self.call(episode, call.name, call.arguments, call.role)

    def _call(self, episode: Episode, name: str, arguments: dict[str, Any] | None, role: str) -> CallResult:
        if role == "user":
            spec = self.user_tools.get(name)
            if spec is None:
                names = ", ".join(sorted(self.user_tools)) or "none"
                return CallResult(error=self.world.unknown_tool(name) if self.world.unknown_tool is not None
                                  else f"unknown user tool {name!r}; the user's tools: {names}")
        else:
            spec = self.tools.get(name)
        if spec is None:
            if name == MESSAGE_USER:  # the user answers through the server (users.py), which may await a model
                return CallResult(error=f"{MESSAGE_USER} is answered by the world's server, not in-process")
            if name in SUBMISSION_TOOLS:
                episode.last_used = time.monotonic()
                episode.calls += 1
                value, error = submit(episode, self.world, name, arguments or {})
                return CallResult(value=value, error=error)
            names = sorted([*self.tools, *SUBMISSION_TOOLS])
            if self.world.unknown_tool is not None:  # a world that answers in its original's words (τ²)
                return CallResult(error=self.world.unknown_tool(name))
            return CallResult(error=f"unknown tool {name!r}; available: {', '.join(names)}")
        try:  # a raw tool (world.raw_tool) gets the arguments as sent, unvalidated
            kwargs = {"arguments": dict(arguments or {})} if hasattr(spec.fn, RAW_SPEC) else spec.parse(arguments)
        except ArgumentError as exc:
            return CallResult(error=str(exc))
        episode.last_used = time.monotonic()
        episode.calls += 1
        if episode.session is None:
            episode.session = self.new_session(episode.engine or self.engine, episode.rng, episode.generated,
                                               episode.view)
            hold_rows(episode.session)
        db = episode.session
        _expire_if_written(episode, db)  # written beside this session since (an audit's edit): reload
        with episode.serving(), activate(episode.conn):
            try:
                return self._run(spec, db, name, kwargs)
            finally:
                _expire_if_written(episode, db)  # it wrote: triggers or cascades may have changed more rows

    def _run(self, spec: ToolSpec, db: Session, name: str, kwargs: dict[str, Any]) -> CallResult:
        try:
            value = to_jsonable(spec.fn(db, **kwargs))
            if db.in_transaction() or db.new or db.dirty or db.deleted:  # else nothing was read or written: no
                db.commit()                                              # query ran (every row held), no commit
        except ToolError as exc:
            db.rollback()
            return CallResult(error=str(exc))
        except KeptError as exc:  # an error whose writes stand (τ²'s tools keep partial writes): commit them
            if db.in_transaction() or db.new or db.dirty or db.deleted:
                db.commit()
            return CallResult(error=str(exc))
        except IntegrityError as exc:  # a key taken, a required value missing: say which rule, not SQLAlchemy's dump
            db.rollback()
            rule = first_line(exc.orig) if exc.orig is not None else first_line(exc)
            return CallResult(error=f"{name} refused: the write breaks a rule of the data ({rule}); nothing was "
                                    "changed")
        except Exception as exc:  # a bug in the tool
            db.rollback()
            return CallResult(error=f"{name} failed: {type(exc).__name__}: {first_line(exc)}")
        except BaseException as exc:  # SystemExit, KeyboardInterrupt...: tool code must not stop the server
            if isinstance(exc, GeneratorExit):
                raise
            db.rollback()
            return CallResult(error=f"{name} failed: {type(exc).__name__} raised by the tool "
                                    f"({first_line(exc) or 'no message'}); the call was rolled back")
        return CallResult(value=value)

    # -- state ---------------------------------------------------------------------------------------------

    def read_rows(self, conn: sqlite3.Connection, table: str, keys: list[str] | None = None) -> dict[str, Row]:
        """Rows of `table` by key string: all of them, or only those whose key is in `keys`."""
        pk = self.primary_keys[table]
        sql = f'SELECT * FROM "{table}"'
        params: tuple[str, ...] = ()
        if keys is not None:
            ref = f'"{table}"'
            sql += f" WHERE {key_sql(ref, pk)} IN (SELECT value FROM json_each(?))"
            params = (json.dumps(keys),)
        cur = conn.execute(sql, params)
        cols = [d[0] for d in cur.description]
        return {row_key(r, pk): r for r in (dict(zip(cols, values)) for values in cur)}

    def initial_rows(self, template: Template) -> dict[str, dict[str, Row]]:
        if template._rows is None:
            conn = self.open_connection(template.data)
            template._rows = {t: self.read_rows(conn, t) for t in self.metadata.tables}
            conn.close()
        return template._rows

    def diff(self, episode: Episode) -> StateDiff:
        """Row-level changes since the episode started: only rows the change log names are read."""
        changed: dict[str, list[str]] = {}
        for table, key in episode.conn.execute(f"SELECT tbl, pk FROM {CHANGES_TABLE}"):
            changed.setdefault(table, []).append(key)
        tables = {t: TableDiff() for t in self.metadata.tables}
        if changed:
            before = self.initial_rows(episode.template)
            for table, keys in changed.items():
                old = {k: before[table][k] for k in keys if k in before[table]}
                tables[table] = diff_rows(old, self.read_rows(episode.conn, table, keys))
        return StateDiff(tables, self.primary_keys)

    @cached_property
    def environment(self) -> dict[str, str]:
        """Which build of which world judges its episodes: recorded in every trajectory (`mcpworld rescore`)."""
        from mcpworld import __version__

        return {"world": self.world.name, "version": self.world.version, "digest": self.world.digest,
                "mcpworld": __version__, "verdict": VERDICT_MODE}

    @cached_property
    def listed_tools(self) -> list[dict[str, Any]]:
        """Every tool an agent of this world is given, as MCP definitions (name, title, description, inputSchema,
        annotations): the domain tools, then `submit_answer` and `decline`, and `message_user` where a task is a
        conversation (users.py). Every face lists these."""
        domain = [spec.mcp_tool().model_dump(by_alias=True, exclude_none=True) for spec in self.tools.values()]
        talking = any(self.conversation_mode(t) in ("scripted", "model") for t in self.world.tasks)
        talk = [message_user_definition()] if talking else []
        return domain + tool_definitions(self.world) + talk

    @cached_property
    def offered_user_tools(self) -> list[dict[str, Any]]:
        """The user's own tools (dual control) as OpenAI function definitions, offered to a user model."""
        return [{"type": "function", "function": {"name": spec.name, "description": spec.description,
                                                  "parameters": spec.input_schema}}
                for spec in self.user_tools.values()]

    @property
    def user_model(self) -> UserModel | None:
        """The model that plays conversational tasks' unscripted users (the server's; None: they play `direct`)."""
        return self._user_model

    @user_model.setter
    def user_model(self, model: UserModel | None) -> None:
        self._user_model = model
        self.__dict__.pop("listed_tools", None)  # message_user is listed once a task can be a conversation

    def open_conversation(self, episode: Episode) -> Conversation | None:
        """The episode's conversation with its task's user, on its seed's data, opened by τ²'s greeting (None for
        a task without one, or played `direct`). The user's first message comes from `users.user_says`."""
        task = episode.task
        mode = self.conversation_mode(task)
        if task is None or task.user is None or mode in (None, "direct"):
            return None
        view, user = episode.view, task.user
        turns = self._user_scripts.get(task.id, user.turns)
        viewed = User(instructions=view.text(user.instructions), persona=view.text(user.persona),
                      turns=tuple(viewed_turn(t, view.text, view.value) for t in turns))
        guidelines = self.world.user_guidelines or GUIDELINES
        episode.conversation = Conversation(user=viewed, mode=mode, guidelines=guidelines,
                                            messages=[{"role": "assistant", "content": GREETING}])
        return episode.conversation

    def conversation_mode(self, task: Task | None) -> Mode | None:
        """How `task`'s user is played here: scripted, by the user model, or `direct` (no conversation: the
        instruction is the user's scenario); None for a task without a user."""
        if task is not None and task.user is not None and task.id in self._user_scripts:
            return "scripted"
        return mode_for(task.user if task is not None else None, self.user_model)

    @property
    def user_scripts(self) -> dict[str, tuple[Turn, ...]]:
        """Scripted users by task id, from a file the server was given (`MCPWORLD_USER_SCRIPT`): they play those
        tasks' users instead of the model (users.load_scripts)."""
        return self._user_scripts

    @user_scripts.setter
    def user_scripts(self, scripts: dict[str, tuple[Turn, ...]]) -> None:
        self._user_scripts = dict(scripts)
        self.__dict__.pop("listed_tools", None)  # a scripted task is a conversation: message_user is listed

    def column_values(self, template: Template, ref: str) -> list[str]:
        """Every distinct value of "table.column" in a starting state, as strings (an answer's wrong candidates)."""
        rows = self.initial_rows(template)
        table, _, column = ref.partition(".")
        if table not in rows:
            raise KeyError(f"unknown table {table!r} in {ref!r}")
        return sorted({str(r[column]) for r in rows[table].values() if r.get(column) is not None})

    def instruction(self, task: Task, seed: int = 0) -> str:
        """The instruction as every agent-facing surface gives it: the task's words on `seed`'s data, and for a
        question how to submit its answer and of what type (never a value)."""
        mode = self.conversation_mode(task)
        if mode == "scripted":
            words = self.view(task, seed).text(task.user.turns[0])  # type: ignore[union-attr]
        elif mode == "model":  # the user's scenario is the simulator's, never the agent's
            words = ("A user is waiting for you: their first message comes when the episode starts. Talk to them "
                     f"with {MESSAGE_USER}.")
        else:
            words = self.view(task, seed).text(task.instruction)
        note = task_note(task)
        return f"{words}\n\n{note}" if note else words

    def solution(self, task: Task, seed: int = 0) -> list[ToolCall]:
        """The reference solution an oracle plays on `seed`'s data: the task's calls, then its submission (the
        typed answer, or a decline citing the task's rule with its reference answer as the message)."""
        from mcpworld.worlds.answers import reference_submission

        view = self.view(task, seed)
        calls = [ToolCall(name=c.name, arguments=view.value(c.arguments), role=c.role) for c in task.solution]
        if task.expect:
            answer = view.value(reference_submission(list(task.expect), view.amount))
            calls.append(ToolCall(name=SUBMIT_ANSWER, arguments={"answer": answer}))
        elif task.kind == "refusal" and task.reason:
            message = view.text(task.answer or "")
            calls.append(ToolCall(name=DECLINE, arguments={"rule": task.reason, "message": message}))
        return calls

    def verify(self, episode: Episode, answer: str | None) -> Verdict:
        """Judge the episode (`Judge.verify`): the reference's final state, the typed answer or refusal, the free
        text, then the task's checks. A raising verifier fails with its error as evidence."""
        if episode.task is None:
            raise UnknownTask("(none: this episode was started without a task)")
        return self.judge.verify(episode, answer)

    def table_counts(self, episode: Episode) -> dict[str, int]:
        return {t: episode.conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in self.metadata.tables}

    def table_rows(self, episode: Episode, table: str, limit: int = 100) -> list[Row]:
        if table not in self.metadata.tables:
            raise KeyError(f"unknown table {table!r}; tables: {', '.join(sorted(self.metadata.tables))}")
        cur = episode.conn.execute(f'SELECT * FROM "{table}" LIMIT ?', (max(0, limit),))
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur]

    @cached_property
    def schema_sql(self) -> str:
        conn = self.open_connection(self.template(None).data)
        ddl = [r[0] + ";" for r in conn.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE '_mcpworld%' ORDER BY name")]
        conn.close()
        return "\n\n".join(ddl)

    def task_info(self, task: Task, reveal: bool = False, seed: int = 0) -> TaskInfo:
        """What a client may know about a task on `seed`'s data; its kind and reference (solution, answer,
        rubric) only when `reveal`."""
        info = TaskInfo(id=task.id, instruction=self.instruction(task, seed), split=task.split,
                        difficulty=task.difficulty, seed=seed, provisional=task.provisional)
        if reveal:  # the kind too: knowing in advance that a task is a refusal is half of a free reward
            answer = None if task.answer is None else self.view(task, seed).text(task.answer)
            info.kind, info.solution, info.answer = task.kind, self.solution(task, seed), answer
            info.rubric = list(task.rubric)
        return info

    @property
    def table_names(self) -> list[str]:
        return sorted(self.metadata.tables)


def _expire_if_written(episode: Episode, db: Session) -> None:
    """Expire every row the session holds when the episode's database was written since they were current."""
    total = episode.conn.total_changes
    if total != episode.changes_seen:
        db.expire_all()
        episode.changes_seen = total


def _template_key(task: Task | None) -> str | None:
    """Which template an episode of `task` starts from: its own when it has a setup, else the seeded world's."""
    return task.id if task is not None and task.setup is not None else None


def _regexp(pattern: str | None, value: str | None) -> bool | None:
    return None if pattern is None or value is None else re.search(pattern, str(value)) is not None
