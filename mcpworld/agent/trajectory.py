"""Trajectories: one episode per JSONL line, appended atomically so a crash never leaves half a line."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcpworld.models import ToolCall, Verdict

Termination = Literal["final_answer", "max_turns", "timeout", "format_error", "unknown_tool", "server_error",
                      "model_error", "episode_timeout"]


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
    termination: Termination = "final_answer"
    error: str | None = None
    duration_s: float = 0.0

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.server, self.task, self.sample)


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
    """Every complete line of a trajectory file (a torn last line is skipped)."""
    out = []
    path = Path(path)
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                out.append(Trajectory.model_validate(json.loads(line)))
            except ValueError:
                continue
    return out
