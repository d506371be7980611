"""The `tau2` verdict: τ²-bench's reward and its breakdown, computed from an mcpworld episode.

τ²'s evaluator (its `evaluate_simulation`) gates on how the episode ended, then multiplies the components of the
task's `reward_basis`:

- DB: the database the agent's calls left equals the one a fresh replay of the gold actions leaves (τ² compares
  sha256 hashes of sorted-key JSON dumps; gold calls that fail only leave their partial writes). τ² rebuilds the
  agent's state by replaying its WRITE calls; our tools are deterministic and that replay is exactly the episode,
  so we compare the episode's own records: every record either side changed, as sorted-key JSON (the same
  equality the hashes decide, without hashing megabytes per verdict);
- COMMUNICATE: each string of `communicate_info` is in some non-blank assistant message (case-insensitive, commas
  removed from the message);
- ACTION: each gold action is matched by some call (same name; arguments compared on `compare_args`, or on the
  call's own argument names when it is null; `[]` compares names only).

The assistant messages are τ²'s constant greeting, the agent's messages to the user, and the `episode/verify`
answer as the last one. `episode/verify` is an agent stop, so the gate passes; an episode that ends any other way
is never verified (τ² would score it 0). NL_ASSERTION with an empty list scores 1, as in τ²; NL assertions are
judged by the server's judge model (`nl.py`, awaited before judging: `Tau2Judge.prejudge`), and without one a task
that needs them is reported, not scored;
- ENV_ASSERTION (telecom): each of the task's assertion functions, run in order on the episode's end state (on a
  copy, each followed by τ²'s sync, `telecom.assertions_met`), returns its expected value. τ² runs them on a
  replay of the agent's and user's writes; our calls are deterministic, so that replay is the episode itself.
"""

from __future__ import annotations

import json
from typing import Any

from mcpworld.core.llm import ChatClient
from mcpworld.synth.importers.tau2.nl import judge, judge_client, nl_reward, transcript
from mcpworld.worlds.database import CHANGES_TABLE

GREETING = "Hi! How can I help you today?"  # τ²'s orchestrator opens every conversation with it


def canonical(text: str | None) -> str | None:
    return None if text is None else json.dumps(json.loads(text), sort_keys=True, default=str)


def changed_records(conn: Any) -> set[tuple[str, str]]:
    return {(t, k) for t, k in conn.execute(f"SELECT tbl, pk FROM {CHANGES_TABLE}")}


def record_texts(conn: Any, keys: set[tuple[str, str]]) -> dict[tuple[str, str], str | None]:
    out: dict[tuple[str, str], str | None] = {}
    for table, key in keys:
        row = conn.execute(f'SELECT data FROM "{table}" WHERE key = ?', (key,)).fetchone()
        out[(table, key)] = canonical(row[0]) if row else None
    return out


def communicate(infos: list[str] | None, messages: list[str]) -> float:
    if not infos:
        return 1.0
    texts = [m for m in messages if m is not None and m.strip()]
    return float(all(any(info.lower() in m.lower().replace(",", "") for m in texts) for info in infos))


def action_matches(action: dict[str, Any], name: str, arguments: dict[str, Any]) -> bool:
    if action["name"] != name:
        return False
    keys = list(arguments) if action.get("compare_args") is None else action["compare_args"]
    if not keys:
        return True
    return ({k: v for k, v in arguments.items() if k in keys}
            == {k: v for k, v in (action.get("arguments") or {}).items() if k in keys})


def actions_reward(gold: list[dict[str, Any]] | None, calls: list[tuple[str, dict[str, Any]]]) -> float:
    if not gold:
        return 1.0
    return float(all(any(action_matches(a, n, args) for n, args in calls) for a in gold))


class Tau2Judge:
    """Computes the `tau2` evidence for one world's episodes; plays each task's gold actions once."""

    def __init__(self, criteria: dict[str, dict[str, Any]], judge_model: ChatClient | None = None):
        self.criteria = criteria  # task id -> τ²'s evaluation_criteria
        self.judge_model = judge_model  # the NL assertions' judge; None: MCPWORLD_JUDGE_MODEL, if set
        self._gold: dict[str, dict[tuple[str, str], str | None]] = {}

    def gold_records(self, runtime: Any, task_id: str) -> dict[tuple[str, str], str | None]:
        """The records the gold actions change, as sorted-key JSON (None: deleted), played once per task."""
        made = self._gold.get(task_id)
        if made is None:
            episode = runtime.fork(task_id, 0, vary=False)
            try:
                for action in self.criteria[task_id].get("actions") or []:  # errors: kept, as τ²
                    runtime.call(episode, action["name"], action.get("arguments") or {},
                                 action.get("requestor") or "assistant")
                made = self._gold[task_id] = record_texts(episode.conn, changed_records(episode.conn))
            finally:
                episode.close()
        return made

    @staticmethod
    def needs_judge(criteria: dict[str, Any]) -> bool:
        return "NL_ASSERTION" in (criteria.get("reward_basis") or []) and bool(criteria.get("nl_assertions"))

    async def prejudge(self, runtime: Any, episode: Any, answer: str | None) -> None:
        """The judge model's results for the task's NL assertions, on `episode.prejudged` (the server awaits this
        before judging; nothing without a judge model, or for a task that needs none)."""
        criteria = self.criteria.get(episode.task.id) or {}
        client = self.judge_model if self.judge_model is not None else judge_client()
        if not self.needs_judge(criteria) or client is None:
            return
        conversation = episode.conversation
        opening = conversation.messages[:2] if conversation is not None else [{"role": "assistant",
                                                                                "content": GREETING}]
        text = transcript(opening, episode.log or [], answer)
        episode.prejudged["nl_assertions"] = await judge(client, text, list(criteria["nl_assertions"]))

    def db_match(self, runtime: Any, episode: Any) -> bool:
        gold = self.gold_records(runtime, episode.task.id)
        keys = changed_records(episode.conn) | set(gold)
        agent = record_texts(episode.conn, keys)
        initial = runtime.initial_rows(episode.template)
        for key in keys:
            expected = gold[key] if key in gold else canonical((initial[key[0]].get(key[1]) or {}).get("data"))
            if agent[key] != expected:
                return False
        return True

    def __call__(self, runtime: Any, episode: Any, answer: str | None,
                 messages: list[str] | None = None) -> dict[str, Any]:
        criteria = self.criteria.get(episode.task.id)
        if criteria is None:
            return {"tau2": {"reward": 1.0, "breakdown": None, "note": "No evaluation criteria"}}
        basis = criteria.get("reward_basis") or ["DB", "COMMUNICATE"]
        judged = episode.prejudged.get("nl_assertions")
        if self.needs_judge(criteria) and judged is None:
            return {"tau2": {"reward": None, "breakdown": None,
                             "note": "NL_ASSERTION needs a judge model: serve with MCPWORLD_JUDGE_MODEL and "
                                     "MCPWORLD_JUDGE_BASE_URL"}}
        if episode.conversation is not None:  # the greeting and every message the agent sent, then the answer
            messages = episode.conversation.said_by_agent()[1:]
        said = [GREETING, *(messages or []), *([answer] if answer else [])]
        breakdown: dict[str, float] = {}
        reward = 1.0
        if "DB" in basis:
            if criteria.get("actions") is None and criteria.get("env_assertions") is None:
                env = 1.0  # τ²: nothing to compare, and no breakdown entry
            else:
                env = breakdown["DB"] = float(self.db_match(runtime, episode))
            reward *= env
        if "ENV_ASSERTION" in basis:
            from mcpworld.synth.importers.tau2.telecom import assertions_met, raw

            met = assertions_met(raw(episode.conn), criteria.get("env_assertions") or [])
            reward *= breakdown.setdefault("ENV_ASSERTION", float(met))
        if "ACTION" in basis:
            calls = [(name, args) for name, args, _ in (episode.log or [])]
            reward *= (breakdown.setdefault("ACTION", actions_reward(criteria.get("actions"), calls)))
        if "NL_ASSERTION" in basis:  # an empty list scores 1 without a judge, as in τ²
            reward *= breakdown.setdefault("NL_ASSERTION", nl_reward(judged) if judged is not None else 1.0)
        if "COMMUNICATE" in basis:
            reward *= (breakdown.setdefault("COMMUNICATE", communicate(criteria.get("communicate_info"), said)))
        return {"tau2": {"reward": reward, "breakdown": breakdown}}


def state_hash(runtime: Any, episode: Any, tables: tuple[str, ...]) -> str:
    """τ²'s `get_db_hash()` of an episode's state: sha256 over the sorted-key JSON of every collection."""
    from mcpworld.synth.importers.tau2.docs import tree_hash

    tree = {t: {k: json.loads(d) for k, d in episode.conn.execute(f'SELECT key, data FROM "{t}" ORDER BY pos')}
            for t in tables}
    return tree_hash(tree)
