"""Scenario expansion (AWM's first stage): seed domains grown into many distinct, CRUD-heavy scenarios.

`mcpworld synth scenarios --seeds FILE -n 1000` asks an OpenAI-compatible model, seed by seed and round by
round, for new scenarios of each seed's domain (the ones already kept are listed so it does not repeat them),
scores each for how well it can be simulated with CRUD over a SQLite database, and keeps the suitable ones
that are not near-duplicates of a kept one. Near-duplicates are found without embeddings: the same
normalized name, or word-shingle Jaccard similarity of name + description above a threshold.

The output is JSONL, one scenario a line ({"name", "description", "scenario", "seed", "suitability"}): it is
AWM's gen_scenario.jsonl layout and what `mcpworld synth world --scenarios` reads. Every kept scenario is
appended as soon as it is kept and the run's state (rounds done per seed, what was dropped) is saved beside
it, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mcpworld.core.llm import ChatClient, LLMError
from mcpworld.synth.chat import parse_json

SHINGLE = 2
STOP = {"a", "an", "the", "of", "for", "and", "to", "in", "on", "with", "by", "its", "their", "app", "platform",
        "service", "system", "online", "that", "where", "which", "is", "are"}

EXPAND_PROMPT = """You design simulated applications for training tool-using AI agents.

Seed domain: {seed}

Propose {count} NEW, distinct applications in this domain whose core is create/read/update/delete over
structured records (accounts, orders, bookings, tickets, inventory...), each different in what users manage.
Do not repeat any of these, nor minor variations of them:
{taken}

Reply with JSON only: [{{"name": "<short product-like name>", "description": "<two sentences: who uses it and \
what they create, change and look up>"}}, ...]"""

SCORE_PROMPT = """Rate how well each application can be simulated as a REST API over a SQLite database with \
synthesized data (CRUD on structured records scores high; long-form content, media, live feeds or ML inference \
score low), from 1 to 10.

{items}

Reply with JSON only: [{{"name": "<name as given>", "score": <1-10>}}, ...]"""


@dataclass
class Scenario:
    name: str
    description: str
    seed: str
    suitability: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "scenario": f"{self.name}: {self.description}",
                "seed": self.seed, "suitability": self.suitability}


@dataclass
class StageStats:
    """One stage across the run: requests sent, replies that had to be asked again, failures, seconds."""

    requests: int = 0
    retries: int = 0
    failures: int = 0

    @property
    def tries_per_success(self) -> float:
        ok = self.requests - self.retries - self.failures
        return round(self.requests / ok, 2) if ok > 0 else 0.0


@dataclass
class Expansion:
    """The run's state, saved beside the output so a second run resumes."""

    kept: list[Scenario] = field(default_factory=list)
    rounds: dict[str, int] = field(default_factory=dict)  # seed -> rounds done
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> count
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> a few names
    stages: dict[str, StageStats] = field(default_factory=lambda: {"expand": StageStats(), "score": StageStats()})

    def drop(self, reason: str, name: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < 5:
            shown.append(name)

    def summary(self, target: int) -> dict[str, Any]:
        return {"kept": len(self.kept), "target": target, "seeds": len(self.rounds),
                "rounds": sum(self.rounds.values()), "dropped": dict(self.dropped), "examples": self.examples,
                "stages": {k: {**asdict(v), "tries_per_success": v.tries_per_success} for k, v in self.stages.items()}}


# -- near-duplicate detection ----------------------------------------------------------------------------

def name_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", name.lower())


def shingles(text: str) -> frozenset[str]:
    words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP]
    words = [w[:-1] if len(w) > 4 and w.endswith("s") else w for w in words]
    if len(words) < SHINGLE:
        return frozenset(words)
    return frozenset(" ".join(words[i:i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)) | frozenset(words)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


class Deduper:
    """Kept scenarios' name keys and shingle sets; `duplicate_of` names the kept one a candidate repeats."""

    def __init__(self, threshold: float = 0.5):
        self.threshold = threshold
        self.names: dict[str, str] = {}
        self.sets: list[tuple[str, frozenset[str]]] = []

    def add(self, s: Scenario) -> None:
        self.names[name_key(s.name)] = s.name
        self.sets.append((s.name, shingles(f"{s.name} {s.description}")))

    def duplicate_of(self, s: Scenario) -> tuple[str, str] | None:
        if name_key(s.name) in self.names:
            return "duplicate name", self.names[name_key(s.name)]
        mine = shingles(f"{s.name} {s.description}")
        for other, theirs in self.sets:
            if jaccard(mine, theirs) >= self.threshold:
                return "near-duplicate", other
        return None


# -- the run -----------------------------------------------------------------------------------------------

def read_seeds(path: Path) -> list[str]:
    """Seed domains: one per line ("#" comments), or JSONL with "domain", "name" or "seed" (and "description")."""
    seeds = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc})") from None
            text = doc.get("domain") or doc.get("name") or doc.get("seed")
            if not text:
                raise ValueError(f"{path}:{number}: a JSON seed needs \"domain\" (or \"name\")")
            line = f"{text}: {doc['description']}" if doc.get("description") else str(text)
        seeds.append(line)
    if not seeds:
        raise ValueError(f"{path}: no seed domains (one per line, or JSONL with \"domain\")")
    return list(dict.fromkeys(seeds))


def state_path(out: Path) -> Path:
    return out.with_name(out.name + ".state.json")


def load_state(out: Path) -> Expansion:
    """What an earlier run kept and did (empty when there is none)."""
    state = Expansion()
    if out.is_file():
        for line in out.read_text(encoding="utf-8").splitlines():
            if line.strip():
                doc = json.loads(line)
                state.kept.append(Scenario(doc["name"], doc["description"], doc.get("seed", ""),
                                           int(doc.get("suitability") or 0)))
    if state_path(out).is_file():
        saved = json.loads(state_path(out).read_text(encoding="utf-8"))
        state.rounds, state.dropped, state.examples = saved["rounds"], saved["dropped"], saved["examples"]
        state.stages = {k: StageStats(**v) for k, v in saved["stages"].items()}
    return state


def _save_state(out: Path, state: Expansion) -> None:
    doc = {"rounds": state.rounds, "dropped": state.dropped, "examples": state.examples,
           "stages": {k: asdict(v) for k, v in state.stages.items()}}
    state_path(out).write_text(json.dumps(doc, indent=1), encoding="utf-8")


async def _ask(client: ChatClient, prompt: str, stats: StageStats, check: Callable[[Any], Any],
               retries: int) -> Any:
    """One request, asked again with the problem when the reply does not parse; None when it never does."""
    messages = [{"role": "user", "content": prompt}]
    for attempt in range(1 + retries):
        stats.requests += 1
        try:
            reply = await client.complete(messages, temperature=0.9)
        except LLMError:
            stats.failures += 1
            return None
        text = reply.message.get("content") or ""
        try:
            return check(parse_json(text))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            if attempt == retries:
                stats.failures += 1
                return None
            stats.retries += 1
            messages += [{"role": "assistant", "content": text},
                         {"role": "user", "content": f"That reply was not usable ({exc}). Reply with the JSON only."}]
    return None


def _scenarios(value: Any, seed: str) -> list[Scenario]:
    if isinstance(value, dict):
        value = value.get("scenarios") or value.get("applications")
    if not isinstance(value, list) or not value:
        raise ValueError("expected a JSON list of {name, description}")
    out = [Scenario(str(v["name"]).strip()[:80], " ".join(str(v["description"]).split())[:600], seed)
           for v in value if isinstance(v, dict) and v.get("name") and v.get("description")]
    if not out:
        raise ValueError("no item had both a name and a description")
    return out


def _scores(value: Any) -> dict[str, int]:
    if isinstance(value, dict):
        value = value.get("scores") or [value]
    if not isinstance(value, list):
        raise ValueError("expected a JSON list of {name, score}")
    return {name_key(str(v["name"])): int(v["score"]) for v in value if isinstance(v, dict) and "name" in v}


async def expand(client: ChatClient, seeds: list[str], n: int, out: Path, *, per_request: int = 10,
                 min_suitability: int = 7, threshold: float = 0.5, max_rounds: int | None = None, retries: int = 2,
                 progress: Callable[[int], None] | None = None) -> Expansion:
    """Grow `seeds` into `n` scenarios in `out` (resuming what is there); returns the run's state and counts."""
    state = load_state(out)
    dedupe = Deduper(threshold)
    for s in state.kept:
        dedupe.add(s)
    rounds_cap = max_rounds if max_rounds is not None else max(3, math.ceil(3 * n / max(1, len(seeds) * per_request)))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as sink:
        while len(state.kept) < n:
            pending = [s for s in seeds if state.rounds.get(s, 0) < rounds_cap]
            if not pending:
                break
            for seed in pending:
                if len(state.kept) >= n:
                    break
                state.rounds[seed] = state.rounds.get(seed, 0) + 1
                taken = [s.name for s in state.kept if s.seed == seed][-40:]
                prompt = EXPAND_PROMPT.format(seed=seed, count=per_request,
                                              taken="\n".join(f"- {t}" for t in taken) or "(none yet)")
                found = await _ask(client, prompt, state.stages["expand"], lambda v, s=seed: _scenarios(v, s),
                                   retries) or []
                fresh: list[Scenario] = []
                siblings = Deduper(threshold)  # repeats inside one reply are dropped before they are scored
                for candidate in found:
                    dup = dedupe.duplicate_of(candidate) or siblings.duplicate_of(candidate)
                    if dup is None:
                        fresh.append(candidate)
                        siblings.add(candidate)
                    else:
                        state.drop(dup[0], candidate.name)
                if fresh:
                    items = "\n".join(f"- {c.name}: {c.description}" for c in fresh)
                    scores = await _ask(client, SCORE_PROMPT.format(items=items), state.stages["score"], _scores,
                                        retries) or {}
                    for candidate in fresh:
                        candidate.suitability = scores.get(name_key(candidate.name), 0)
                        if candidate.suitability < min_suitability:
                            state.drop("not scored" if not candidate.suitability else "low suitability",
                                       candidate.name)
                            continue
                        if len(state.kept) >= n:
                            state.drop("over the target", candidate.name)
                            continue
                        dup = dedupe.duplicate_of(candidate)  # a sibling of this same reply kept just before
                        if dup is not None:
                            state.drop(dup[0], candidate.name)
                            continue
                        dedupe.add(candidate)
                        state.kept.append(candidate)
                        sink.write(json.dumps(candidate.to_json(), ensure_ascii=False) + "\n")
                        sink.flush()
                        if progress is not None:
                            progress(len(state.kept))
                _save_state(out, state)
    return state
