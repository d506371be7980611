"""`mcpworld world validate`: every problem of a world package, each with its file and field.

A world is valid when it imports, its tools describe themselves, its seed satisfies its constraints, and
every task's reference solution runs, passes its verifier, while a no-op episode fails it.
"""

from __future__ import annotations

import inspect
import os
import re
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpworld.core.models import Check, Verdict
from mcpworld.core.tools import ArgumentError, build_tool
from mcpworld.worlds.loader import WorldLoadError, load_world
from mcpworld.worlds.runtime import CallResult, Episode, WorldRuntime
from mcpworld.worlds.world import Task, World

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{1,62}$")
CALL_LIMIT_S = float(os.environ.get("MCPWORLD_VALIDATE_CALL_LIMIT_S", "20"))  # per tool call / verifier run


@dataclass(frozen=True)
class Problem:
    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.message}"


def _file_of(obj: object, fallback: str) -> str:
    try:
        return inspect.getsourcefile(obj) or fallback  # type: ignore[arg-type]
    except TypeError:
        return fallback


def _metadata_problems(world: World, init: str) -> list[Problem]:
    out = []
    if not NAME_RE.match(world.name):
        out.append(Problem(init, "name", f"{world.name!r} must be lowercase letters, digits and '-'"))
    for field in ("title", "description", "scenario", "version"):
        if not str(getattr(world, field)).strip():
            out.append(Problem(init, field, "must not be empty"))
    if len(world.description) > 100:
        out.append(Problem(init, "description", f"{len(world.description)} characters; registries allow 100"))
    return out


def _definition_problems(world: World, init: str) -> list[Problem]:
    out = []
    names = []
    for fn in world.tools:
        try:
            names.append(build_tool(fn).name)
        except (TypeError, NameError) as exc:
            out.append(Problem(_file_of(fn, init), f"tool {getattr(fn, '__name__', fn)}", str(exc)))
    out += [Problem(init, "tools", f"duplicate tool name {n!r}") for n, k in Counter(names).items() if k > 1]
    ids = Counter(t.id for t in world.tasks)
    out += [Problem(_file_of(world.tasks[0].verify, init), "tasks", f"duplicate task id {i!r}")
            for i, k in ids.items() if k > 1]
    if not world.tasks:
        out.append(Problem(init, "tasks", "a world needs at least one task"))
    return out


def _rule_problems(world: World, init: str) -> list[Problem]:
    """Rules need ids, text and cues, and no cue of one rule may also cite another (or refusals can't be told apart)."""
    out = [Problem(init, "rules", f"duplicate rule id {i!r}") for i, k in Counter(r.id for r in world.rules).items()
           if k > 1]
    for rule in world.rules:
        if not rule.text.strip() or not rule.cues:
            out.append(Problem(init, f"rule {rule.id}", "needs text and at least one cue"))
        for other in world.rules:
            if other.id == rule.id:
                continue
            for cue in rule.cues:
                clash = [c for c in other.cues if re.search(rf"(?<!\w){re.escape(c.lower())}(?!\w)", cue.lower())]
                if clash:
                    out.append(Problem(init, f"rule {rule.id}", f"cue {cue!r} also cites rule {other.id} "
                                                                f"(its cue {clash[0]!r}): make the cues distinct"))
    return out


def unstated_parts(task: Task) -> list[str]:
    """The expected values the reference's own prose `answer` does not state, where that can be read reliably
    (numbers and counts in any written form, dates, entities by any alias).

    Why: the reference submission is made from `expect`, so it passes whatever `expect` says. A task whose author
    (or an LLM) wrote one value in the answer and another in `expect` is wrong, and this is where it shows. It
    only ever drops a task; no reward reads prose.
    """
    from mcpworld.worlds.answers import Count, DateAnswer, Entities, Number
    from mcpworld.worlds.words import date_forms, numbers_in

    text = task.answer or ""
    if not text.strip():
        return []
    low = " ".join(text.casefold().split())
    out = []
    for part in task.expect:
        if isinstance(part, (Count, Number)):
            tolerance = part.tolerance if isinstance(part, Number) else 0.0
            none = part.value == 0 and re.search(r"\b(?:no|none)\b", low) is not None  # "there are no free seats"
            if not none and not any(abs(n - part.value) <= tolerance + 1e-9 for n in numbers_in(text)):
                out.append(f"{part.value:g}")
        elif isinstance(part, DateAnswer):
            if not any(f in low for f in date_forms(part.value)):
                out.append(part.value.isoformat())
        elif isinstance(part, Entities):
            for aliases in part.expected:
                if not any(" ".join(a.casefold().split()) in low for a in aliases):
                    out.append(aliases[0])
    return out


def _kind_problems(world: World, task: Task, where: str, field: str) -> list[Problem]:
    out = []
    if task.kind == "answer" and not task.expect:
        out.append(Problem(where, f"{field}: expect", "an answer task declares its typed answer (Count, Number, "
                                                      "DateAnswer, TimeAnswer, YesNo, Entities)"))
    if task.kind == "refusal":
        known = {r.id for r in world.rules}
        if task.reason not in known:
            out.append(Problem(where, f"{field}: reason", f"a refusal task names the rule it must cite; "
                                                          f"{task.reason!r} is not one of: {', '.join(sorted(known))}"))
    return out


def task_problems(runtime: WorldRuntime, task: Task, init: str) -> list[Problem]:
    where = _file_of(task.verify, init) if task.verify is not None else init
    field = f"task {task.id}"
    out = _kind_problems(runtime.world, task, where, field)
    for i, step in enumerate(task.solution):
        spec = (runtime.user_tools if step.role == "user" else runtime.tools).get(step.name)
        if spec is None:
            side = "user tool" if step.role == "user" else "tool"
            out.append(Problem(where, f"{field}: solution[{i}]", f"unknown {side} {step.name!r}"))
            continue
        try:
            spec.parse(step.arguments)
        except ArgumentError as exc:
            out.append(Problem(where, f"{field}: solution[{i}]", str(exc)))
    if out:
        return out
    if task.provisional:  # no reference yet: only its verifier, which a no-op must fail
        return _provisional_problems(runtime, task, where, field)
    try:
        if task.kind == "refusal" and not runtime.judge.reference_states(task)[0].is_empty:
            out.append(Problem(where, f"{field}: solution", "a refusal task's reference must leave the state "
                                                            "untouched (its forbidden call must fail, or be left out)"))
        episode = runtime.fork(task.id)
    except Exception as exc:
        return [Problem(where, f"{field}: setup", f"{type(exc).__name__}: {exc}")]
    for i, step in enumerate(runtime.solution(task)):
        result = runtime.step(episode, step)
        if result.error is not None and (task.kind != "refusal" or i >= len(task.solution)):
            out.append(Problem(where, f"{field}: solution[{i}] ({step.name})", f"failed: {result.error}"))
    verdict = runtime.verify(episode, task.answer)
    episode.close()
    unstated = unstated_parts(task)
    if unstated:
        out.append(Problem(where, f"{field}: verify", f"the reference solution fails: its answer {task.answer!r} "
                                                      f"does not state the expected {', '.join(unstated)}"))
    if not verdict.passed:
        failed = "; ".join(f"{c.name}{' (' + c.detail + ')' if c.detail else ''}" for c in verdict.checks
                           if not c.passed)
        out.append(Problem(where, f"{field}: verify", f"the reference solution fails its verifier: {failed}"))
    noop = runtime.fork(task.id)
    if runtime.verify(noop, None).passed:
        out.append(Problem(where, f"{field}: verify", "a no-op episode passes: the verifier checks nothing the "
                                                      "task asks for (or the target already holds)"))
    noop.close()
    if runtime.world.vary and not out:
        out += _on_another_seed(runtime, task, where, field)
    return out


def _provisional_problems(runtime: WorldRuntime, task: Task, where: str, field: str) -> list[Problem]:
    if task.verify is None:
        return [Problem(where, f"{field}: verify", "a provisional task needs its own verifier (it has no reference)")]
    noop = runtime.fork(task.id)
    try:
        if runtime.verify(noop, None).passed:
            return [Problem(where, f"{field}: verify", "a no-op episode passes: the verifier checks nothing the task "
                                                       "asks for (or the target already holds)")]
    finally:
        noop.close()
    return []


VARIED_SEED = 1  # where a world that varies its data is checked to keep each task's meaning


def _on_another_seed(runtime: WorldRuntime, task: Task, where: str, field: str) -> list[Problem]:
    """A world that opts in to `vary` must keep each task's meaning on another seed: the seed's reference passes
    and its no-op fails there (a tool that holds an id or a date in its code breaks under the renaming)."""
    answer = runtime.task_info(task, reveal=True, seed=VARIED_SEED).answer
    if not runtime.judge.play(task.id, answer, runtime.solution(task, VARIED_SEED), seed=VARIED_SEED).passed:
        return [Problem(where, f"{field}: vary", f"the reference fails on seed {VARIED_SEED}, whose data renames "
                                                 "ids, names and dates: does a tool hold an id or a date in its "
                                                 "code? Read it from the data, or set vary=False")]
    if runtime.judge.play(task.id, None, [], seed=VARIED_SEED).passed:
        return [Problem(where, f"{field}: vary", f"a no-op episode passes on seed {VARIED_SEED}")]
    return []


class CallTimeLimit(BaseException):
    """A tool call or verifier ran past validation's time limit (a BaseException: `except Exception` can't eat it)."""


_armed = threading.local()


@contextmanager
def _time_limit(seconds: float, conn: Any = None) -> Iterator[None]:
    """Stop the block after `seconds`: SIGALRM raises CallTimeLimit in Python code (main thread only), and a
    cancelled-and-joined timer interrupts a runaway SQL statement on `conn`. No thread outlives the block.

    Off the main thread (or where SIGALRM is missing, or another alarm is pending) only the SQL part applies.
    Nested uses keep the outer alarm and add their own SQL timer (each episode has its own connection).
    """
    if seconds <= 0:
        yield
        return
    outer = getattr(_armed, "on", False)
    use_alarm = (not outer and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
                 and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0))
    state = {"live": True}

    def on_alarm(signum: int, frame: Any) -> None:
        if state["live"]:
            raise CallTimeLimit(f"did not finish within {seconds:g}s (validation's per-call limit, "
                                "MCPWORLD_VALIDATE_CALL_LIMIT_S)")

    timer = threading.Timer(seconds, conn.interrupt) if conn is not None and hasattr(conn, "interrupt") else None
    previous = signal.signal(signal.SIGALRM, on_alarm) if use_alarm else None
    _armed.on = True
    try:
        if timer is not None:
            timer.daemon = True
            timer.start()
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)  # re-fires if the first one is swallowed
        yield
    finally:
        state["live"] = False
        _armed.on = outer
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
            signal.signal(signal.SIGALRM, previous)
        if timer is not None:
            timer.cancel()
            timer.join()


class _LimitedRuntime(WorldRuntime):
    """The runtime validation uses: each tool call and verifier run is cut off after `limit_s` seconds."""

    limit_s: float = CALL_LIMIT_S

    def call(self, episode: Episode, name: str, arguments: dict[str, Any] | None,
             role: str = "assistant") -> CallResult:
        try:
            with _time_limit(self.limit_s, episode.conn):
                return super().call(episode, name, arguments, role)
        except CallTimeLimit as exc:  # fired outside the tool's own code (the tool's is contained by `call`)
            return CallResult(error=f"{name} {exc}")

    def verify(self, episode: Episode, answer: str | None) -> Verdict:
        try:
            with _time_limit(self.limit_s, episode.conn):
                return super().verify(episode, answer)
        except CallTimeLimit as exc:
            return Verdict(passed=False, score=0.0, checks=[Check(name="verifier ran", passed=False,
                                                                  detail=f"the verifier {exc}")])


def validate(path: str | Path) -> tuple[World | None, list[Problem]]:
    """Load and check the world at `path`; return it (when it loads) and every problem found."""
    init = str(Path(path) / "__init__.py") if Path(path).is_dir() else str(path)
    try:
        world = load_world(path)
    except WorldLoadError as exc:
        return None, [Problem(init, "import", str(exc))]
    problems = _metadata_problems(world, init) + _definition_problems(world, init) + _rule_problems(world, init)
    if problems:
        return world, problems
    runtime = _LimitedRuntime(world)
    try:
        runtime.template(None)
    except (Exception, SystemExit) as exc:  # a seed that exits is a broken seed, not a passing validation
        return world, [Problem(_file_of(world.seed, init), "seed", f"{type(exc).__name__}: {str(exc).splitlines()[0]}")]
    for task in world.tasks:
        problems += task_problems(runtime, task, init)
    return world, problems
