"""Which repository files a command executes: SWT sees their content, as in SWE-World.

Seeds come from the command line (scripts, `-m` modules, pytest paths and node ids, `-c` code, any argument naming a
file); the repository modules they import follow, breadth first, until the limit. Only files inside the workspace
are ever returned.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

from mcpworld.worldmodels.commands import command_words, split_segments

MAX_FILES = 20
_PYTHON = re.compile(r"^python[\d.]*$")
_PYTEST = {"pytest", "py.test"}
_SKIP_DIRS = {".git", "__pycache__", ".tox", ".venv", "venv", "node_modules", "build", "dist", ".eggs",
              ".mypy_cache", ".pytest_cache", "site-packages"}


def _inside(root: Path, path: Path) -> str | None:
    """`path` relative to `root` when it is a file inside it."""
    try:
        real_root, real = Path(os.path.realpath(root)), Path(os.path.realpath(path))
        rel = real.relative_to(real_root)
    except (ValueError, OSError):
        return None
    return str(rel) if real.is_file() and ".git" not in rel.parts else None


def _test_files(root: Path, folder: Path, limit: int) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")
                                         or name == "conftest.py"):
                rel = _inside(root, Path(dirpath) / name)
                if rel:
                    out.append(rel)
                    if len(out) >= limit:
                        return out
    return out


def module_file(root: Path, module: str, level: int = 0, current: str | None = None) -> str | None:
    """The repository file for a dotted module (absolute, or relative to the file `current`)."""
    if level:
        if current is None:
            return None
        base = Path(current).parent
        for _ in range(level - 1):
            base = base.parent
        parts = [*base.parts, *(module.split(".") if module else [])]
        bases = [root]
    else:
        parts = module.split(".")
        bases = [root, root / "src", root / "lib"]
    if not parts:
        return None
    for base in bases:
        for candidate in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
            rel = _inside(root, candidate)
            if rel:
                return rel
    return None


def _imports(root: Path, rel: str, source: str) -> list[str]:
    """Repository files a Python source imports (package __init__ files included)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out: list[str] = []

    def add(module: str, level: int = 0) -> None:
        found = module_file(root, module, level, rel)
        if found and found not in out:
            out.append(found)
        if not level and "." in module:  # the package that holds it runs first
            pkg = module_file(root, module.rsplit(".", 1)[0])
            if pkg and pkg not in out:
                out.append(pkg)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            add(node.module or "", node.level)
            for alias in node.names:  # `from pkg import submodule`
                add(f"{node.module}.{alias.name}" if node.module else alias.name, node.level)
    return out


def _pytest_targets(root: Path, cwd: Path, args: list[str], limit: int) -> list[str]:
    out: list[str] = []
    skip_next = False
    paths = []
    for arg in args:
        if skip_next:
            skip_next = False
            continue
        if arg in ("-p", "-k", "-m", "-c", "-o", "--rootdir", "--deselect", "--ignore", "-W", "--tb", "-n"):
            skip_next = True
            continue
        if arg.startswith("-"):
            continue
        paths.append(arg.split("::", 1)[0])
    for p in paths or ["."]:
        target = cwd / p
        if target.is_dir():
            out += _test_files(root, target, limit)
        elif rel := _inside(root, target):
            out.append(rel)
    conftest = _inside(root, root / "conftest.py")
    return ([conftest] if conftest else []) + out


def _seeds(command: str, root: Path, cwd: Path) -> list[str]:
    """Files named or implied by the command line itself, in order."""
    seeds: list[str] = []
    for segment in split_segments(command):
        words = command_words(segment)
        if not words:
            continue
        prog = os.path.basename(words[0])
        args = words[1:]
        if _PYTHON.match(prog):
            while args and args[0].startswith("-") and args[0] not in ("-m", "-c"):
                args = args[1:]
            if args[:1] == ["-m"] and len(args) > 1:
                if args[1] in _PYTEST:
                    seeds += _pytest_targets(root, cwd, args[2:], MAX_FILES)
                    continue
                found = module_file(root, args[1])
                main = module_file(root, args[1] + ".__main__")
                seeds += [f for f in (found, main) if f]
                continue
            if args[:1] == ["-c"] and len(args) > 1:
                seeds += _imports(root, "<string>", args[1])
                continue
            args = args[:1]
        elif prog in _PYTEST:
            seeds += _pytest_targets(root, cwd, args, MAX_FILES)
            continue
        for arg in [words[0], *args]:
            if not arg.startswith("-") and (rel := _inside(root, cwd / arg.split("::", 1)[0])):
                seeds.append(rel)
    return seeds


def executed_files(command: str, root: Path, cwd: Path | None = None, limit: int = MAX_FILES) -> list[str]:
    """Up to `limit` repository files (relative paths) the command runs: named ones first, then their imports."""
    cwd = cwd or root
    order: list[str] = []
    queue = list(dict.fromkeys(_seeds(command, root, cwd)))
    while queue and len(order) < limit:
        rel = queue.pop(0)
        if rel in order:
            continue
        order.append(rel)
        if rel.endswith(".py"):
            try:
                source = (root / rel).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            queue += [f for f in _imports(root, rel, source) if f not in order and f not in queue]
    return order
