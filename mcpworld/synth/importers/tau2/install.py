"""`mcpworld synth import-tau2 PATH`: write each τ² domain's package, check it, install it (see package.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mcpworld.synth.importers.tau2.package import DOMAINS, world_name, write_package


@dataclass
class Imported:
    name: str
    path: Path
    tools: int
    tasks: int
    user_tools: int = 0  # the user's own tools (telecom's phone)


def find_data(path: Path) -> Path:
    """The τ² data folder (the one holding `domains/`) at or under `path`."""
    for candidate in (path, path / "tau2", path / "data" / "tau2"):
        if (candidate / "domains").is_dir():
            return candidate
    raise FileNotFoundError(f"{path}: no τ² data folder (one with domains/<domain>/db.json) here")


def import_domains(path: Path, domains: list[str] | None = None, *, install: bool = True,
                   out: Path | None = None, say: Callable[[str], None] | None = None) -> list[Imported]:
    """Write (and with `install`, validate and install) the packages of `domains` (default: all served ones);
    `say` hears which domain is being imported (each plays every task's gold: telecom's 2,285 take a minute or
    two)."""
    from mcpworld.synth.importers.install import install_package
    from mcpworld.worlds.loader import load_world

    data = find_data(path)
    done = []
    for domain in domains or list(DOMAINS):
        if domain not in DOMAINS:
            raise ValueError(f"τ² domain {domain!r} is not served yet; served: {', '.join(DOMAINS)}")
        name = world_name(domain)
        if say is not None:
            say(f"importing {name}: writing the package, playing each task's gold, validating")
        target = (out or Path(".")) / name
        if install:
            from mcpworld.synth.importers.install import staging

            with staging(name) as tmp:
                package = install_package(write_package(data, domain, tmp / name), name)
        else:
            package = write_package(data, domain, target)
        world = load_world(package)
        done.append(Imported(name=name, path=package, tools=len(world.tools), tasks=len(world.tasks),
                             user_tools=len(world.user_tools)))
    return done
