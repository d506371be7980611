"""SWE execution backends chosen by name (`--backend local|docker|simulated`): one table, name -> factory.

A factory gets the instance set it will serve or grade, so the sandbox it makes hides those instances' answers
(`instances.answer_paths`). local and docker live in `swe.shell`; simulated (SWT predicts what code prints, SWR
grades) is a world model, a layer above the sandbox, so its entry names its factory by import path and is imported
only when chosen: the sandbox never depends on it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcpworld.swe.instances import Instance, answer_paths
from mcpworld.swe.shell import BackendUnavailable, DockerBackend, ExecutionBackend, LocalBackend

if TYPE_CHECKING:
    from mcpworld.swe.server import Grader


@dataclass(frozen=True)
class SWEBackend:
    """What a backend name gives: where commands run and, when it is not real grading, who grades a submission."""

    execution: ExecutionBackend
    grader: Grader | None = None


BackendFactory = Callable[[Sequence[Instance]], SWEBackend]


def local_backend(instances: Sequence[Instance]) -> SWEBackend:
    """Commands run here, contained, with the instances' files and source repositories hidden."""
    return SWEBackend(LocalBackend(hidden=tuple(answer_paths(instances))))


def docker_backend(instances: Sequence[Instance]) -> SWEBackend:
    """Commands run in a container per workspace, which sees nothing but the workspace."""
    return SWEBackend(DockerBackend())


def imported(path: str) -> BackendFactory:
    """The factory at `path` ("module:function"), imported on first use: for backends of higher layers."""
    module, _, name = path.partition(":")

    def factory(instances: Sequence[Instance]) -> SWEBackend:
        made: SWEBackend = getattr(importlib.import_module(module), name)(instances)
        return made

    return factory


BACKENDS: dict[str, BackendFactory] = {
    "local": local_backend,
    "docker": docker_backend,
    "simulated": imported("mcpworld.worldmodels.backend:swe_backend"),  # $MCPWORLD_SWT_URL, $MCPWORLD_SWR_URL
}


def make_backend(name: str, instances: Sequence[Instance]) -> SWEBackend:
    """The backend called `name` for these instances; raises BackendUnavailable saying why it cannot run here."""
    factory = BACKENDS.get(name)
    if factory is None:
        raise BackendUnavailable(f"unknown backend {name!r}; choose {', '.join(BACKENDS)}")
    return factory(instances)
