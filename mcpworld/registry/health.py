"""Health checks: connect to each server over its own transport, list its tools, time it, record it.

Every connection goes through `connect`, so a stdio package is started only when its record passes the launch
rules (`records.launch_problems`), and the registry token (`token`) reaches mcpworld's own servers only.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from mcpworld.core.errors import innermost, one_line
from mcpworld.registry.connect import connect
from mcpworld.registry.store import RegistryStore


async def check_record(record: dict[str, Any], timeout: float = 10.0, token: str | None = None) -> dict[str, Any]:
    """Probe one server; never raises: an unreachable (or unlaunchable) server is reported `down` with the error."""
    name = record["name"]
    start = time.perf_counter()
    try:
        with anyio.fail_after(timeout):
            async with connect(record, timeout=timeout, token=token) as client:
                tools = len((await client.list_tools()).tools)
    except BaseException as exc:  # noqa: BLE001 - ExceptionGroups from task groups included
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        message = one_line(exc)  # a refused connection is a task group's ExceptionGroup: say what is inside
        if isinstance(innermost(exc), TimeoutError):
            message = f"no answer within {timeout:g}s"
        return {"name": name, "status": "down", "latency_ms": None, "error": message[:500], "tools": None}
    return {"name": name, "status": "up", "latency_ms": round((time.perf_counter() - start) * 1000, 1),
            "error": None, "tools": tools}


async def check_all(store: RegistryStore, names: list[str] | None = None, timeout: float = 10.0,
                    concurrency: int = 16, token: str | None = None) -> list[dict[str, Any]]:
    """Check every active latest record (or `names`) concurrently and store the results.

    A record with replicas (`RegistryStore.add_replica`) has each of them checked on its own: one that fails is
    marked down and leaves the record's remotes, one that answers again comes back; the record is up while any
    replica is.

    `token`: the registry token, for mcpworld's own servers bound beyond loopback (default MCPWORLD_REGISTRY_TOKEN).
    """
    records, cursor = [], None
    while True:
        page, cursor = store.list(cursor=cursor, limit=100, version="latest")
        records += [r["server"] for r in page if names is None or r["server"]["name"] in names]
        if not cursor:
            break
    results: list[dict[str, Any]] = []
    limiter = anyio.CapacityLimiter(concurrency)
    replicas: dict[str, list[dict[str, Any]]] = {}
    for rep in store.replicas([r["name"] for r in records]) if records else []:
        replicas.setdefault(rep["name"], []).append(rep)

    async def probe(record: dict[str, Any]) -> dict[str, Any]:
        async with limiter:
            return await check_record(record, timeout, token)

    async def one(record: dict[str, Any]) -> None:
        reps = [r for r in replicas.get(record["name"], []) if r["version"] == record.get("version")]
        if not reps:
            result = await probe(record)
        else:  # each replica alone; the published remotes too
            published = [r for r in record.get("remotes") or []
                         if r.get("url") not in {rep["url"] for rep in replicas.get(record["name"], [])}]
            seen: list[dict[str, Any]] = []

            async def replica(rep: dict[str, Any]) -> None:
                outcome = await probe({**record, "remotes": [{"type": "streamable-http", "url": rep["url"]}]})
                store.replica_health(record["name"], rep["url"], outcome["status"], outcome["error"])
                seen.append(outcome)

            async def remote(url: dict[str, Any]) -> None:
                seen.append(await probe({**record, "remotes": [url]}))

            async with anyio.create_task_group() as group:
                for rep in reps:
                    group.start_soon(replica, rep)
                for url in published:
                    group.start_soon(remote, url)
            up = [r for r in seen if r["status"] == "up"]
            result = min(up, key=lambda r: r["latency_ms"]) if up else seen[0]
        store.record_health(result["name"], result["status"], result["latency_ms"], result["error"], result["tools"])
        results.append(result)

    async with anyio.create_task_group() as tg:
        for record in records:
            tg.start_soon(one, record)
    return sorted(results, key=lambda r: r["name"])
