"""Live episodes of one world: start, look up, evict after idling, cap how many are alive."""

from __future__ import annotations

import time
from dataclasses import dataclass

from mcpworld.worlds.runtime import Episode, WorldRuntime


class EpisodeError(LookupError):
    """An episode could not be found or started; the message says what to do."""


@dataclass
class EpisodeLimits:
    ttl_s: float = 1800.0
    max_episodes: int = 4096


class EpisodeManager:
    """Owns every live episode of one world. Idle ones are evicted lazily, whenever episodes are touched."""

    def __init__(self, runtime: WorldRuntime, limits: EpisodeLimits | None = None):
        self.runtime = runtime
        self.limits = limits or EpisodeLimits()
        self._live: dict[str, Episode] = {}
        self._defaults: dict[str, str] = {}  # connection key -> episode id, for clients that send no id
        # Episodes minted for sessionless plain clients (their handle is all that names them): when the cap is
        # reached, the least recently used of these makes room before a new episode is refused.
        self._implicit: set[str] = set()
        self._last_sweep = time.monotonic()

    def __len__(self) -> int:
        return len(self._live)

    def start(self, task_id: str | None, seed: int = 0, *, implicit: bool = False) -> Episode:
        """A fresh episode. `implicit`: minted for a plain client by handle, and evictable when the cap is hit."""
        self.sweep()
        if len(self._live) >= self.limits.max_episodes and self._implicit:
            oldest = min(self._implicit, key=lambda eid: self._live[eid].last_used if eid in self._live else 0.0)
            self.close(oldest)
        if len(self._live) >= self.limits.max_episodes:
            raise EpisodeError(
                f"too many live episodes ({len(self._live)} of max {self.limits.max_episodes}); "
                "close finished episodes or raise --max-episodes"
            )
        episode = self.runtime.fork(task_id, seed)
        self._live[episode.id] = episode
        if implicit:
            self._implicit.add(episode.id)
        return episode

    def get(self, episode_id: str) -> Episode:
        self.sweep()
        episode = self._live.get(episode_id)
        if episode is None:
            raise EpisodeError(
                f"unknown episode {episode_id!r}: it was closed, expired after {self.limits.ttl_s:g}s idle, "
                "or never existed; start a new one"
            )
        episode.last_used = time.monotonic()
        return episode

    def default(self, connection: str) -> Episode:
        """The episode for a client that sends no episode id: one per connection, made on first use."""
        episode_id = self._defaults.get(connection)
        if episode_id is not None and episode_id in self._live:
            return self.get(episode_id)
        episode = self.start(None)
        self._defaults[connection] = episode.id
        return episode

    def default_id(self, connection: str) -> str | None:
        """The id of this connection's default episode, if it has a live one."""
        episode_id = self._defaults.get(connection)
        return episode_id if episode_id in self._live else None

    def replace_default(self, connection: str, task_id: str | None, seed: int = 0) -> Episode:
        """Start a task as this connection's default episode (the interactive `start_task` tool)."""
        old = self._defaults.pop(connection, None)
        if old is not None:
            self.close(old)
        episode = self.start(task_id, seed)
        self._defaults[connection] = episode.id
        return episode

    def close(self, episode_id: str) -> bool:
        episode = self._live.pop(episode_id, None)
        self._implicit.discard(episode_id)
        if episode is None:
            return False
        episode.close()
        return True

    def sweep(self) -> int:
        """Evict episodes idle longer than the TTL; cheap enough to call on every request."""
        now = time.monotonic()
        if now - self._last_sweep < min(1.0, self.limits.ttl_s / 2):
            return 0
        self._last_sweep = now
        expired = [eid for eid, e in self._live.items() if now - e.last_used > self.limits.ttl_s]
        for eid in expired:
            self.close(eid)
        return len(expired)

    def close_all(self) -> None:
        for eid in list(self._live):
            self.close(eid)
