"""Plain MCP clients of the SWE server (no `io.mcpworld/episode` extension) never share a workspace.

Over real Streamable HTTP, on both protocol versions: a 2025-11-25 client has its HTTP session (and its default
episode); a 2026-07-28 client has no session, so a handle-less tool call gets a fresh episode whose server-minted
handle comes back (result `_meta` and a last text block) and later calls pass as the `episode` argument.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from starlette.applications import Starlette

from mcpworld.core.protocol import EPISODE_META_KEY, EpisodeControl
from mcpworld.core.serving import serve_in_thread
from mcpworld.core.testing import free_port
from mcpworld.swe.builder import build_instances
from mcpworld.swe.instances import load_instances
from mcpworld.swe.server import SWEOptions, SWEServer, running_swe, swe_routes

pytestmark = pytest.mark.anyio
MODES = ["auto", "legacy"]  # 2026-07-28 (sessionless) and 2025-11-25 (sessions)


@pytest.fixture(scope="module")
def instances_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_instances(tmp_path_factory.mktemp("swe-built"))


@contextlib.contextmanager
def served(instances_file: Path, **options: Any) -> Iterator[tuple[str, SWEServer]]:
    """A SWE server on a real port (uvicorn, the `up` mount), its URL and the server; every workspace removed after."""
    sw = SWEServer(load_instances(instances_file), options=SWEOptions(warm=0, command_timeout_s=30, **options))

    @contextlib.asynccontextmanager
    async def lifespan(app: object):  # type: ignore[no-untyped-def]
        async with running_swe(sw):
            yield

    with serve_in_thread(Starlette(routes=swe_routes(sw), lifespan=lifespan), free_port()) as base:
        yield f"{base}/swe/mcp", sw


@pytest.fixture(scope="module")
def swe_url(instances_file: Path) -> Iterator[str]:
    with served(instances_file) as (url, _):
        yield url


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


async def plain_client(url: str, mode: str, name: str, written: anyio.Event, other: anyio.Event,
                       out: dict[str, Any]) -> None:
    """One person in an MCP client: write a mark into their checkout, wait until the other has too, look again."""
    async with Client(url, mode=mode) as client:
        first = await client.call_tool("bash", {"command": f"echo {name} > mark.txt && pwd"})
        assert not first.is_error, text(first)
        root = first.content[0].text.split("\n")[0]
        handle = (first.meta or {}).get(EPISODE_META_KEY)
        if mode == "auto":  # sessionless: the server minted this client an episode and said its handle
            assert handle and f'"episode": "{handle}"' in first.content[-1].text
        else:  # a session is its own default episode: nothing minted
            assert handle is None and len(first.content) == 1
        carry = {"episode": handle} if handle else {}
        written.set()
        await other.wait()  # both workspaces are live, each with its mark, at once
        seen = await client.call_tool("bash", {"command": "cat mark.txt && pwd && ls", **carry})
        assert not seen.is_error and len(seen.content) == 1, text(seen)
        assert EPISODE_META_KEY not in (seen.meta or {})  # nothing new minted
        view = await client.call_tool("str_replace_editor", {"command": "view", "path": f"{root}/mark.txt", **carry})
        out[name] = {"root": root, "handle": handle, "seen": seen.content[0].text, "view": text(view)}


@pytest.mark.parametrize("mode", MODES)
async def test_two_plain_clients_at_once_each_see_only_their_own_workspace(swe_url: str, mode: str) -> None:
    out: dict[str, Any] = {}
    events = [anyio.Event(), anyio.Event()]
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i, name in enumerate(("alice", "bob")):
                tg.start_soon(plain_client, swe_url, mode, name, events[i], events[1 - i], out)
    alice, bob = out["alice"], out["bob"]
    assert alice["root"] != bob["root"]
    assert alice["seen"].startswith(f"alice\n{alice['root']}\n") and "bob" not in alice["seen"]
    assert bob["seen"].startswith(f"bob\n{bob['root']}\n") and "alice" not in bob["seen"]
    assert "     1\talice" in alice["view"] and "     1\tbob" in bob["view"]
    if mode == "auto":
        assert alice["handle"] != bob["handle"]
    async with Client(swe_url, mode=mode) as intruder:  # another client cannot reach into either checkout
        peek = await intruder.call_tool("str_replace_editor", {"command": "view", "path": f"{alice['root']}/mark.txt"})
        assert peek.is_error and "outside the repository" in text(peek)


async def test_a_sessionless_call_without_a_handle_never_gets_another_clients_episode(swe_url: str) -> None:
    async with Client(swe_url, mode="auto") as a, Client(swe_url, mode="auto") as b:
        wrote = await a.call_tool("str_replace_editor", {"command": "create", "path": "notes.txt",
                                                          "file_text": "only mine\n"})
        assert not wrote.is_error, text(wrote)
        mine = wrote.meta[EPISODE_META_KEY]
        theirs = await b.call_tool("bash", {"command": "cat notes.txt"})
        assert theirs.meta[EPISODE_META_KEY] != mine and "only mine" not in text(theirs)
        assert "No such file" in text(theirs) and "[exit code: 1]" in text(theirs)
        forgot = await a.call_tool("bash", {"command": "cat notes.txt"})  # a forgotten handle: a fresh episode
        assert forgot.meta[EPISODE_META_KEY] not in (mine, theirs.meta[EPISODE_META_KEY])
        assert "only mine" not in text(forgot) and "started a fresh episode" in forgot.content[-1].text
        back = await a.call_tool("bash", {"command": "cat notes.txt", "episode": mine})
        assert text(back) == "only mine\n[exit code: 0]"
        wrong = await b.call_tool("bash", {"command": "pwd", "episode": "swe-not-mine"})
        assert wrong.is_error and "unknown episode 'swe-not-mine'" in text(wrong) and "start a new one" in text(wrong)
        assert EPISODE_META_KEY not in (wrong.meta or {})  # an error: never a fresh (or someone else's) episode


@pytest.mark.parametrize("mode", MODES)
async def test_the_extensions_episode_id_is_a_handle_and_meta_wins(swe_url: str, mode: str) -> None:
    """`start` returns the episode id: a plain call may carry it as `episode`; an extension `_meta` id wins."""
    async with Client(swe_url, mode=mode) as client:
        ctl = EpisodeControl(client)
        started = await ctl.start("mcpworld__textkit-1")
        other = await ctl.start("mcpworld__minicalc-1")
        here = await client.call_tool("bash", {"command": "pwd", "episode": started.episode})
        assert not here.is_error and here.content[0].text.split("\n")[0] in started.instruction
        wins = await ctl.call(other.episode, "bash", {"command": "pwd", "episode": started.episode})
        assert wins.content[0].text.split("\n")[0] in other.instruction
        await ctl.close(started.episode)
        await ctl.close(other.episode)
        gone = await client.call_tool("bash", {"command": "pwd", "episode": started.episode})
        assert gone.is_error and "unknown episode" in text(gone)


async def test_minted_episodes_make_room_but_never_take_an_extension_or_busy_episode(instances_file: Path) -> None:
    """At the cap, the least recently used minted episode is evicted; an extension episode and a minted one
    serving a call are never pulled from under their client."""
    with served(instances_file, max_episodes=2) as (url, sw):
        async with Client(url, mode="auto") as client:
            ctl = EpisodeControl(client)
            kept = await ctl.start("mcpworld__textkit-1")
            first = await client.call_tool("bash", {"command": "pwd"})
            handle = first.meta[EPISODE_META_KEY]
            root = Path(first.content[0].text.split("\n")[0])

            async def wait_for_go() -> None:
                slow = await client.call_tool("bash", {"command": "touch started; while [ ! -e go ]; do sleep 0.05; "
                                                       "done; echo done", "episode": handle})
                assert not slow.is_error and text(slow) == "done\n[exit code: 0]"

            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(wait_for_go)
                    while not (root / "started").exists():
                        await anyio.sleep(0.02)
                    refused = await client.call_tool("bash", {"command": "pwd"})  # both others are untouchable
                    assert refused.is_error and "too many live episodes (2 of max 2)" in text(refused)
                    (root / "go").touch()
            assert root.is_dir() and len(sw) == 2
            fresh = await client.call_tool("bash", {"command": "pwd"})  # now the idle minted one makes room
            assert not fresh.is_error and fresh.meta[EPISODE_META_KEY] != handle
            deadline = time.monotonic() + 10
            while root.exists() and time.monotonic() < deadline:
                await anyio.sleep(0.02)
            assert not root.exists() and len(sw) == 2
            evicted = await client.call_tool("bash", {"command": "pwd", "episode": handle})
            assert evicted.is_error and "unknown episode" in text(evicted)
            still = await ctl.call(kept.episode, "bash", {"command": "pwd"})
            assert not still.is_error and still.content[0].text.split("\n")[0] in kept.instruction


async def test_the_docs_sessionless_example_runs(swe_url: str) -> None:
    """docs/swe.md's two-people example, as a user would run it against a served SWE endpoint."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "swe.md").read_text()
    match = re.search(r"<!-- example: sessionless -->\s*```python\n(.*?)```", doc, re.S)
    assert match, "docs/swe.md lost its sessionless example"
    namespace: dict[str, Any] = {}
    exec(compile(match.group(1), "docs/swe.md", "exec"), namespace)
    with anyio.fail_after(30):
        await namespace["two_people"](swe_url)


def test_a_tool_argument_named_like_the_handle_is_refused_at_build_time() -> None:
    """A server whose calls carry handles cannot have a tool whose own `episode` argument would be swallowed."""
    from mcpworld.core.episode_server import ToolBox
    from mcpworld.core.tools import tool

    @tool
    def rename(ctx: object, episode: str) -> str:
        """Takes an argument the handle would shadow."""
        return episode

    with pytest.raises(ValueError, match="tools \\['rename'\\] take an argument named 'episode'"):
        ToolBox([rename], max_argument_bytes=1024, handles=True)
    assert ToolBox([rename], max_argument_bytes=1024).specs["rename"].name == "rename"  # fine without handles
