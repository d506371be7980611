"""Find and import world packages: the shipped catalog, the user's worlds directory, or any path.

A world package is a directory with an `__init__.py` that defines `world = World(...)`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from mcpworld.core.paths import user_worlds_dir
from mcpworld.worlds.world import World

CATALOG_DIR = Path(__file__).parent / "catalog"


class WorldLoadError(Exception):
    """A world package could not be imported; says which file and why."""


@dataclass(frozen=True)
class WorldRef:
    name: str
    path: Path


def _module_name(path: Path) -> str:
    if path.parent == CATALOG_DIR:
        return f"mcpworld.worlds.catalog.{path.name}"
    return f"mcpworld_world_{abs(hash(str(path.resolve()))):x}_{path.name}"


def load_world(path: str | Path) -> World:
    """Import the world package at `path` and return its `world`."""
    path = Path(path)
    init = path / "__init__.py" if path.is_dir() else path
    if not init.is_file():
        raise WorldLoadError(f"{path}: not a world package (expected a directory with __init__.py)")
    package = init.parent if init.name == "__init__.py" else None
    module_name = _module_name(package or init.with_suffix(""))
    if module_name in sys.modules:
        module = sys.modules[module_name]
    else:
        spec = importlib.util.spec_from_file_location(
            module_name, init, submodule_search_locations=[str(package)] if package else None
        )
        if spec is None or spec.loader is None:
            raise WorldLoadError(f"{init}: cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:  # SystemExit at import included: a broken package, not a reason to exit
            sys.modules.pop(module_name, None)
            if isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
                raise
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            what = " (the package exits at import)" if isinstance(exc, SystemExit) else ""
            raise WorldLoadError(
                f"{frame.filename}:{frame.lineno}: {type(exc).__name__}: {exc}{what}"
            ) from exc
    world = getattr(module, "world", None)
    if not isinstance(world, World):
        raise WorldLoadError(f"{init}: defines no `world = World(...)`")
    if not world.digest:
        world.digest = package_digest(package or init)
    return world


def package_digest(path: Path) -> str:
    """A content hash of a world package (its code and data files, by relative path): which build of a world
    produced a trajectory, so stored rollouts can be re-scored and compared after the world changes."""
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(path.parent if path.is_file() else path)).encode() + b"\0")
        digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def discover(extra: list[Path] | None = None) -> list[WorldRef]:
    """World packages in the catalog, the user's worlds directory, and `extra` dirs (first name wins)."""
    found: dict[str, WorldRef] = {}
    for root in [CATALOG_DIR, user_worlds_dir(), *(extra or [])]:
        if not root.is_dir():
            continue
        for child in sorted(root.iterdir()):
            if (child / "__init__.py").is_file() and not child.name.startswith(("_", ".")):
                found.setdefault(child.name, WorldRef(child.name, child))
    return list(found.values())


def resolve(name_or_path: str) -> Path:
    """A world name from `discover()` or a path to a package."""
    path = Path(name_or_path)
    if path.exists():
        return path
    for ref in discover():
        if ref.name == name_or_path:
            return ref.path
    known = ", ".join(r.name for r in discover()) or "(none)"
    raise WorldLoadError(f"no world named {name_or_path!r}; installed worlds: {known}")
