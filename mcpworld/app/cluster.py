"""`mcpworld up --ray`: world servers as Ray actors on a cluster's CPU nodes, each a replica in the registry.

The `up` process keeps the registry (its REST API, its MCP server, the health checks) and places `replicas` actors
(`WorldReplica`) with Ray's SPREAD strategy, each declaring `num_cpus`. An actor builds the same world servers
`up` builds and serves them over Streamable HTTP (the same app as `mcpworld serve worlds`: `worlds_app`, served
by uvicorn with `core.serving`'s protocol and settings) on a free port of its node, bound to the node's address,
with the registry token required beyond loopback. `up` registers each actor's URL as a replica of every world's
record (`RegistryStore.add_replica`): the registry merges live replicas into the records' `remotes`, and every
client (`connect`, `EpisodeClient`, the trainer adapters) spreads episodes over them. Episode ids are minted by
the replica that holds them, so requests need no router.

Failures: an actor that dies is restarted by Ray (`max_restarts`, on any node with room) at a new address.
`Placement.keep` asks each actor where it serves every `poll_s`: a dead or restarting actor's replica is marked
down at once (it leaves the records' remotes), a restarted one is registered at its new address, and the
registry's health checks drop a replica that stops answering and add it back when it answers. Episodes on a
lost replica end as infrastructure errors on the client (never a reward) and its retry goes to a live replica.

`scale(n)` adds actors, or removes some: a replica leaving is first dropped from the registry, then drained (its
live episodes end, up to `drain_s`), then stopped, so no episode on a replica that stays is touched.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from mcpworld.registry.store import RegistryStore

logger = logging.getLogger(__name__)

ACTOR_NAME = "mcpworld-replica"


def import_ray() -> Any:
    """Ray, or a clear error naming the extra (`core.extras.MissingExtra`)."""
    from mcpworld.core.extras import require

    require("ray", "ray", why="`mcpworld up --ray`")
    import ray

    return ray


class WorldReplica:
    """One replica: every world of the set, served over Streamable HTTP on a free port of this node (a Ray actor;
    `ray.remote` is applied by `Placement`, so this module imports without Ray)."""

    def __init__(self, names: list[str], token: str, interactive: bool = False, max_episodes: int = 4096,
                 host: str | None = None):
        import uvicorn

        from mcpworld.core.security import Exposure
        from mcpworld.core.serving import config, listening_socket, settle_collector
        from mcpworld.worlds.episodes import EpisodeLimits
        from mcpworld.worlds.host import build_servers, worlds_app

        os.environ["MCPWORLD_REGISTRY_TOKEN"] = token
        if host is None:
            import ray

            host = ray.util.get_node_ip_address()
        self.host = host
        self.servers = build_servers(names, EpisodeLimits(max_episodes=max_episodes), interactive=interactive,
                                     skip_broken=True, token=token)
        app = worlds_app(self.servers, host, exposure=Exposure.of(host, token, (host,)))
        settle_collector()
        sock = listening_socket(host, 0)
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(config(app))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True,
                                       name="mcpworld-replica")
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self.server.started:
            raise RuntimeError(f"the world servers did not start on {host}")

    def info(self) -> dict[str, Any]:
        """Where this replica serves, what, and how busy it is."""
        import ray

        ctx = ray.get_runtime_context()
        live = sum(len(s.episodes) for s in self.servers)
        return {"url": f"http://{'[' + self.host + ']' if ':' in self.host else self.host}:{self.port}",
                "node": f"{ctx.get_node_id()[:12]}@{self.host}", "pid": os.getpid(), "live_episodes": live,
                "worlds": [s.runtime.world.name for s in self.servers]}

    def pid(self) -> int:
        return os.getpid()


@dataclass
class Slot:
    """One placed actor and what the registry knows of it."""

    actor: Any
    index: int
    url: str | None = None  # the base URL registered for it, None while it is not (yet, or any more)
    node: str | None = None
    leaving: bool = False


@dataclass
class Placement:
    """The actors `up --ray` places and keeps registered.

    `address`: a Ray address (`auto`: the cluster this machine belongs to; `local`: start a one-node Ray here).
    `records`: (name, version, path) of each world served (the replica's URL is its base URL + path).
    """

    address: str
    names: list[str]
    token: str
    records: list[tuple[str, str, str]] = field(default_factory=list)
    replicas: int = 2
    num_cpus: float = 1.0
    max_restarts: int = -1
    interactive: bool = False
    max_episodes: int = 4096
    poll_s: float = 1.0
    drain_s: float = 30.0
    settle_s: float = 6.0  # a leaving replica gets no new episode after clients re-read its record (REFRESH_S)
    slots: list[Slot] = field(default_factory=list)
    _next: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def connect(self) -> None:
        """Join the Ray cluster (or start a local one)."""
        ray = import_ray()
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"namespace": "mcpworld", "logging_level": logging.WARNING,
                                      "log_to_driver": False}
            if self.address != "local":
                kwargs["address"] = self.address
            ray.init(**kwargs)

    def _place(self) -> Slot:
        ray = import_ray()
        actor_class = ray.remote(WorldReplica).options(
            num_cpus=self.num_cpus, max_restarts=self.max_restarts, max_task_retries=0,
            scheduling_strategy="SPREAD", name=f"{ACTOR_NAME}-{os.getpid()}-{self._next}",
            max_concurrency=4)  # info() is answered while a long call runs
        slot = Slot(actor_class.remote(self.names, self.token, self.interactive, self.max_episodes), self._next)
        self._next += 1
        self.slots.append(slot)
        return slot

    def start(self, store: RegistryStore, timeout_s: float = 120.0) -> None:
        """Place the actors and register each as it comes up (blocking: call it off the event loop). Replicas of
        these records registered before (an `up --ray` killed without stopping) are forgotten first: one `up --ray`
        serves a world set per registry."""
        ray = import_ray()
        ours = {(name, version) for name, version, _ in self.records}
        for rep in store.replicas(sorted({name for name, _ in ours})):  # left by an `up --ray` that was killed
            if (rep["name"], rep["version"]) in ours:
                store.remove_replica(rep["name"], rep["url"], rep["version"])
        for _ in range(self.replicas):
            self._place()
        deadline = time.monotonic() + timeout_s
        for slot in self.slots:
            try:
                info = ray.get(slot.actor.info.remote(), timeout=max(1.0, deadline - time.monotonic()))
            except ray.exceptions.GetTimeoutError:
                raise RuntimeError(
                    f"replica {slot.index} did not start within {timeout_s:g}s: the cluster needs {self.replicas} x "
                    f"{self.num_cpus:g} free CPUs for --replicas {self.replicas} (see `ray status`)") from None
            self._register(store, slot, info)

    def _register(self, store: RegistryStore, slot: Slot, info: dict[str, Any]) -> None:
        if slot.url is not None and slot.url != info["url"]:
            self._unregister(store, slot)
        slot.url, slot.node = info["url"], info["node"]
        for name, version, path in self.records:
            store.add_replica(name, version, slot.url + path, node=slot.node)
        logger.warning("replica %d serving at %s (%s)", slot.index, slot.url, slot.node)

    def _unregister(self, store: RegistryStore, slot: Slot) -> None:
        if slot.url is None:
            return
        for name, version, path in self.records:
            store.remove_replica(name, slot.url + path, version)
        slot.url = None

    def _mark_down(self, store: RegistryStore, slot: Slot, why: str) -> None:
        if slot.url is not None:
            for name, _, path in self.records:
                store.replica_health(name, slot.url + path, "down", why)

    def check(self, store: RegistryStore, timeout_s: float = 2.0) -> None:
        """One pass over the actors (blocking): a restarted actor is registered at its new address, one that does
        not answer is marked down at once (the health checks bring it back when it answers)."""
        ray = import_ray()
        with self._lock:
            refs = [(slot, slot.actor.info.remote()) for slot in self.slots if not slot.leaving]
            for slot, ref in refs:
                try:
                    info = ray.get(ref, timeout=timeout_s)
                except ray.exceptions.GetTimeoutError:
                    self._mark_down(store, slot, "the replica's actor is not answering (restarting?)")
                    continue
                except ray.exceptions.RayActorError as exc:
                    self._mark_down(store, slot, f"the replica's actor died: {str(exc).splitlines()[0][:200]}")
                    continue
                if info["url"] != slot.url:
                    self._register(store, slot, info)

    def status(self) -> list[dict[str, Any]]:
        return [{"index": s.index, "url": s.url, "node": s.node, "leaving": s.leaving} for s in self.slots]

    async def keep(self, store: RegistryStore) -> None:
        """Check the actors every `poll_s` while `up` runs."""
        while True:
            await anyio.sleep(self.poll_s)
            try:
                await anyio.to_thread.run_sync(self.check, store)
            except Exception:  # keeping the replicas must never take `up` down
                logger.exception("checking the Ray replicas failed")

    def scale(self, store: RegistryStore, replicas: int) -> None:
        """Run `replicas` actors (blocking): new ones are placed and registered; extra ones leave the registry,
        drain (no new episode reaches them once clients re-read the record, `settle_s`; their live episodes end,
        up to `drain_s`) and stop. Episodes on the replicas that stay are never touched."""
        ray = import_ray()
        with self._lock:
            live = [s for s in self.slots if not s.leaving]
            added = [self._place() for _ in range(replicas - len(live))]
            for slot in added:
                self._register(store, slot, ray.get(slot.actor.info.remote(), timeout=120))
            leaving = live[replicas:] if replicas < len(live) else []
            for slot in leaving:
                slot.leaving = True
                self._unregister(store, slot)
            self.replicas = replicas
        began = time.monotonic()
        for slot in leaving:
            while time.monotonic() - began < self.drain_s:
                try:
                    idle = ray.get(slot.actor.info.remote(), timeout=5)["live_episodes"] == 0
                except Exception:  # noqa: BLE001 - gone already
                    break
                if idle and time.monotonic() - began >= self.settle_s:
                    break
                time.sleep(0.2)
            ray.kill(slot.actor, no_restart=True)
            with self._lock:
                self.slots.remove(slot)

    def stop(self, store: RegistryStore | None) -> None:
        """Unregister and stop every actor (blocking)."""
        ray = import_ray()
        with self._lock:
            slots = list(self.slots)
        for slot in slots:
            if store is not None:
                try:
                    self._unregister(store, slot)
                except Exception:  # noqa: BLE001 - the store may be gone at shutdown
                    logger.exception("unregistering a replica failed")
            try:
                ray.kill(slot.actor, no_restart=True)
            except Exception:  # noqa: BLE001
                pass
        self.slots.clear()
