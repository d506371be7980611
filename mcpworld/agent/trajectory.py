"""Trajectories: one episode per JSONL line, appended atomically so a crash never leaves half a line.

Readers never trust a file: a torn or undecodable line (a copy cut short, a disk that filled up, a file cut
inside a multibyte character) is skipped with a `TornLineWarning` naming the file and line, never a crash.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from mcpworld.core.models import ToolCall, Verdict
from mcpworld.core.termination import Termination


class CallRecord(ToolCall):
    is_error: bool = False
    latency_ms: float = 0.0


class Step(BaseModel):
    turn: int
    policy_ms: float
    calls: list[CallRecord] = Field(default_factory=list)


class Trajectory(BaseModel):
    """Everything about one episode. Schema documented in docs/trajectories.md."""

    server: str
    task: str
    sample: int = 0
    seed: int = 0
    episode: str | None = None
    policy: str
    model: str | None = None
    format: str = "native"
    messages: list[dict[str, Any]] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    usage: dict[str, int] = Field(default_factory=dict)
    verdict: Verdict | None = None
    reward: float = 0.0
    termination: Termination = Termination.FINAL_ANSWER
    error: str | None = None
    duration_s: float = 0.0
    attempts: int = 1  # tries this (task, sample) took: more than 1 when infrastructure errors were retried
    environment: dict[str, str] = Field(default_factory=dict)  # the build that judged it (world, version, digest,
    # mcpworld, verdict): what `mcpworld rescore` compares against

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.server, self.task, self.sample)

    @property
    def is_infra(self) -> bool:
        """Lost to an infrastructure error: no reward, not a sample of the policy, to be played again."""
        return Termination(self.termination).infra

    @property
    def is_scored(self) -> bool:
        """A sample of the policy with a reward (not an infra error, not a model error): what training uses."""
        return Termination(self.termination).scored

    @property
    def is_penalized(self) -> bool:
        """Ended by the agent's own protocol error (format error, unknown tool): `FORMAT_PENALTY`."""
        return Termination(self.termination).penalized

    @property
    def infra_reason(self) -> str | None:
        """Why an infra error happened ("server unreachable", "connection lost", ...); None for other episodes."""
        if not self.is_infra:
            return None
        head = (self.error or "").split(":", 1)[0]
        return head if head in INFRA_REASONS else "server error"


INFRA_REASONS = ("server unreachable", "connection lost", "server timed out", "server error", "worker crash")


class TornLineWarning(UserWarning):
    """A line of a JSONL file that could not be read (torn, undecodable or not a record); it was skipped."""


def _skip(path: Path, lineno: int, why: str, stacklevel: int) -> None:
    warnings.warn(f"{path}:{lineno}: skipped a torn or undecodable line ({why})", TornLineWarning,
                  stacklevel=stacklevel + 1)


def read_jsonl(path: str | Path, stacklevel: int = 2) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, JSON object) for every readable line of `path`; the rest are skipped with a warning.

    The file is read as bytes and each line decoded on its own, so one torn line (cut inside a multibyte
    character, or garbage) costs that line only.
    """
    path = Path(path)
    for lineno, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            _skip(path, lineno, f"not UTF-8: {exc.reason} at byte {exc.start}", stacklevel)
            continue
        except ValueError as exc:
            _skip(path, lineno, f"not JSON: {exc}", stacklevel)
            continue
        if not isinstance(record, dict):
            _skip(path, lineno, f"a JSON {type(record).__name__}, not an object", stacklevel)
            continue
        yield lineno, record


class TrajectoryWriter:
    """Appends whole lines with one write() on an O_APPEND descriptor, then fsyncs."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._repair()

    def _repair(self) -> None:
        """Drop a torn last line left by a crash of some other writer, so appends start on a line boundary."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return
            f.seek(0)
            content = f.read()
            f.seek(content.rfind(b"\n") + 1)
            f.truncate()

    def append(self, trajectory: Trajectory) -> None:
        line = (trajectory.model_dump_json() + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)


def read_trajectories(path: str | Path) -> list[Trajectory]:
    """Every readable trajectory of a file, infra errors included (filter with `Trajectory.is_infra`).

    Torn, undecodable and invalid lines are skipped with a `TornLineWarning` that names file:line.
    """
    out: list[Trajectory] = []
    path = Path(path)
    if not path.exists():
        return out
    for lineno, record in read_jsonl(path, stacklevel=3):
        try:
            out.append(Trajectory.model_validate(record))
        except ValueError as exc:
            _skip(path, lineno, f"not a trajectory: {str(exc).splitlines()[0]}", 2)
    return out
