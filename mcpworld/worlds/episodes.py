"""Live episodes of one world: the kernel's episode table (`mcpworld.core.episode_server`) over forks."""

from __future__ import annotations

from mcpworld.core.episode_server import EpisodeError, EpisodeLimits, EpisodeTable
from mcpworld.worlds.runtime import Episode, UnknownTask, WorldRuntime

__all__ = ["EpisodeError", "EpisodeLimits", "EpisodeManager", "WorldUnavailable"]


class WorldUnavailable(EpisodeError):
    """The world cannot start episodes: its seed (or a task's setup) raised when its template was first built."""


class EpisodeManager(EpisodeTable[Episode]):
    """Owns every live episode of one world: a start is a fork of the task's template, a close drops it.

    An episode serving a call is busy: neither the TTL nor a full table evicts it (`Episode.serving`)."""

    def __init__(self, runtime: WorldRuntime, limits: EpisodeLimits | None = None):
        self.runtime = runtime
        super().__init__(self._fork, Episode.close, limits, busy=lambda e: e.busy)

    def _fork(self, task_id: str | None, seed: int) -> Episode:
        try:
            return self.runtime.fork(task_id, seed)
        except UnknownTask:
            raise
        except BaseException as exc:  # SystemExit from a seed included: one broken world must not stop the server
            if isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
                raise
            name = self.runtime.world.name
            lines = str(exc).strip().splitlines()
            raise WorldUnavailable(
                f"world {name!r} cannot start an episode: building its starting state failed: "
                f"{type(exc).__name__}: {lines[0][:500] if lines else 'no message'}; every other world still "
                f"serves. Run `mcpworld world validate {name}` to see the problem, fix the world, then restart "
                "the server") from exc
