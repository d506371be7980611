"""τ²-bench domains as installed world packages: `mcpworld synth import-tau2 PATH`.

PATH is a τ² data folder (`.../tau2-bench/data/tau2`). Each domain becomes a thin package `tau2-<domain>`:

- `tables/<collection>.json`: the domain's database normalised by the mirror models (`*_models.py`), as
  `[[key, record], ...]` in τ²'s order; each collection is one table of `(key, pos, data)` rows (telecom: the
  agent's lists keyed by position, and `phone`, the user's side);
- `tasks.json`: τ²'s tasks as τ² wrote them (ids, user scenarios, setup, evaluation criteria); `split.json` its
  splits;
- `policy.md`: the agent's policy; `manifest.json`: name, domain, tool definitions and, in telecom, the user's own
  (descriptions read from the user's τ² source at import time, `tools.py`, `user_tools.py`);
- `__init__.py`: constant text that calls `load_package`.

Those data files come from the user's τ² folder at import time; none of them is part of this project. The tools
are our implementation (`airline.py`, `retail.py`, `telecom.py`); a task's reference is its gold actions (each on
its side), and every verdict carries τ²'s own reward beside the project's (`evaluate.py`).
"""

from __future__ import annotations

import json
import shutil
import tomllib
import types as pytypes
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from sqlmodel import Field as SQLField
from sqlmodel import Session

from mcpworld.core.models import ToolCall
from mcpworld.synth.importers.tau2 import airline, retail, telecom
from mcpworld.synth.importers.tau2.airline_models import FlightDB
from mcpworld.synth.importers.tau2.evaluate import Tau2Judge
from mcpworld.synth.importers.tau2.retail_models import RetailDB
from mcpworld.synth.importers.tau2.tools import AIRLINE_SCHEMAS, RETAIL_SCHEMAS, definitions, make_tools, run_tool
from mcpworld.worlds.users import User
from mcpworld.worlds.world import Check, Outcome, Rule, Task, World, world_base

PACKAGE_INIT = '''"""A τ²-bench domain imported by `mcpworld synth import-tau2` (see manifest.json and docs/tau2.md)."""

from pathlib import Path

from mcpworld.synth.importers.tau2.package import load_package

world = load_package(Path(__file__).parent)
'''


class Domain:
    """What the importer and loader know about one τ² domain: its tables, its tools (`run(name, db, arguments)`
    answers one; a dual-control domain has the user's too) and its clock."""

    def __init__(self, name: str, title: str, run: Callable[[str, Session, dict[str, Any]], str],
                 schemas: dict[str, dict[str, Any]], kinds: dict[str, str], tables: tuple[str, ...], clock: str,
                 user_run: Callable[[str, Session, dict[str, Any]], str] | None = None,
                 user_schemas: dict[str, dict[str, Any]] | None = None, user_kinds: dict[str, str] | None = None):
        self.name, self.title, self.run, self.schemas, self.kinds = name, title, run, schemas, kinds
        self.tables, self.clock = tables, clock
        self.user_run, self.user_schemas, self.user_kinds = user_run, user_schemas or {}, user_kinds or {}


TELECOM_SCHEMAS, TELECOM_USER_SCHEMAS = telecom.schemas()
DOMAINS = {
    "airline": Domain("airline", "τ²-bench airline", partial(run_tool, airline.AirlineTools), AIRLINE_SCHEMAS,
                      airline.KINDS, airline.TABLES, airline.NOW),
    "retail": Domain("retail", "τ²-bench retail", partial(run_tool, retail.RetailTools), RETAIL_SCHEMAS,
                     retail.KINDS, retail.TABLES, "2024-05-15T15:00:00"),  # retail reads no clock; the world needs one
    "telecom": Domain("telecom", "τ²-bench telecom", partial(telecom.run_tool, "assistant"), TELECOM_SCHEMAS,
                      telecom.KINDS, (*telecom.TABLES, telecom.PHONE), telecom.NOW,
                      user_run=partial(telecom.run_tool, "user"), user_schemas=TELECOM_USER_SCHEMAS,
                      user_kinds=telecom.USER_KINDS),
}
DB_MODELS = {"airline": FlightDB, "retail": RetailDB}


def world_name(domain: str) -> str:
    return f"tau2-{domain}"


def normalise(domain: Domain, folder: Path) -> dict[str, list[list[Any]]]:
    """The domain's database as τ² holds it after loading: validated by the mirror models, then dumped (telecom:
    the agent's `db.toml` and the user's `user_db.toml`)."""
    if domain.name == "telecom":
        return telecom.initial_tables(tomllib.loads((folder / "db.toml").read_text(encoding="utf-8")),
                                      tomllib.loads((folder / "user_db.toml").read_text(encoding="utf-8")))
    text = (folder / "db.json").read_text(encoding="utf-8")
    dumped = DB_MODELS[domain.name].model_validate(json.loads(text)).model_dump()
    return {table: [[k, v] for k, v in dumped[table].items()] for table in domain.tables}


def policy_text(domain: Domain, folder: Path) -> str:
    """The agent's policy as τ² gives it (telecom: the main policy and the tech-support manual, tagged)."""
    if domain.name == "telecom":
        main = (folder / "main_policy.md").read_text(encoding="utf-8")
        manual = (folder / "tech_support_manual.md").read_text(encoding="utf-8")
        return (f"<main_policy>\n{main}\n</main_policy>\n<tech_support_policy>\n{manual}\n"
                "</tech_support_policy>")
    return (folder / "policy.md").read_text(encoding="utf-8")


def write_package(data: Path, domain_name: str, dest: Path) -> Path:
    """Write the `tau2-<domain>` package for the τ² data folder `data` into `dest` (replaced)."""
    domain = DOMAINS[domain_name]
    folder = data / "domains" / domain_name
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "tables").mkdir(parents=True)
    for table, rows in normalise(domain, folder).items():
        (dest / "tables" / f"{table}.json").write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    tasks = json.loads((folder / "tasks.json").read_text(encoding="utf-8"))
    (dest / "tasks.json").write_text(json.dumps(tasks, ensure_ascii=False, indent=1), encoding="utf-8")
    split = folder / "split_tasks.json"
    (dest / "split.json").write_text(split.read_text(encoding="utf-8") if split.is_file() else "{}", encoding="utf-8")
    (dest / "policy.md").write_text(policy_text(domain, folder), encoding="utf-8")
    guidelines = data / "user_simulator" / "simulation_guidelines.md"  # how τ²'s user simulator is prompted
    if guidelines.is_file():
        shutil.copyfile(guidelines, dest / "user_guidelines.md")
    source = data.parent.parent / "src" / "tau2" / "domains" / domain_name
    tools, from_source = definitions(domain.schemas, source / "tools.py")
    user_tools, _ = definitions(domain.user_schemas, source / "user_tools.py")
    manifest = {"name": world_name(domain_name), "domain": domain_name, "title": domain.title,
                "source": str(data), "descriptions": "tau2 source docstrings" if from_source else "mcpworld's own",
                "tools": tools, "user_tools": user_tools}
    (dest / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
    (dest / "__init__.py").write_text(PACKAGE_INIT, encoding="utf-8")
    (dest / "gold.json").write_text(json.dumps(play_gold(dest), indent=1), encoding="utf-8")
    return dest


def play_gold(package: Path) -> dict[str, dict[str, Any]]:
    """What each task's gold actions do here, for `strict`: which calls fail without writing anything (τ² only
    logs them; the project's reference leaves them out), and whether the gold changes the database at all."""
    from mcpworld.synth.importers.tau2.evaluate import canonical, changed_records, record_texts
    from mcpworld.worlds.runtime import WorldRuntime

    runtime = WorldRuntime(load_package(package))
    out = {}
    for task in runtime.world.tasks:
        episode = runtime.fork(task.id, 0, vary=False)
        initial = runtime.initial_rows(episode.template)
        try:
            drop = []
            for i, step in enumerate(task.solution):
                before = episode.conn.total_changes
                if runtime.step(episode, step).error is not None \
                        and episode.conn.total_changes == before:
                    drop.append(i)
            after = record_texts(episode.conn, changed_records(episode.conn))
            changes = any(text != canonical((initial[t].get(k) or {}).get("data")) for (t, k), text in after.items())
        finally:
            episode.close()
        out[task.id] = {"drop": drop, "changes": changes}
    return out


def scenario_text(scenario: dict[str, Any] | None, persona: bool = True) -> str:
    """The simulated user's scenario as a task instruction: persona (unless not `persona`), then the structured
    instructions."""
    if not scenario:
        return ""
    parts = []
    if scenario.get("persona") and persona:
        parts.append(f"Persona: {scenario['persona']}")
    instructions = scenario.get("instructions")
    if isinstance(instructions, dict):
        for key, label in (("reason_for_call", "Reason for call"), ("known_info", "Known info"),
                           ("unknown_info", "Unknown info"), ("task_instructions", "Task instructions")):
            if instructions.get(key):
                parts.append(f"{label}: {instructions[key]}")
    elif instructions:
        parts.append(str(instructions))
    return "\n\n".join(parts)


POLICY_RULE = Rule(id="policy", text="Refuse what the domain policy (the world's scenario, τ²'s policy.md) does not "
                                       "allow, and what the tools cannot do for the user: decline citing `policy`.",
                   cues=("policy",))
REFUSAL = "I cannot do that: the policy does not allow it."


def says_all(infos: list[str]) -> Callable[[Outcome], Check]:
    """The `strict` check of a task whose τ² criteria name facts to tell the user: the final answer states each
    (as τ²'s COMMUNICATE reads messages: case aside, commas removed)."""
    def verify(outcome: Outcome) -> Check:
        text = (outcome.answer or "").lower().replace(",", "")
        missing = [i for i in infos if i.lower() not in text]
        return Check(name="answer tells the user " + ", ".join(infos), passed=not missing,
                     detail=f"missing: {', '.join(missing)}" if missing else "")
    return verify


def tau2_tasks(tasks: list[dict[str, Any]], split: dict[str, list[str]], kinds: dict[str, str],
               played: dict[str, dict[str, Any]] | None = None) -> list[Task]:
    """τ²'s tasks as mcpworld tasks, judged `strict`: the reference is the gold actions (the end state must equal
    theirs; gold calls that fail without writing are left out, `played`); facts τ² wants communicated must be in
    the final answer; a task whose gold changes nothing is a refusal (decline citing `policy`), so that doing
    nothing never passes (τ² itself passes a no-op on those)."""
    test = set(split.get("test") or [])
    out = []
    for t in tasks:
        criteria = t.get("evaluation_criteria") or {}
        actions = criteria.get("actions") or []
        info = (played or {}).get(str(t["id"]))
        drop = set(info["drop"]) if info else set()
        gold = [ToolCall(name=a["name"], arguments=a.get("arguments") or {}, role=a.get("requestor") or "assistant")
                for i, a in enumerate(actions) if i not in drop]
        infos = [str(i) for i in criteria.get("communicate_info") or []]
        writes = info["changes"] if info else any(kinds.get(a["name"]) == "write" for a in actions)
        refusal = not writes and not infos
        scenario = t.get("user_scenario") or {}
        user = User(instructions=scenario_text(scenario, persona=False), persona=str(scenario.get("persona") or ""))
        checks = ([says_all(infos)] if infos else []) + ([holds(criteria["env_assertions"])]
                                                          if criteria.get("env_assertions") else [])
        initial = (t.get("initial_state") or {}).get("initialization_actions")
        out.append(Task(id=str(t["id"]), instruction=scenario_text(scenario) or str(t["id"]), user=user,
                        solution=gold, split="test" if t["id"] in test else "train",
                        rubric=[str(x) for x in criteria.get("nl_assertions") or []],
                        kind="refusal" if refusal else "state", reason="policy" if refusal else None,
                        answer=REFUSAL if refusal else (" ".join(infos) or None),
                        verify=all_of(checks) if checks else None,
                        setup=telecom.setup(initial) if initial else None))
    return out


def holds(assertions: list[dict[str, Any]]) -> Callable[[Outcome], Check]:
    """The `strict` check of a task with τ²'s environment assertions (telecom: the phone works as the user
    wants, the bill is paid): each holds on the end state, run on the server as τ² runs them."""
    def verify(outcome: Outcome) -> Check:
        met = telecom.assertions_met(outcome.final.connection(), assertions)
        return Check(name="the end state meets τ²'s assertions", passed=met,
                     detail="" if met else "an assertion on the end state does not hold")
    return verify


def all_of(checks: list[Callable[[Outcome], Check]]) -> Callable[[Outcome], list[Check]]:
    return lambda outcome: [check(outcome) for check in checks]


class Tau2World(World):
    """A τ² world: the agent's policy is τ²'s own (policy.md, kept as the world's scenario), then how an episode
    ends here (the `policy` rule a refusal cites, `submit_answer` and `decline`)."""

    @property
    def policy(self) -> str:
        return f"{self.scenario.strip()}\n\n{World.policy.fget(self)}"  # type: ignore[attr-defined]


def _models(base: type, tables: tuple[str, ...]) -> dict[str, type]:
    models = {}
    for table in tables:
        namespace = {"__tablename__": table, "__annotations__": {"key": str, "pos": int, "data": str},
                     "key": SQLField(primary_key=True), "pos": 0}
        models[table] = pytypes.new_class(table.title(), (base,), {"table": True},
                                          lambda ns, n=namespace: ns.update(n))
    return models


def load_package(path: str | Path) -> World:
    """The World of an installed `tau2-<domain>` package (its `__init__.py` calls this)."""
    from datetime import datetime

    path = Path(path)
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    domain = DOMAINS[manifest["domain"]]
    base = world_base()
    models = _models(base, domain.tables)
    tasks = json.loads((path / "tasks.json").read_text(encoding="utf-8"))
    split = json.loads((path / "split.json").read_text(encoding="utf-8"))
    gold_file = path / "gold.json"  # absent while the importer plays the gold the first time
    played = json.loads(gold_file.read_text(encoding="utf-8")) if gold_file.is_file() else None

    def seed(db: Session) -> None:
        for table in domain.tables:
            rows = json.loads((path / "tables" / f"{table}.json").read_text(encoding="utf-8"))
            db.add_all([models[table](key=k, pos=i, data=json.dumps(v, ensure_ascii=False, separators=(",", ":")))
                        for i, (k, v) in enumerate(rows)])

    user_tools = make_tools(domain.user_run, manifest.get("user_tools") or [], domain.user_kinds) \
        if domain.user_run is not None else []
    judge = Tau2Judge({str(t["id"]): t.get("evaluation_criteria") or {} for t in tasks})
    evidence: Callable[[Any, Any, str | None], dict[str, Any]] = judge
    return Tau2World(
        name=manifest["name"], title=manifest["title"],
        description=f"τ²-bench {manifest['domain']} domain: τ²'s tools, data and tasks, scored as τ² scores them.",
        scenario=(path / "policy.md").read_text(encoding="utf-8"), base=base, seed=seed,
        tools=make_tools(domain.run, manifest["tools"], domain.kinds), user_tools=user_tools,
        free_fields={telecom.PHONE: ("data",)} if user_tools else {},  # the phone is judged by τ²'s assertions
        tasks=tau2_tasks(tasks, split, domain.kinds, played), rules=[POLICY_RULE],
        tags=["tau2", manifest["domain"]], clock=datetime.fromisoformat(domain.clock),
        source=f"tau2-bench {manifest['domain']} ({manifest.get('source', '')})", evidence=evidence,
        prejudge=judge.prejudge, unknown_tool=lambda name: f"Error: Tool '{name}' not found.",
        user_guidelines=guide.read_text(encoding="utf-8") if (guide := path / "user_guidelines.md").is_file() else "",
    )
