"""Install a world package into $MCPWORLD_HOME/worlds and register it with a running registry, if any.

`mcpworld up` registers every installed world when it starts, so an unreachable registry is not an
error: the world is installed, and the message says so.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mcpworld.core.paths import user_worlds_dir
from mcpworld.registry.records import local_record
from mcpworld.worlds.world import World


@dataclass
class Registration:
    registered: bool
    message: str


class InstallError(RuntimeError):
    """A package that failed its checks: nothing of it was installed (an older copy, if any, is untouched)."""


def package_problems(path: Path) -> list[str]:
    """What `mcpworld world validate` finds wrong with the package at `path` (empty: it may be installed)."""
    from mcpworld.worlds.validate import validate

    world, problems = validate(path)
    found = [str(p) for p in problems]
    if world is None and not found:
        found.append(f"{path.name}: the package does not load")
    return found


@contextlib.contextmanager
def staging(name: str) -> Iterator[Path]:
    """A private folder inside the worlds directory to build `name` in before it is moved into place.

    Its name starts with a dot, so world discovery never sees it; it is removed, with whatever is left in it,
    when the block ends (after a failure too).
    """
    root = user_worlds_dir()
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".installing-{name}-", dir=root))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def move_into_place(staged: Path, name: str) -> Path:
    """Replace the installed `name` with the staged package by renames on one filesystem; returns its path."""
    dest = user_worlds_dir() / name
    old = None
    if dest.exists():
        old = staged.parent / f".replaced-{name}"
        os.replace(dest, old)
    try:
        os.replace(staged, dest)
    except OSError:
        if old is not None:  # put the older copy back rather than leave nothing installed
            os.replace(old, dest)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return dest


def install_package(src: Path, name: str,
                    check: Callable[[Path], list[str]] | None = package_problems) -> Path:
    """Install a package into the user's worlds directory (replacing an older copy); returns the new path.

    The copy is made under a temporary name and checked there (`check`, by default `mcpworld world validate`);
    only a package that passes is moved into place. One that fails raises InstallError, and nothing of it is
    left installed.
    """
    dest = user_worlds_dir() / name
    if src.resolve() == dest.resolve():
        problems = check(dest) if check else []
        if problems:
            raise InstallError(f"{name} fails validation: " + "; ".join(problems))
        return dest
    with staging(name) as tmp:
        staged = tmp / name
        shutil.copytree(src, staged, ignore=shutil.ignore_patterns("__pycache__"))
        problems = check(staged) if check else []
        if problems:
            raise InstallError(f"{name} was not installed: it fails validation: " + "; ".join(problems))
        return move_into_place(staged, name)


def register(world: World, source: str, registry: str | None = None) -> Registration:
    """Register a loaded world (imported worlds: their code is ours, the tools run in workers)."""
    return register_record(world.name, world.title, world.description, world.version, world.tags, len(world.tasks),
                           len(world.tools), source, registry)


def register_record(name: str, title: str, description: str, version: str, tags: list[str], tasks: int, tools: int,
                    source: str, registry: str | None = None, timeout: float = 3.0) -> Registration:
    """POST /v0/publish with the registry token; says plainly when no registry answers.

    The record launches the world over stdio (`mcpworld serve world NAME`); `mcpworld up` adds its HTTP URL
    when it next starts and serves it.
    """
    from mcpworld.core.paths import registry_token
    from mcpworld.registry.client import RegistryClient, RegistryError

    token, _ = registry_token(None)
    record = local_record(name, description, "world", title=title, version=version,
                          stdio_args=["serve", "world", name, "--stdio"],
                          facts={"tags": tags, "tools": tools, "tasks": tasks, "source": source})
    with RegistryClient(registry, timeout=timeout, token=token) as client:
        base = client.base
        try:
            client.request("GET", "/healthz")
        except RegistryError as exc:
            return Registration(False, f"registry at {base} is not reachable ({exc.status or 'no answer'}); the world "
                                       "is installed and `mcpworld up` will register it when it starts")
        try:
            client.request("POST", "/v0/publish", json=record)
        except RegistryError as exc:
            if exc.status == 409:
                return Registration(True, f"io.mcpworld/{name} {version} was already registered at {base}")
            return Registration(False, f"registry at {base} refused the record: {exc}")
    return Registration(True, f"registered io.mcpworld/{name} at {base}")
