"""How an episode is judged: the reference's final state, the typed submission or decline, the free text, the
task's own checks, one Verdict. The runtime (`runtime.py`) plays episodes; `WorldRuntime.verify` hands them here.

A `Judge` belongs to one runtime and keeps what judging plays once per task: the reference solution's end
states (per seed, when a seed changes them) and what the task's free text is judged against. An episode on a
varied seed is mapped back to seed 0's terms first (`unview`), so every check reads the task as written.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sqlmodel import Session

from mcpworld.core.models import Check, ToolCall, Verdict
from mcpworld.core.tools import to_jsonable
from mcpworld.worlds.answers import SubmissionError, read_submission, scales
from mcpworld.worlds.database import CHANGES_TABLE, activate, engine_for
from mcpworld.worlds.diff import StateDiff
from mcpworld.worlds.freetext import FreeTextContext, free_text_checks, sensitive_values, written
from mcpworld.worlds.reference import Canonical, canonical, reference_check
from mcpworld.worlds.submissions import answer_checks, decline_checks, state_checks
from mcpworld.worlds.variation import IDENTITY
from mcpworld.worlds.world import Outcome, Task, first_line

if TYPE_CHECKING:
    from mcpworld.worlds.runtime import Episode, Template, WorldRuntime

__all__ = ["MAX_REFERENCES", "VERDICT_MODE", "Judge", "normalize_verdict"]

MAX_REFERENCES = 4096  # cached reference end states, per (task, seed)
VERDICT_MODE = "typed-submissions-1"  # how verdicts are made: typed submissions, one sealed verdict, free text


class Judge:
    """Judges the episodes of one runtime's world; plays each task's reference once to do so."""

    def __init__(self, runtime: WorldRuntime):
        self.runtime = runtime
        self._references: dict[tuple[str, int | None], list[Canonical]] = {}  # (task, seed or None: any)
        self._free_text: dict[str, FreeTextContext] = {}  # task id -> what its free text is judged against

    def reference_states(self, task: Task, seed: int = 0) -> list[Canonical]:
        """The final states of the task's reference solution (and its alternatives), played once.

        Generated ids are placeholders, so a reference's end state rarely depends on the seed: it is played
        with seeds 0 and 1 and, when both agree, shared by every seed; otherwise (a tool draws from the episode's
        generator for more than ids) it is played once per seed.
        """
        shared = self._references.get((task.id, None))
        if shared is not None:
            return shared
        if (task.id, seed) not in self._references:
            first = self._play_references(task, 0)
            if first == self._play_references(task, 1):
                self._references[(task.id, None)] = first
                return first
            if len(self._references) >= MAX_REFERENCES:  # bounded: RL draws a new seed per sample
                self._references.pop(next(iter(self._references)))
            self._references[(task.id, seed)] = first if seed == 0 else self._play_references(task, seed)
        return self._references[(task.id, seed)]

    def _play_references(self, task: Task, seed: int) -> list[Canonical]:
        states = []
        for solution in [task.solution, *task.alternatives]:
            episode = self.runtime.fork(task.id, seed, vary=False)  # judged in seed 0's terms: played on its data
            try:
                for step in solution:
                    self.runtime.step(episode, step)
                states.append(canonical(self.runtime.diff(episode), episode.generated,
                                        self.runtime.world.free_fields))
            finally:
                episode.close()
        return states

    def free_text_context(self, task: Task) -> FreeTextContext:
        """What `task`'s free text is judged against: the reference's texts and everything it read (played once)."""
        made = self._free_text.get(task.id)
        if made is not None:
            return made
        episode = self.runtime.fork(task.id, 0)
        try:
            results = [self.runtime.step(episode, step) for step in task.solution]
            diff = self.runtime.diff(episode)
        finally:
            episode.close()
        reference: dict[tuple[str, str], list[str]] = {}
        for table, column, _, after in written(diff, self.runtime.world.free_fields):
            reference.setdefault((table, column), []).append(str(after or ""))
        seen = json.dumps([task.instruction, [r.value for r in results], diff.summary()], default=str,
                          ensure_ascii=False)
        made = FreeTextContext(instruction=task.instruction, reference=reference, known=seen.casefold(),
                               sensitive=sensitive_values(self.runtime.initial_rows(self.runtime.template(task))))
        self._free_text[task.id] = made
        return made

    def private_values(self, task: Task, template: Template) -> list[str]:
        """The values a refusal of `task` must not reveal: its `private` items, columns resolved."""
        out: list[str] = []
        for item in task.private:
            table, _, column = item.partition(".")
            tables = self.runtime.metadata.tables
            known = table in tables and column in tables[table].columns
            out += self.runtime.column_values(template, item) if known else [item]
        return out

    def submission_checks(self, episode: Episode, answer: str | None = None) -> list[Check]:
        """What the episode submitted, judged: a typed answer, a decline, or (state tasks) no decline. `answer`,
        the final reply, is read only for what a refusal must not reveal (it can fail, never pass, an episode)."""
        task = episode.task
        assert task is not None
        if task.expect:
            return answer_checks(task, episode.submission)
        if task.kind == "answer":  # an answer nobody typed cannot be judged: never a reward (importers drop these)
            return [Check(name="answer task has a typed answer", passed=False, group="answer",
                          detail=f"task {task.id} declares no `expect` parts: its answer cannot be judged")]
        if task.kind == "refusal":
            if not task.reason:
                return [Check(name="refusal has a reason", passed=False, group="decline",
                              detail=f"task {task.id} names no rule in `reason`: it cannot be judged")]
            return decline_checks(task, episode.submission, self.private_values(task, episode.template), answer)
        return state_checks(episode.submission)

    def task_checks(self, episode: Episode, answer: str | None, diff: StateDiff | None = None) -> list[Check]:
        """The task's own `verify` checks (none without one); a raising verifier fails with its error."""
        task = episode.task
        if task is None or task.verify is None:
            return []
        diff = diff if diff is not None else self.runtime.diff(episode)
        initial: list[Session] = []

        def open_initial() -> Session:
            if not initial:
                conn = self.runtime.open_connection(episode.template.data)
                initial.append(self.runtime.new_session(engine_for(conn), random.Random(episode.seed)))
            return initial[0]

        engine = episode.engine or self.runtime.engine
        with activate(episode.conn), self.runtime.new_session(engine, episode.rng) as final:
            outcome = Outcome(diff=diff, answer=answer, _initial=open_initial, final=final)
            try:
                checks = normalize_verdict(task.verify(outcome)).checks
            except (Exception, SystemExit, KeyboardInterrupt) as exc:  # a verifier must not stop the server
                checks = [Check(name="verifier ran", passed=False, detail=f"{type(exc).__name__}: {first_line(exc)}")]
            final.rollback()
        for s in initial:
            s.close()
        return checks

    def verify(self, episode: Episode, answer: str | None) -> Verdict:
        """Judge the episode: the reference's final state, the typed answer or refusal, then the task's checks.

        A raising verifier fails with its error as evidence.
        """
        task = episode.task
        assert task is not None, "WorldRuntime.verify judges only episodes started with a task"
        last = answer  # the agent's last message (a world's own evidence reads the conversation itself)
        if episode.conversation is not None:  # in a conversation, all the agent told the user is its reply
            answer = "\n\n".join([*episode.conversation.said_by_agent()[1:], *([answer] if answer else [])]) or None
        answer = self.unview(episode, answer)
        diff = self.runtime.diff(episode)
        agent = canonical(diff, episode.generated, self.runtime.world.free_fields)
        # a provisional task has no reference yet: its own verifier decides (Task.provisional)
        checks = [] if task.provisional else [reference_check(agent, self.reference_states(task, episode.seed))]
        checks += self.submission_checks(episode, answer)
        if self.runtime.world.free_fields:
            checks += free_text_checks(diff, self.runtime.world.free_fields, self.free_text_context(task))
        checks += [c if c.group else c.model_copy(update={"group": "task check"})
                   for c in self.task_checks(episode, answer, diff)]
        passed = sum(c.passed for c in checks)
        verdict = Verdict(passed=passed == len(checks), score=passed / len(checks), checks=checks)
        verdict.evidence["diff"] = to_jsonable(diff.summary())
        verdict.evidence["answer"] = answer
        if episode.submission is not None:
            verdict.evidence["submission"] = {"tool": episode.submission.tool, **episode.submission.arguments}
        if self.runtime.world.evidence is not None:  # a world's own extra verdicts (τ² worlds: `tau2`)
            try:
                said = answer if episode.conversation is None else last
                verdict.evidence.update(self.runtime.world.evidence(self.runtime, episode, said))
            except Exception as exc:  # reported, never invented: the standard verdict stands
                verdict.evidence["evidence_error"] = f"{type(exc).__name__}: {first_line(exc)}"
        return verdict

    def play(self, task_id: str, answer: str | None, calls: list[ToolCall] | None = None, seed: int = 0) -> Verdict:
        """Judge `calls` (default: the task's reference solution, its submission included) then `answer` on a fresh
        episode, as an agent's."""
        episode = self.runtime.fork(task_id, seed)
        try:
            for step in self.runtime.solution(self.runtime.tasks[task_id]) if calls is None else calls:
                self.runtime.step(episode, step)
            return self.verify(episode, answer)
        finally:
            episode.close()

    def unview(self, episode: Episode, answer: str | None = None) -> str | None:
        """Map a viewed episode back to seed 0's terms (its rows, change log and submission), so it is judged
        against the task as written; returns `answer` mapped back too. Once: the episode is then seed 0's."""
        view = episode.view
        if view.identity:
            return answer
        log = episode.conn.execute(f"SELECT tbl, pk FROM {CHANGES_TABLE}").fetchall()
        view.rewrite(episode.conn, self.runtime.metadata.tables, back=True)
        episode.conn.execute(f"DELETE FROM {CHANGES_TABLE}")
        episode.conn.executemany(f"INSERT OR IGNORE INTO {CHANGES_TABLE} VALUES (?, ?)",
                                 [(table, view.text(key, back=True)) for table, key in log])
        submission = episode.submission
        if submission is not None:
            arguments, values = view.value(submission.arguments, back=True), submission.values
            if values is not None and episode.task is not None:
                parts = list(episode.task.expect)
                try:
                    values = [view.amount(v, back=True) if scales(part) else v
                              for part, v in zip(parts, read_submission(parts, arguments["answer"]))]
                except SubmissionError:  # read once already: a value that reads no more names nothing in seed 0
                    values = None
            episode.submission = replace(submission, arguments=arguments, values=values)
        episode.generated = {view.text(k, back=True): v for k, v in episode.generated.items()}
        episode.view, episode.template = IDENTITY, episode.origin or episode.template
        return None if answer is None else view.text(answer, back=True)


def _flatten(raw: Any) -> Iterator[bool | Check | Verdict]:
    if isinstance(raw, (bool, Check, Verdict)):
        yield raw
    elif isinstance(raw, Iterable) and not isinstance(raw, (str, bytes, dict)):
        for item in raw:
            yield from _flatten(item)
    else:
        raise TypeError(f"a verifier returned {type(raw).__name__}; return bool, Check, Verdict or a list of them")


def normalize_verdict(raw: bool | Check | Verdict | Iterable[Any]) -> Verdict:
    """Accept the shapes verifiers return (bool, Check, Verdict, nested lists of those) and make one Verdict.

    Nested lists are flattened, so `[[failing], passing]` fails; a Verdict inside a list keeps its checks.
    """
    if isinstance(raw, Verdict):
        return raw
    checks: list[Check] = []
    for item in _flatten(raw):
        if isinstance(item, Verdict):
            checks += item.checks or [Check(name="nested verdict", passed=item.passed)]
        elif isinstance(item, Check):
            checks.append(item)
        else:
            checks.append(Check(name=f"check {len(checks) + 1}", passed=bool(item)))
    if not checks:
        return Verdict(passed=False, score=0.0, checks=[Check(name="verifier returned checks", passed=False)])
    passed = sum(c.passed for c in checks)
    return Verdict(passed=passed == len(checks), score=passed / len(checks), checks=checks)

