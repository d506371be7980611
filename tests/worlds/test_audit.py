"""`mcpworld world audit`: attacks generated from each task must fail; the audit names the ones that get through."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcpworld.app.cli import main
from mcpworld.worlds.audit import AuditReport, audit
from mcpworld.worlds.loader import load_world
from mcpworld.worlds.runtime import UnknownTask, WorldRuntime

# A tiny fruit stall. Honest tasks: `restock` (state), `note-pear` (free text the user dictated), `count-stocked`
# (a Count answer), `refuse-plum` (a refusal, two rules). Deliberately weak: `restock-pear` lists an empty
# alternative solution (doing nothing is "equally correct"), and `top-fruit` is an answer task with no typed
# `expect`, which cannot be judged: its reference fails.
WORLD = '''
from sqlmodel import Field, select

from mcpworld.worlds.answers import Count
from mcpworld.worlds.world import Rule, Session, Task, ToolError, World, call, fetch, tool, world_base

Base = world_base()


class Item(Base, table=True):
    id: str = Field(primary_key=True)
    name: str
    qty: int = 0
    note: str = ""


def seed(db: Session) -> None:
    db.add_all([Item(id="apple", name="Apple", qty=1), Item(id="pear", name="Pear", qty=2),
                Item(id="plum", name="Plum", qty=0), Item(id="fig", name="Fig", qty=3, note="fragile")])


@tool
def list_items(db: Session) -> list[Item]:
    """Every item with its stock."""
    return list(db.exec(select(Item)))


@tool
def get_item(db: Session, item_id: str) -> Item:
    """One item."""
    return fetch(db, Item, item_id, "item")


@tool(writes=True, idempotent=True)
def set_qty(db: Session, item_id: str, qty: int) -> Item:
    """Set an item's stock."""
    item = fetch(db, Item, item_id, "item")
    if item.id == "plum":
        raise ToolError("Plum is discontinued")
    if qty < 0:
        raise ToolError("stock cannot be negative")
    item.qty = qty
    db.add(item)
    return item


@tool(writes=True, idempotent=True)
def set_note(db: Session, item_id: str, note: str) -> Item:
    """Write an item's note."""
    item = fetch(db, Item, item_id, "item")
    item.note = note
    db.add(item)
    return item


TASKS = [
    Task(id="restock", instruction="Set the stock of apple to 5.", solution=[call("set_qty", item_id="apple", qty=5)],
         verify=lambda o: o.diff.updated("item", "apple", qty=5)),
    Task(id="note-pear", instruction="Put the note 'ripe' on item pear.",
         solution=[call("set_note", item_id="pear", note="ripe")],
         verify=lambda o: o.diff.updated("item", "pear")),
    Task(id="count-stocked", kind="answer", instruction="How many kinds of fruit have a stock above zero?",
         solution=[call("list_items")], answer="3 kinds are in stock.", expect=[Count(value=3)]),
    Task(id="top-fruit", kind="answer", instruction="Which fruit do we have the most of?",
         solution=[call("list_items")], answer="Fig.", verify=lambda o: "fig" in (o.answer or "").lower()),
    Task(id="restock-pear", instruction="Set the stock of pear to 6.",
         solution=[call("set_qty", item_id="pear", qty=6)], alternatives=[[]]),
    Task(id="refuse-plum", kind="refusal", instruction="Restock the plum: set item plum to 4.",
         solution=[call("set_qty", item_id="plum", qty=4)], reason="discontinued",
         answer="I cannot restock Plum: it is discontinued."),
]

world = World(name="stall", title="Stall", description="A fruit stall.", scenario="You run a fruit stall.",
              base=Base, seed=seed, tools=[list_items, get_item, set_qty, set_note], tasks=TASKS,
              free_fields={"item": ("note",)},
              rules=[Rule("discontinued", "Discontinued items cannot be restocked.", ("discontinued",)),
                     Rule("no-negative", "Stock cannot go below zero.", ("negative", "below zero"))])
'''

HONEST = ["restock", "note-pear", "count-stocked", "refuse-plum"]


@pytest.fixture(scope="module")
def world_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pkg = tmp_path_factory.mktemp("worlds") / "stall"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(WORLD)
    return pkg


@pytest.fixture(scope="module")
def report(world_path: Path) -> AuditReport:
    return audit(WorldRuntime(load_world(world_path)))


def result(report: AuditReport, task: str, policy: str):  # type: ignore[no-untyped-def]
    found = [r for r in report.results if r.task == task and r.policy == policy]
    assert len(found) == 1, f"{task}/{policy}: {found}"
    return found[0]


def test_failures_are_exactly_the_planted_holes(report: AuditReport) -> None:
    failing = {(f.task, f.policy) for f in report.failures}
    assert ("restock-pear", "noop") in failing
    assert ("top-fruit", "reference") in failing  # an answer nobody typed fails even its reference
    assert {t for t, _ in failing} == {"restock-pear", "top-fruit"}  # the honest tasks have no hole
    assert not report.ok


def test_a_hole_is_named_with_the_attempt(report: AuditReport) -> None:
    hole = result(report, "restock-pear", "noop")
    assert hole.passed and not hole.expected_pass
    assert hole.attempt == "no calls, no answer" and "final state matches the reference" in hole.detail
    unjudged = result(report, "top-fruit", "reference")
    assert not unjudged.passed and "answer task has a typed answer" in unjudged.detail


def test_dictated_free_text_is_held_to_its_words(report: AuditReport) -> None:
    """Before typed verdicts, changing the note the user dictated passed (free fields were not judged)."""
    perturbed = result(report, "note-pear", "perturbed-args")
    assert not perturbed.passed and perturbed.attempts >= 2
    assert not result(report, "note-pear", "free-text").passed
    assert not result(report, "restock", "perturbed-args").passed
    assert result(report, "restock", "perturbed-args").attempts >= 3  # item_id twice (x-suffix, other id), qty


def test_honest_answer_task_rejects_every_generated_value_and_accepts_every_form(report: AuditReport) -> None:
    mine = [r for r in report.results if r.task == "count-stocked"]
    wrong = [r for r in mine if not r.expected_pass]
    assert {r.policy for r in wrong} >= {"noop", "no-submission", "wrong-value", "second-submission",
                                         "needless-decline", "collateral", "random"}
    assert not [r for r in wrong if r.passed]
    assert result(report, "count-stocked", "reference").passed
    forms = result(report, "count-stocked", "accepted-forms")
    assert forms.passed and forms.attempts >= 4  # 3, 3.0, "3", {"count": 3}
    # 1, 2, 4, 5, 0 and the stock levels the read returned
    assert result(report, "count-stocked", "wrong-value").attempts >= 5


def test_honest_refusal_with_two_rules(report: AuditReport) -> None:
    other = result(report, "refuse-plum", "other-rule")
    assert not other.passed and other.attempts == 1  # one other rule
    assert not result(report, "refuse-plum", "claiming-decline").passed
    assert not result(report, "refuse-plum", "no-submission").passed
    assert result(report, "refuse-plum", "reference").passed
    assert not [r for r in report.results if r.task == "refuse-plum" and not r.ok]


def test_table_counts_passes_per_policy_and_kind(report: AuditReport) -> None:
    rows = {r["policy"]: r for r in report.table()}
    assert list(rows)[:3] == ["reference", "accepted-forms", "noop"]
    assert rows["reference"] == {"policy": "reference", "expected_pass": True, "answer": "1/2", "state": "3/3",
                                 "refusal": "1/1", "total": "5/6", "ok": False}
    assert rows["noop"]["state"] == "1/3" and rows["noop"]["ok"] is False
    assert rows["other-rule"]["refusal"] == "0/1" and rows["other-rule"]["state"] == "-"
    assert rows["accepted-forms"]["answer"] == "1/1"  # only tasks with typed `expect` have forms


def test_chance_levels(report: AuditReport) -> None:
    chance = {(c.kind, c.policy): c for c in report.chance}
    assert chance[("answer", "constant")].level == 0.5  # "3" answers count-stocked; top-fruit takes nothing
    assert chance[("refusal", "constant")].level == 1.0 and chance[("refusal", "random")].level == 0.5
    assert chance[("state", "constant")].level == pytest.approx(1 / 3)  # the planted empty alternative
    # a world whose seeds do not vary its data: what was right on seed 0 is right on every seed (top-fruit's own
    # reference fails everywhere)
    assert chance[("refusal", "memorised")].level == chance[("state", "memorised")].level == 1.0
    assert chance[("answer", "memorised")].level == 0.5
    assert any(w.startswith("refusal: random earns 0.50") for w in report.warnings)


def test_json_shape_and_determinism(world_path: Path, report: AuditReport) -> None:
    data = json.loads(report.to_json())
    assert set(data) == {"world", "ok", "tasks", "table", "chance", "warnings", "failures", "results"}
    assert data["world"] == "stall" and data["ok"] is False and len(data["tasks"]) == 6
    assert set(data["results"][0]) == {"task", "kind", "policy", "passed", "expected_pass", "attempts", "detail",
                                       "attempt"}
    assert len(data["failures"]) == len(report.failures)
    again = audit(WorldRuntime(load_world(world_path)))
    assert again.to_json() == report.to_json()


def test_task_selection_and_unknown_task(world_path: Path) -> None:
    runtime = WorldRuntime(load_world(world_path))
    seen: list[tuple[int, int, str]] = []
    clean = audit(runtime, HONEST, on_progress=lambda *a: seen.append(a))
    assert clean.ok, [f"{f.task}: {f.policy}: {f.detail}" for f in clean.failures]
    assert seen == [(1, 4, "restock"), (2, 4, "note-pear"), (3, 4, "count-stocked"), (4, 4, "refuse-plum")]
    with pytest.raises(UnknownTask):
        audit(runtime, ["nope"])


def test_cli_exit_codes_table_and_json(world_path: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "audit.json"
    bad = runner.invoke(main, ["world", "audit", str(world_path), "--json", str(out)])
    assert bad.exit_code == 1, bad.output
    assert "stall: restock-pear: noop: no calls, no answer" in bad.output
    assert "chance levels" in bad.output and "chance level above 1 in 10" in bad.output
    data = json.loads(out.read_text())
    assert data["ok"] is False and [w["world"] for w in data["worlds"]] == ["stall"]

    args = ["world", "audit", str(world_path), *(x for t in HONEST for x in ("--task", t))]
    clean = runner.invoke(main, args)
    assert clean.exit_code == 0, clean.output
    assert "no wrong policy passed 4 task(s)" in clean.output

    quiet = runner.invoke(main, ["world", "audit", str(world_path), "--quiet"])
    assert quiet.exit_code == 1 and "┃" not in quiet.output and "restock-pear: noop" in quiet.output

    assert runner.invoke(main, ["world", "audit", str(tmp_path / "missing")]).exit_code == 2
    unknown = runner.invoke(main, ["world", "audit", str(world_path), "--task", "nope"])
    assert unknown.exit_code == 2 and "unknown task(s) nope" in unknown.output

    helped = runner.invoke(main, ["world", "audit", "--help"])
    assert helped.exit_code == 0
    for text in ("Exit codes", "reward hacking", "mcpworld world audit airline", "--task", "--json", "--quiet"):
        assert text in helped.output


def test_same_report_in_every_process(world_path: Path, report: AuditReport, tmp_path: Path) -> None:
    """The same report whatever the hash seed (sets of candidates, key orders)."""
    import os
    import subprocess

    from mcpworld.core.testing import mcpworld_cmd

    out = tmp_path / "audit.json"
    subprocess.run(mcpworld_cmd("world", "audit", str(world_path), "--quiet", "--json", str(out)),
                   env={**os.environ, "PYTHONHASHSEED": "12345"}, capture_output=True, timeout=120)
    assert json.loads(out.read_text())["worlds"] == [json.loads(report.to_json())]
