"""`mcpworld world validate` names the file and field of every problem and exits non-zero."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

WORLD = '''
from sqlmodel import Field
from mcpworld.worlds.world import Session, Task, ToolError, World, call, tool, world_base

Base = world_base()


class Item(Base, table=True):
    id: str = Field(primary_key=True)
    qty: int = Field(ge=0)


def seed(db: Session) -> None:
    db.add_all([Item(id="a", qty=1), Item(id="b", qty=2)])
    {extra_seed}


@tool
def get_item(db: Session, item_id: str) -> Item:
    """Get an item."""
    return db.get(Item, item_id)


@tool(writes=True)
def set_qty(db: Session, item_id: str, qty: int) -> Item:
    """Set an item's quantity."""
    item = db.get(Item, item_id)
    item.qty = qty
    return item


TASKS = [
    Task(id="good", instruction="Set a to 5", solution=[call("set_qty", item_id="a", qty=5)],
         verify=lambda o: o.diff.updated("item", "a", qty=5)),
    {bad_tasks}
]

world = World(name="mini", title="Mini", description="A tiny world", scenario="Items.", base=Base,
              seed=seed, tools=[get_item, set_qty], tasks=TASKS)
'''

BAD_TASKS = '''
    Task(id="good", instruction="dup", verify=lambda o: True),
'''


def write_world(root: Path, extra_seed: str = "", bad_tasks: str = "") -> Path:
    pkg = root / "mini"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(WORLD.format(extra_seed=extra_seed, bad_tasks=textwrap.dedent(bad_tasks)))
    return pkg


def run_validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcpworld", "world", "validate", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_valid_world_passes(tmp_path: Path) -> None:
    result = run_validate(write_world(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "ok  mini: 2 tools, 1 tasks" in result.stdout


def test_every_problem_is_reported_with_file_and_field(tmp_path: Path) -> None:
    bad = '''
    Task(id="unknown-tool", instruction="x", solution=[call("nope")], verify=lambda o: True),
    Task(id="bad-args", instruction="x", solution=[call("set_qty", item_id="a", qty="many")],
         verify=lambda o: True),
    Task(id="raises", instruction="x", solution=[call("get_item", item_id="a")], verify=lambda o: 1 / 0),
    Task(id="noop-passes", instruction="x", solution=[], verify=lambda o: o.diff.unchanged()),
    Task(id="ref-fails", instruction="x", solution=[call("set_qty", item_id="a", qty=4)],
         verify=lambda o: o.diff.updated("item", "a", qty=5)),
    '''
    pkg = write_world(tmp_path, bad_tasks=bad)
    result = run_validate(pkg)
    assert result.returncode == 1
    err = result.stderr
    init = str(pkg / "__init__.py")
    assert f"{init}: task unknown-tool: solution[0]: unknown tool 'nope'" in err
    assert "task bad-args: solution[0]: invalid arguments for set_qty: qty: Input should be a valid integer" in err
    assert "task raises: verify: the reference solution fails its verifier: verifier ran (ZeroDivisionError" in err
    assert "task noop-passes: verify: a no-op episode passes" in err
    assert "task ref-fails: verify: the reference solution fails its verifier" in err
    assert "5 problem(s) found" in err


def test_duplicate_task_id(tmp_path: Path) -> None:
    result = run_validate(write_world(tmp_path, bad_tasks=BAD_TASKS))
    assert result.returncode == 1 and "tasks: duplicate task id 'good'" in result.stderr


def test_seed_breaking_a_constraint(tmp_path: Path) -> None:
    result = run_validate(write_world(tmp_path, extra_seed='db.add(Item(id="a", qty=3))'))
    assert result.returncode == 1
    assert ": seed: IntegrityError" in result.stderr and "UNIQUE constraint failed: item.id" in result.stderr


def test_import_error_names_the_line(tmp_path: Path) -> None:
    pkg = tmp_path / "broken"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("x = 1\nraise RuntimeError('boom')\n")
    result = run_validate(pkg)
    assert result.returncode == 1
    assert f"{pkg / '__init__.py'}:2: RuntimeError: boom" in result.stderr


def test_not_a_world(tmp_path: Path) -> None:
    result = run_validate(tmp_path / "missing")
    assert result.returncode == 1 and "no world named" in result.stderr
