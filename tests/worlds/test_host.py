"""Serving many worlds: no seed runs at start-up, a broken world fails alone on first use, the index pages,
and a full episode table never evicts an episode that is serving a call."""

from __future__ import annotations

import inspect
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.serving import serve_in_thread
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http
from mcpworld.worlds.episodes import EpisodeLimits
from mcpworld.worlds.host import worlds_app
from mcpworld.worlds.loader import load_world
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.server import WorldServer

WORLD = '''
import threading
from pathlib import Path
from sqlmodel import Field
from mcpworld.core.blocking import BLOCKING_ATTR
from mcpworld.worlds.world import Session, Task, World, call, tool, world_base

Base = world_base()
ENTERED, GATE = threading.Event(), threading.Event()


class Item(Base, table=True):
    id: str = Field(primary_key=True)
    qty: int = Field(ge=0)


def seed(db: Session) -> None:
    with open(Path(__file__).parent / "seeded.log", "a") as log:  # each run of the seed leaves a line
        log.write("seeded\\n")
    {seed_body}
    db.add_all([Item(id="a", qty=1), Item(id="b", qty=2)])


@tool
def get_item(db: Session, item_id: str) -> Item:
    """Get an item."""
    return db.get(Item, item_id)


@tool
def wait_gate(db: Session) -> str:
    """Block until the test opens the gate (a slow tool whose code runs off the event loop)."""
    ENTERED.set()
    if not GATE.wait(60):
        raise TimeoutError("the gate never opened")
    return f"done with {{db.get(Item, 'a').qty}}"


setattr(wait_gate, BLOCKING_ATTR, 60.0)

world = World(name="{name}", title="{name}", description="A tiny world", scenario="Items.", base=Base, seed=seed,
              tools=[get_item, wait_gate],
              tasks=[Task(id="good", instruction="Read a", solution=[call("get_item", item_id="a")],
                          verify=lambda o: True)])
'''


def write_world(root: Path, name: str, seed_body: str = "") -> Path:
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(WORLD.format(name=name, seed_body=seed_body))
    return pkg


def seed_runs(pkg: Path) -> int:
    log = pkg / "seeded.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`mcpworld serve worlds` (a real process) with two installed worlds, one whose seed raises."""
    home = tmp_path_factory.mktemp("lazy-home")
    worlds = home / "worlds"
    good = write_world(worlds, "lazygood")
    bad = write_world(worlds, "lazybroken", seed_body='raise RuntimeError("the seed exploded")')
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(home)}
    proc = subprocess.Popen(mcpworld_cmd("serve", "worlds", "--port", str(port)), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/healthz", proc)
        yield {"base": base, "good": good, "bad": bad}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def index(base: str, **params: Any) -> dict[str, Any]:
    return {w["name"]: w for w in httpx.get(base + "/worlds", params={"limit": 100, **params}).json()["worlds"]}


@pytest.mark.anyio
async def test_broken_world_fails_on_its_first_episode_while_others_serve(served: dict[str, Any]) -> None:
    base = served["base"]
    listed = index(base)
    # started, both listed, and no seed has run: not the good one's, not the broken one's
    assert listed["lazygood"]["seeded"] is False and listed["lazybroken"]["seeded"] is False
    assert "error" not in listed["lazybroken"]
    assert seed_runs(served["good"]) == 0 and seed_runs(served["bad"]) == 0

    async with Client(f"{base}/worlds/lazybroken/mcp") as client:
        with pytest.raises(MCPError) as failed:
            await EpisodeControl(client).start("good")
        message = str(failed.value)
        assert "lazybroken" in message and "RuntimeError: the seed exploded" in message
        assert "mcpworld world validate lazybroken" in message
        result = await client.call_tool("get_item", {"item_id": "a"})  # a plain tool call says the same
        assert result.is_error and "the seed exploded" in result.content[0].text
    assert seed_runs(served["bad"]) == 1  # the failure is kept: the second use did not rerun the seed

    async with Client(f"{base}/worlds/lazygood/mcp") as client:
        started = await EpisodeControl(client).start("good")
        assert started.episode
        result = await client.call_tool("get_item", {"item_id": "a"})
        assert not result.is_error and result.structured_content["qty"] == 1
    assert seed_runs(served["good"]) == 1

    listed = index(base)
    assert listed["lazygood"]["seeded"] is True and "error" not in listed["lazygood"]
    assert listed["lazybroken"]["seeded"] is False
    assert listed["lazybroken"]["error"] == "RuntimeError: the seed exploded"


def test_world_index_pages_like_the_registry(served: dict[str, Any]) -> None:
    base = served["base"]
    names, cursor, pages = [], None, 0
    while True:
        body = httpx.get(base + "/worlds", params={"limit": 1, **({"cursor": cursor} if cursor else {})}).json()
        assert body["metadata"]["count"] == len(body["worlds"]) == 1
        names += [w["name"] for w in body["worlds"]]
        pages += 1
        cursor = body["metadata"].get("nextCursor")
        if not cursor:
            break
    assert names == sorted(names) and {"lazygood", "lazybroken"} <= set(names)
    assert pages == len(names) == body["metadata"]["total"]
    bad = httpx.get(base + "/worlds", params={"limit": 1000})
    assert bad.status_code == 400 and "from 1 to 100" in bad.json()["detail"]
    bad = httpx.get(base + "/worlds", params={"cursor": "%%%"})
    assert bad.status_code == 400 and "nextCursor" in bad.json()["detail"]


def test_concurrent_first_episodes_run_the_seed_once(tmp_path: Path) -> None:
    pkg = write_world(tmp_path, "lazyonce")
    runtime = WorldRuntime(load_world(pkg))
    assert seed_runs(pkg) == 0  # loading a world does not seed it
    barrier = threading.Barrier(8)
    episodes: list[Any] = []

    def first_episode() -> None:
        barrier.wait()
        episodes.append(runtime.fork("good"))

    threads = [threading.Thread(target=first_episode) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(episodes) == 8 and seed_runs(pkg) == 1
    assert all(runtime.table_counts(e) == {"item": 2} for e in episodes)
    for e in episodes:
        e.close()


@pytest.mark.anyio
async def test_full_table_never_evicts_an_episode_serving_a_call(tmp_path: Path) -> None:
    world = load_world(write_world(tmp_path, "lazybusy"))
    module = inspect.getmodule(world.seed)
    server = WorldServer(WorldRuntime(world), EpisodeLimits(max_episodes=1))
    with serve_in_thread(worlds_app([server]), free_port()) as base:
        url = f"{base}/worlds/lazybusy/mcp"
        slow: dict[str, Any] = {}

        async def slow_call() -> None:
            async with Client(url) as client:  # sessionless: its episode is minted, evictable at the cap
                slow["result"] = await client.call_tool("wait_gate", {})

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call)
            assert await anyio.to_thread.run_sync(module.ENTERED.wait, 30)  # the slow call is running
            async with Client(url) as other:
                refused = await other.call_tool("get_item", {"item_id": "a"})
                assert refused.is_error and "too many live episodes" in refused.content[0].text
                module.GATE.set()
        assert not slow["result"].is_error, slow["result"].content
        assert "done with 1" in slow["result"].content[0].text
        async with Client(url) as other:  # the finished episode is idle now: it makes room
            served = await other.call_tool("get_item", {"item_id": "a"})
            assert not served.is_error, served.content
        assert len(server.episodes) == 1
