"""What `serving.settle_collector` relies on: serving a world leaves no reference cycles behind, so Python's
cyclic collector has nothing to find in a server's traffic and its passes can be rare (they cost 28% of the CPU
at 1,024 live episodes, docs/benchmarks.md). Played through the world server's own ASGI app, both protocol
versions, whole episodes and refused requests alike, with the collector off; then one pass must find nothing."""

from __future__ import annotations

import asyncio
import gc

import pytest

from benchmarks import in_process


async def traffic(protocol: str) -> None:
    from mcpworld.worlds.episodes import EpisodeLimits
    from mcpworld.worlds.host import build_servers, worlds_app

    app = worlds_app(build_servers(["airline"], EpisodeLimits()))
    keep = await in_process.started(app)
    for _ in range(3):  # warm: templates, caches, the first connections
        await (await in_process.player(app, protocol))([0.0, 0.0, 0.0])
    gc.collect()
    gc.disable()
    try:
        for _ in range(4):
            episode = await in_process.player(app, protocol)  # at 2025-11-25 a new session each time
            for _ in range(5):
                await episode([0.0, 0.0, 0.0])
            for params in ({"name": "no_such_tool", "arguments": {}},  # refusals, each a different path
                           {"name": "get_flight", "arguments": {"flight_id": 5}},
                           {"name": "get_flight", "arguments": {"flight_id": "X"},
                            "_meta": {"io.mcpworld/episode": "e-gone"}}):
                status, _, reply = await in_process.post(app, {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                                               "params": params}, {"mcp-protocol-version": protocol})
                assert status >= 400 or "error" in reply or reply["result"]["isError"], reply
        gc.set_debug(gc.DEBUG_SAVEALL)
        found = gc.collect()
        kinds: dict[str, int] = {}
        for obj in gc.garbage:
            kinds[type(obj).__name__] = kinds.get(type(obj).__name__, 0) + 1
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    keep.cancel()
    assert found == 0, (f"serving left {found} objects in reference cycles, e.g. {sorted(kinds.items())[:10]}: "
                        "break the cycle, or lower serving.COLLECTOR_THRESHOLDS")


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
def test_serving_a_world_leaves_no_reference_cycles(protocol: str) -> None:
    """In a process of its own: in the suite's process, what another test left running (a server thread winding
    down, a worker's reaper) may drop the last reference to a cycle of its own while the collector is off."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, __file__, protocol], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(root)}, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_server_process_freezes_start_up_and_collects_rarely() -> None:
    import subprocess
    import sys

    code = ("import gc; from mcpworld.core.serving import settle_collector, COLLECTOR_THRESHOLDS as T; "
            "from mcpworld.worlds.episodes import EpisodeLimits; from mcpworld.worlds.host import build_servers; "
            "s = build_servers(['airline'], EpisodeLimits()); settle_collector(); "
            "print(gc.get_freeze_count(), gc.get_threshold() == T, gc.get_count()[0] < 1000)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    frozen, thresholds, fresh = done.stdout.split()
    assert int(frozen) > 10_000 and thresholds == "True" and fresh == "True", done.stderr[-500:]


if __name__ == "__main__":
    import sys

    asyncio.run(traffic(sys.argv[1]))
