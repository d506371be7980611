"""Install a world package into $MCPWORLD_HOME/worlds and register it with a running registry, if any.

`mcpworld up` registers every installed world when it starts, so an unreachable registry is not an
error: the world is installed, and the message says so.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import httpx

from mcpworld.core.paths import user_worlds_dir
from mcpworld.registry.connect import registry_url
from mcpworld.registry.records import local_record
from mcpworld.worlds.world import World


@dataclass
class Registration:
    registered: bool
    message: str


def install_package(src: Path, name: str) -> Path:
    """Copy a package to the user's worlds directory (replacing an older copy); returns the new path."""
    dest = user_worlds_dir() / name
    if src.resolve() == dest.resolve():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


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

    base = (registry or registry_url()).rstrip("/")
    try:
        httpx.get(f"{base}/healthz", timeout=timeout).raise_for_status()
    except httpx.HTTPError as exc:
        return Registration(False, f"registry at {base} is not reachable ({type(exc).__name__}); the world is "
                                   "installed and `mcpworld up` will register it when it starts")
    record = local_record(name, description, "world", title=title, version=version,
                          stdio_args=["serve", "world", name, "--stdio"],
                          facts={"tags": tags, "tools": tools, "tasks": tasks, "source": source})
    token, _ = registry_token(None)
    try:
        response = httpx.post(f"{base}/v0/publish", json=record, timeout=timeout,
                              headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as exc:
        return Registration(False, f"registry at {base} failed: {type(exc).__name__}: {exc}")
    if response.status_code == 409:
        return Registration(True, f"io.mcpworld/{name} {version} was already registered at {base}")
    if response.status_code >= 400:
        return Registration(False, f"registry at {base} refused the record: HTTP {response.status_code}: "
                                   f"{response.text[:300]}")
    return Registration(True, f"registered io.mcpworld/{name} at {base}")
