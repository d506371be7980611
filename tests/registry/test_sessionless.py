"""Plain MCP clients (no `io.mcpworld/episode` extension) never share an episode, on either protocol version.

A 2025-11-25 client has its HTTP session; a 2026-07-28 client has no session at all, so the server mints an
episode handle (SEP-2567) that `start_task` and handle-less tool calls return and that later calls carry as
an ordinary `episode` argument. Served as a real `mcpworld serve worlds --interactive` process.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client

from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http

pytestmark = pytest.mark.anyio
MODES = ["auto", "legacy"]  # 2026-07-28 (sessionless) and 2025-11-25 (sessions)
TASKS = ("add-free-bags", "cancel-within-24h")  # two tasks that change different rows


@pytest.fixture(scope="module")
def interactive_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The airline world served with `--interactive` (start_task / check_task) as a real HTTP process."""
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp_path_factory.mktemp("plain-home"))}
    proc = subprocess.Popen(mcpworld_cmd("serve", "worlds", "--port", str(port), "--only", "airline",
                                         "--interactive"),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/healthz", proc)
        yield f"{base}/worlds/airline/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def solutions(url: str) -> dict[str, Any]:
    async with Client(url) as client:
        listing = await EpisodeControl(client).tasks(token=os.environ["MCPWORLD_REGISTRY_TOKEN"])
    return {t.id: t for t in listing.tasks}


async def play(url: str, mode: str, task: Any, carry_handle: bool, started: anyio.Event, other: anyio.Event,
               out: dict[str, Any]) -> None:
    """One person's game: start a task, wait until the other client started theirs, play, check."""
    async with Client(url, mode=mode) as client:
        begun = await client.call_tool("start_task", {"task_id": task.id})
        assert not begun.is_error, begun.content
        handle = begun.structured_content["episode"]
        assert handle and handle in begun.structured_content["note"]
        extra = {"episode": handle} if carry_handle else {}
        started.set()
        await other.wait()  # both tasks are live at once
        for step in task.solution:
            result = await client.call_tool(step.name, {**step.arguments, **extra})
            assert not result.is_error, result.content
        checked = await client.call_tool("check_task", {**extra})
        assert not checked.is_error, checked.content
        out[task.id] = (handle, checked.structured_content)


@pytest.mark.parametrize("mode", MODES)
async def test_two_plain_clients_play_different_tasks_at_once(interactive_url: str, mode: str) -> None:
    tasks = await solutions(interactive_url)
    out: dict[str, Any] = {}
    events = [anyio.Event(), anyio.Event()]
    async with anyio.create_task_group() as tg:
        for i, task_id in enumerate(TASKS):
            tg.start_soon(play, interactive_url, mode, tasks[task_id], True, events[i], events[1 - i], out)
    (bags_handle, bags), (cancel_handle, cancel) = out["add-free-bags"], out["cancel-within-24h"]
    assert bags_handle != cancel_handle
    # both pass: had they shared an episode, each final state would hold the other's writes and fail its reference
    assert bags == {"task": "add-free-bags", "passed": True, "note": bags["note"]}
    assert cancel["passed"] is True


async def test_sessions_need_no_handle(interactive_url: str) -> None:
    """On 2025-11-25 the session alone keeps two clients apart."""
    tasks = await solutions(interactive_url)
    out: dict[str, Any] = {}
    events = [anyio.Event(), anyio.Event()]
    async with anyio.create_task_group() as tg:
        for i, task_id in enumerate(TASKS):
            tg.start_soon(play, interactive_url, "legacy", tasks[task_id], False, events[i], events[1 - i], out)
    assert out["add-free-bags"][1]["passed"] and out["cancel-within-24h"][1]["passed"]


async def test_sessionless_check_task_without_a_handle_is_refused(interactive_url: str) -> None:
    async with Client(interactive_url, mode="auto") as first, Client(interactive_url, mode="auto") as second:
        begun = await first.call_tool("start_task", {"task_id": "add-free-bags"})
        assert not begun.is_error
        refused = await second.call_tool("check_task", {})
        assert refused.is_error and "handle" in refused.content[0].text  # not the first client's verdict
        other = await second.call_tool("check_task", {"episode": "e-not-mine"})
        assert other.is_error and "unknown episode" in other.content[0].text


async def test_sessionless_plain_calls_get_their_own_minted_episode(interactive_url: str) -> None:
    """A handle-less call starts a fresh episode and says its handle; carrying it keeps the state."""
    async with Client(interactive_url, mode="auto") as a, Client(interactive_url, mode="auto") as b:
        tools = {t.name: t for t in (await a.list_tools()).tools}
        assert "episode" in tools["update_contact"].input_schema["properties"]  # declared: --interactive
        wrote = await a.call_tool("update_contact", {"customer_id": "C003", "phone": "123"})
        assert not wrote.is_error
        handle = wrote.meta["io.mcpworld/episode"]
        assert handle in wrote.content[-1].text
        mine = await a.call_tool("get_customer", {"customer_id": "C003", "episode": handle})
        assert mine.structured_content["phone"] == "123"
        assert "io.mcpworld/episode" not in (mine.meta or {}) and len(mine.content) == 1  # nothing new minted
        theirs = await b.call_tool("get_customer", {"customer_id": "C003"})
        assert theirs.structured_content["phone"] == "+44 20 7946 0003"
        assert theirs.meta["io.mcpworld/episode"] != handle


async def test_sessions_keep_the_worlds_own_tool_schemas(interactive_url: str) -> None:
    async with Client(interactive_url, mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "episode" not in tools["update_contact"].input_schema["properties"]
        assert "episode" in tools["check_task"].input_schema["properties"]


async def test_non_interactive_sessionless_clients_are_isolated_too(worlds_url: str) -> None:
    """Without --interactive schemas stay the world's own, but handle-less calls still never share."""
    url = f"{worlds_url}/worlds/airline/mcp"
    async with Client(url, mode="auto") as a, Client(url, mode="auto") as b:
        tools = {t.name: t for t in (await a.list_tools()).tools}
        assert "episode" not in tools["update_contact"].input_schema["properties"]
        wrote = await a.call_tool("update_contact", {"customer_id": "C002", "phone": "42"})
        handle = wrote.meta["io.mcpworld/episode"]
        mine = await a.call_tool("get_customer", {"customer_id": "C002", "episode": handle})
        assert mine.structured_content["phone"] == "42"
        theirs = await b.call_tool("get_customer", {"customer_id": "C002"})
        assert theirs.structured_content["phone"] != "42"


@pytest.mark.parametrize("mode", MODES)
async def test_templates_ping_and_discover_answer(interactive_url: str, mode: str) -> None:
    async with Client(interactive_url, mode=mode) as client:
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["world://airline/tables/{table}"]
        if mode == "legacy":
            await client.send_ping()  # 2026-07-28 removed ping: server/discover is its liveness probe
        else:
            discovered = await client.session.discover()
            assert "2026-07-28" in discovered.supported_versions and discovered.capabilities.tools is not None
        rows = await client.read_resource("world://airline/tables/flight")
        assert rows.contents[0].text.startswith("[")
