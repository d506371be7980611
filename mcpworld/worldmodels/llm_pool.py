"""Several OpenAI-compatible endpoints behind one `complete`: SWT/SWR are served by many vLLM replicas.

Each endpoint is a `ChatClient` (which already retries timeouts, 429 and 5xx); the pool picks one per request
(round-robin or seeded random) and fails over to the others when it gives up, so one dead replica costs a retry,
not a failed episode. Clients are made per event loop: an httpx client must not outlive the loop it was made on,
and world models are called both from the server's loop and from worker threads with their own.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mcpworld.core.llm import ChatClient, Completion, LLMError


@dataclass(frozen=True)
class Endpoint:
    """One OpenAI-compatible server and the model name it serves (`--served-model-name`)."""

    base_url: str
    model: str
    api_key: str | None = None


def parse_urls(urls: str | Sequence[str] | None) -> list[str]:
    """Endpoint URLs from a list or a comma/space separated string (how MCPWORLD_SWT_URL holds replicas)."""
    if urls is None:
        return []
    items = urls.replace(",", " ").split() if isinstance(urls, str) else [u for u in urls if u]
    return [u.strip().rstrip("/") for u in items if u.strip()]


@dataclass
class ModelPool:
    """Spread chat completions over endpoints; on failure try the next one; raise LLMError when all fail."""

    endpoints: list[Endpoint]
    strategy: str = "round_robin"  # or "random"
    timeout_s: float = 120.0
    retries: int = 1
    seed: int | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    _clients: dict[int, tuple[asyncio.AbstractEventLoop, list[ChatClient]]] = field(default_factory=dict, repr=False)
    _counter: itertools.count = field(default_factory=itertools.count, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if not self.endpoints:
            raise ValueError("a model pool needs at least one endpoint")
        if self.strategy not in ("round_robin", "random"):
            raise ValueError(f"strategy must be round_robin or random, got {self.strategy!r}")
        self._rng = random.Random(self.seed)

    @classmethod
    def from_urls(cls, urls: str | Sequence[str], model: str, api_key: str | None = None,
                  **options: Any) -> ModelPool:
        """A pool serving `model` at every URL (the key defaults to $OPENAI_API_KEY)."""
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        return cls([Endpoint(u, model, key) for u in parse_urls(urls)], **options)

    @property
    def model(self) -> str:
        return self.endpoints[0].model

    def _loop_clients(self) -> list[ChatClient]:
        loop = asyncio.get_running_loop()
        with self._lock:
            for key, (other, _) in list(self._clients.items()):
                if other.is_closed():
                    del self._clients[key]
            entry = self._clients.get(id(loop))
            if entry is None or entry[0] is not loop:
                clients = [ChatClient(base_url=e.base_url, model=e.model, api_key=e.api_key, timeout_s=self.timeout_s,
                                      retries=self.retries, sampling=dict(self.sampling)) for e in self.endpoints]
                entry = self._clients[id(loop)] = (loop, clients)
            return entry[1]

    def _order(self) -> list[int]:
        """Endpoint indexes to try, first choice first."""
        n = len(self.endpoints)
        with self._lock:
            first = next(self._counter) % n if self.strategy == "round_robin" else self._rng.randrange(n)
        return [(first + i) % n for i in range(n)]

    async def complete(self, messages: list[dict[str, Any]], **sampling: Any) -> Completion:
        clients = self._loop_clients()
        problems = []
        for index in self._order():
            try:
                return await clients[index].complete(messages, **sampling)
            except LLMError as exc:
                problems.append(str(exc))
        raise LLMError("; ".join(problems))

    async def aclose(self) -> None:
        """Close the clients made on the current loop (others die with their loops)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        with self._lock:
            entry = self._clients.pop(id(loop), None)
        for client in entry[1] if entry else []:
            await client.aclose()
