"""A tasks file installed as a world: the base world's tools and data with the file's tasks, under a name of its
own in $MCPWORLD_HOME/worlds, so every command that takes a world (`up`, `run`, `serve`, `train`, the TUI) can use
tasks `synth graph-tasks` wrote. The package is constant code plus data: the tasks file and `package.json`."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from mcpworld.synth.importers.install import install_package
from mcpworld.synth.tasks.taskspec import load_task_file

MANIFEST = "package.json"
PACKAGE_INIT = '''"""Tasks from a file on another world's tools and data: installed by `mcpworld synth install-tasks`
(see package.json and tasks.json)."""

import dataclasses
import json
from pathlib import Path

from mcpworld.synth.tasks.taskspec import load_tasks, with_tasks
from mcpworld.worlds.loader import load_world, resolve

_here = Path(__file__).parent
_meta = json.loads((_here / "package.json").read_text(encoding="utf-8"))
_base = load_world(resolve(_meta["base"]))
world = dataclasses.replace(with_tasks(_base, load_tasks(_here / "tasks.json"), replace=_meta["only"]),
                            name=_meta["name"], title=f"{_base.title} ({_meta['name']})")
'''


def install_tasks(base: str, tasks_file: Path, name: str, only: bool = False) -> tuple[Path, int]:
    """Install `tasks_file` on world `base` as the world `name` (its own tasks kept too, unless `only`); checked
    by `world validate` before it is moved into place. Returns the package path and how many tasks it has."""
    if name == base:
        raise ValueError(f"the new world needs a name of its own, not {base!r} (for example {base}-graph)")
    try:  # a malformed file fails here, before anything is written
        tasks = load_task_file(tasks_file).tasks
    except (OSError, ValueError) as exc:  # JSON or schema: both ValueErrors
        detail = " ".join(str(exc).split())[:300]
        raise ValueError(f"{tasks_file} is not a tasks file (what `synth graph-tasks` writes): {detail}") from None
    if not tasks:
        raise ValueError(f"{tasks_file} holds no tasks")
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp) / name
        pkg.mkdir()
        (pkg / "__init__.py").write_text(PACKAGE_INIT, encoding="utf-8")
        (pkg / "tasks.json").write_text(Path(tasks_file).read_text(encoding="utf-8"), encoding="utf-8")
        (pkg / MANIFEST).write_text(json.dumps({"base": base, "name": name, "only": only}, indent=1) + "\n",
                                    encoding="utf-8")
        path = install_package(pkg, name)
    from mcpworld.worlds.loader import load_world

    return path, len(load_world(path).tasks)
