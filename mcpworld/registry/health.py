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

    async def one(record: dict[str, Any]) -> None:
        async with limiter:
            result = await check_record(record, timeout, token)
        store.record_health(result["name"], result["status"], result["latency_ms"], result["error"], result["tools"])
        results.append(result)

    async with anyio.create_task_group() as tg:
        for record in records:
            tg.start_soon(one, record)
    return sorted(results, key=lambda r: r["name"])
