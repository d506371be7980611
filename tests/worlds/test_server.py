"""The world MCP server through real clients: in memory, over stdio and over Streamable HTTP."""

from __future__ import annotations

import json
import os
import sys

import anyio
import pytest
from mcp import Client, StdioServerParameters

from mcpworld.core.protocol import EpisodeControl
from mcpworld.worlds.episodes import EpisodeLimits
from mcpworld.worlds.host import load_runtime
from mcpworld.worlds.server import WorldServer

pytestmark = pytest.mark.anyio
MODES = ["auto", "legacy"]  # 2026-07-28 (sessionless) and 2025-11-25 (initialize handshake)


def airline_server(**limits: float) -> WorldServer:
    return WorldServer(load_runtime("airline"), EpisodeLimits(**limits) if limits else None)


async def play_reference(client: Client, task_id: str) -> bool:
    ctl = EpisodeControl(client)
    tasks = {t.id: t for t in (await ctl.tasks(token=os.environ["MCPWORLD_REGISTRY_TOKEN"], seed=1)).tasks}
    task = tasks[task_id]  # the reference on seed 1's data (which renames ids, names and dates)
    started = await ctl.start(task_id, seed=1)
    assert started.instruction == task.instruction
    for step in task.solution:
        result = await ctl.call(started.episode, step.name, step.arguments)
        assert not result.is_error, result.content
    verified = await ctl.verify(started.episode, task.answer)
    assert verified.closed and not (await ctl.close(started.episode)).closed  # judged once: already over
    return verified.verdict.passed


async def check_domain_only_tools(client: Client) -> None:
    names = {t.name for t in (await client.list_tools()).tools}
    assert "cancel_reservation" in names and {"submit_answer", "decline"} <= names
    assert not names & {"start_task", "check_task"}
    assert not any("episode" in n for n in names)


@pytest.mark.parametrize("mode", MODES)
async def test_stdio_process_runs_a_task(mode: str) -> None:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "mcpworld", "serve", "world", "airline", "--stdio"],
                                   env=dict(os.environ))  # the SDK passes a minimal environment otherwise
    async with Client(params, mode=mode) as client:
        await check_domain_only_tools(client)
        assert await play_reference(client, "change-to-evening-flight")


@pytest.mark.parametrize("mode", MODES)
async def test_http_process_runs_a_task(worlds_url: str, mode: str) -> None:
    async with Client(f"{worlds_url}/worlds/airline/mcp", mode=mode) as client:
        await check_domain_only_tools(client)
        assert await play_reference(client, "cancelled-flight-refund-and-credit")


async def test_http_rejects_foreign_origin(worlds_url: str) -> None:
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}}
    headers = {"Origin": "http://evil.example", "Accept": "application/json, text/event-stream"}
    response = httpx.post(f"{worlds_url}/worlds/airline/mcp", json=body, headers=headers)
    assert response.status_code == 403
    index = httpx.get(f"{worlds_url}/worlds").json()
    assert {w["name"] for w in index["worlds"]} >= {"airline"}


async def test_concurrent_episodes_are_isolated() -> None:
    server = airline_server()
    async with Client(server.server) as client:
        ctl = EpisodeControl(client)
        episodes = [(await ctl.start(None)).episode for i in range(64)]

        async def write(i: int, episode: str) -> None:
            r = await ctl.call(episode, "update_contact", {"customer_id": "C001", "phone": f"+1 555 {i:04d}"})
            assert not r.is_error

        async with anyio.create_task_group() as tg:
            for i, episode in enumerate(episodes):
                tg.start_soon(write, i, episode)
        for i, episode in enumerate(episodes):
            got = await ctl.call(episode, "get_customer", {"customer_id": "C001"})
            assert got.structured_content["phone"] == f"+1 555 {i:04d}"
            diff = (await ctl.state(episode)).diff
            assert list(diff) == ["customer"] and len(diff["customer"]["updated"]) == 1
        fresh = (await ctl.start(None)).episode
        original = await ctl.call(fresh, "get_customer", {"customer_id": "C001"})
        assert original.structured_content["phone"] == "+44 20 7946 0001"


async def test_plain_client_gets_a_default_episode_and_interactive_play() -> None:
    server = WorldServer(load_runtime("airline"), interactive=True)
    async with Client(server.server) as client:
        r = await client.call_tool("update_contact", {"customer_id": "C003", "phone": "123"})
        assert not r.is_error
        again = await client.call_tool("get_customer", {"customer_id": "C003"})
        assert again.structured_content["phone"] == "123"  # the same default episode
        check = await client.call_tool("check_task", {})
        assert check.is_error and "start_task" in check.content[0].text
        started = await client.call_tool("start_task", {"task_id": "add-free-bags"})
        assert "STD5LM" in started.structured_content["instruction"]
        await client.call_tool("add_bags", {"reservation_id": "STD5LM", "bags": 2})
        verdict = (await client.call_tool("check_task", {})).structured_content
        assert verdict == {"task": "add-free-bags", "passed": True, "note": verdict["note"]}  # pass/fail only
        gone = await client.call_tool("check_task", {})
        assert gone.is_error  # judged once


BAD_CALLS = [
    ("get_reservation", {"reservation_id": 42}, "reservation_id: Input should be a valid string"),
    ("get_reservation", {}, "reservation_id: Field required"),
    ("get_reservation", {"reservation_id": "ZFA04Y", "extra": 1}, "extra: Extra inputs are not permitted"),
    ("book_flight", {"customer_id": "C001", "flight_id": "MW101-0603", "cabin": "first", "fare": "basic",
                     "passengers": 1, "payment_id": "PM-ADA-CARD"}, "cabin: Input should be 'economy' or 'business'"),
    ("no_such_tool", {}, "unknown tool 'no_such_tool'"),
    ("find_customer", {"email": "x' OR '1'='1"}, "not found"),
    ("update_contact", {"customer_id": "C001", "phone": "9" * (1024 * 1024)}, "arguments too large"),
    ("cancel_reservation", {"reservation_id": "QX7P2K", "reason": "other"}, "basic fare"),
    ("add_bags", {"reservation_id": "GIFT6D", "bags": 40}, "at most 5 bags per passenger"),
]


@pytest.mark.parametrize(("tool", "arguments", "message"), BAD_CALLS)
async def test_bad_calls_get_clear_errors_and_change_nothing(tool: str, arguments: dict, message: str) -> None:
    server = airline_server()
    async with Client(server.server) as client:
        ctl = EpisodeControl(client)
        episode = (await ctl.start(None)).episode
        result = await ctl.call(episode, tool, arguments)
        assert result.is_error
        assert message in result.content[0].text
        assert (await ctl.state(episode)).diff == {}


async def test_failed_write_rolls_back_partial_changes() -> None:
    # upgrade_cabin moves seats and charges the card; a gift card that cannot pay must undo the seat move.
    server = airline_server()
    async with Client(server.server) as client:
        ctl = EpisodeControl(client)
        episode = (await ctl.start(None)).episode
        result = await ctl.call(episode, "upgrade_cabin", {"reservation_id": "GIFT6D"})
        assert result.is_error and "gift card" in result.content[0].text
        assert (await ctl.state(episode)).diff == {}


async def test_unknown_episode_and_task_are_clear_errors() -> None:
    from mcp.shared.exceptions import MCPError

    server = airline_server()
    async with Client(server.server) as client:
        ctl = EpisodeControl(client)
        with pytest.raises(MCPError, match="unknown task 'nope'"):
            await ctl.start("nope")
        with pytest.raises(MCPError, match="unknown episode 'e-missing'"):
            await ctl.verify("e-missing")
        r = await ctl.call("e-missing", "get_customer", {"customer_id": "C001"})
        assert r.is_error and "unknown episode" in r.content[0].text


async def test_episode_cap_and_ttl_eviction() -> None:
    from mcp.shared.exceptions import MCPError

    server = airline_server(ttl_s=0.2, max_episodes=2)
    async with Client(server.server) as client:
        ctl = EpisodeControl(client)
        first = (await ctl.start(None)).episode
        await ctl.start(None)
        with pytest.raises(MCPError, match="too many live episodes"):
            await ctl.start(None)
        await anyio.sleep(0.5)
        await ctl.start(None)  # the idle ones were evicted
        r = await ctl.call(first, "get_customer", {"customer_id": "C001"})
        assert r.is_error and "expired" in r.content[0].text


async def test_prompts_and_resources() -> None:
    server = airline_server()
    async with Client(server.server) as client:
        prompts = (await client.list_prompts()).prompts
        assert len(prompts) == len(server.runtime.tasks)
        prompt = await client.get_prompt("cancel-within-24h")
        assert "ZFA04Y" in prompt.messages[0].content.text
        schema = await client.read_resource("world://airline/schema")
        assert "CREATE TABLE reservation" in schema.contents[0].text
        rows = json.loads((await client.read_resource("world://airline/tables/flight")).contents[0].text)
        assert len(rows) == 10


async def test_same_task_and_seed_give_the_same_episode() -> None:
    server = airline_server()
    async with Client(server.server) as client:
        ctl = EpisodeControl(client)
        made = []
        [task] = [t for t in (await ctl.tasks(token=os.environ["MCPWORLD_REGISTRY_TOKEN"], seed=7)).tasks
                  if t.id == "book-cheapest-economy"]
        book = task.solution[-1]
        assert book.name == "book_flight" and book.arguments["customer_id"] != "C003", "seed 7 renames ids"
        for _ in range(2):
            episode = (await ctl.start("book-cheapest-economy", seed=7)).episode
            r = await ctl.call(episode, "book_flight", book.arguments)
            made.append(r.structured_content["id"])
        assert made[0] == made[1]


async def test_verify_ends_the_episode_whatever_close_says() -> None:
    server = airline_server()
    async with Client(server.server) as client:
        ctl = EpisodeControl(client)
        episode = (await ctl.start("flight-status")).episode
        await ctl.call(episode, "submit_answer", {"answer": {"yes": True, "names": ["delayed"]}})
        done = await ctl.verify(episode, "It is delayed.", close=False)  # an older client's request
        assert done.verdict.passed and done.closed and len(server.episodes) == 0
        r = await ctl.call(episode, "get_flight", {"flight_id": "MW307-0602"})
        assert r.is_error and "unknown episode" in r.content[0].text


async def test_references_stay_on_the_server() -> None:
    """Task lists carry no solution, answer or rubric unless the caller presents the registry token."""
    async with Client(airline_server().server) as client:
        ctl = EpisodeControl(client)
        public = (await ctl.tasks()).tasks
        wrong = (await ctl.tasks(token="not-the-token")).tasks
        revealed = {t.id: t for t in (await ctl.tasks(token=os.environ["MCPWORLD_REGISTRY_TOKEN"])).tasks}
    for listing in (public, wrong):
        assert listing and all(not t.solution and t.answer is None and not t.rubric for t in listing)
        assert {t.id: t.instruction for t in listing} == {i: t.instruction for i, t in revealed.items()}
    assert revealed["flight-status"].solution and revealed["flight-status"].answer
