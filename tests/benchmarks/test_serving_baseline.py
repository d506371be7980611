"""The serving benchmark's ceiling (`benchmarks.serving.bare_app`) sends what the world server sends, request for
request, on both protocol versions: the target (>= 0.8x the bare handler) then compares how the two serve, not
how much they answer. A ceiling that left out a field the world server must send would flatter itself."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from benchmarks import in_process
from benchmarks.serving import bare_app


def played(app: Any, protocol: str) -> list[Any]:
    """Every reply of one episode (start, 10 x get_flight, verify with close), episode handles blanked."""
    async def main() -> list[Any]:
        keep = await in_process.started(app)
        replies: list[Any] = []
        post = in_process.post

        async def recording(app: Any, message: dict[str, Any], headers: dict[str, str]) -> Any:
            out = await post(app, message, headers)
            replies.append(out[2])
            return out

        in_process.post = recording  # type: ignore[assignment]
        try:
            episode = await in_process.player(app, protocol)
            replies.clear()  # the handshake's replies differ by design (the bare handler has no sessions)
            await episode([0.0, 0.0, 0.0])
        finally:
            in_process.post = post  # type: ignore[assignment]
        keep.cancel()
        return replies

    replies = asyncio.run(main())
    for reply in replies:
        if "episode" in reply.get("result", {}):
            reply["result"]["episode"] = "<handle>"
    return replies


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
def test_the_bare_ceiling_answers_as_the_world_server_does(protocol: str) -> None:
    from mcpworld.worlds.episodes import EpisodeLimits
    from mcpworld.worlds.host import build_servers, load_runtime, worlds_app

    world = played(worlds_app(build_servers(["airline"], EpisodeLimits())), protocol)
    bare = played(bare_app(load_runtime("airline")), protocol)
    assert len(world) == len(bare) == 12
    for i, (ours, ceiling) in enumerate(zip(world, bare)):
        assert ours == ceiling, f"reply {i} differs"
    if protocol == "2026-07-28":  # what that revision adds to every result is in both
        assert all(r["result"]["resultType"] == "complete" and r["result"]["_meta"] for r in bare)
