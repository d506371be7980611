"""Live episodes of one world: the kernel's episode table (`mcpworld.core.episode_server`) over forks."""

from __future__ import annotations

from mcpworld.core.episode_server import EpisodeError, EpisodeLimits, EpisodeTable
from mcpworld.worlds.runtime import Episode, WorldRuntime

__all__ = ["EpisodeError", "EpisodeLimits", "EpisodeManager"]


class EpisodeManager(EpisodeTable[Episode]):
    """Owns every live episode of one world: a start is a fork of the task's template, a close drops it."""

    def __init__(self, runtime: WorldRuntime, limits: EpisodeLimits | None = None):
        self.runtime = runtime
        super().__init__(runtime.fork, Episode.close, limits)
