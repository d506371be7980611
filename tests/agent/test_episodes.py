"""The fast client path: one `EpisodeClient` carries many concurrent episodes (a pooled sessionless client over
HTTP, one SDK connection over stdio); a connection that dies is reopened, and a server that is down or never
answers becomes an infrastructure error, never a crash or a hang."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from mcpworld.agent.episodes import EpisodeClient
from mcpworld.agent.loop import EpisodeConfig, infra_reason
from mcpworld.agent.policies import OraclePolicy
from mcpworld.agent.runner import RunSpec, list_tasks, run
from mcpworld.core.models import TaskInfo
from mcpworld.core.testing import free_port
from mcpworld.registry.client import ConnectError
from mcpworld.registry.connect import open_episodes
from mcpworld.registry.records import local_record
from mcpworld.registry.sessionless import SessionlessClient

CANCEL = {"reservation_id": "ZFA04Y", "reason": "change_of_plan"}


def airline(worlds_url: str) -> str:
    return f"{worlds_url}/worlds/airline/mcp"


def test_concurrent_episodes_share_one_pooled_client_and_never_see_each_other(worlds_url: str) -> None:
    async def main() -> tuple[list[bool], list[str]]:
        async with EpisodeClient(airline(worlds_url)) as client:
            ctl = await client.control()
            assert isinstance(ctl.client, SessionlessClient), "HTTP worlds get the pooled sessionless path"
            assert await client.control() is ctl, "every caller shares the one connection"
            passed: list[bool] = []
            statuses: list[str] = []

            async def cancels() -> None:
                started = await ctl.start("cancel-within-24h")
                assert not (await ctl.call(started.episode, "cancel_reservation", CANCEL)).is_error
                passed.append((await ctl.verify(started.episode, "Cancelled.", close=True)).verdict.passed)

            async def looks() -> None:  # same task, same reservation, another episode: untouched by the others
                started = await ctl.start("cancel-within-24h")
                rows = (await ctl.state(started.episode, table="reservation", limit=100)).rows
                statuses.append(next(r["status"] for r in rows if r["id"] == "ZFA04Y"))
                passed.append((await ctl.verify(started.episode, None, close=True)).verdict.passed)

            async with anyio.create_task_group() as tg:
                for _ in range(24):
                    tg.start_soon(cancels)
                    tg.start_soon(looks)
        return passed, statuses

    passed, statuses = anyio.run(main)
    assert sorted(passed) == [False] * 24 + [True] * 24, "each episode is judged on its own state"
    assert len(statuses) == 24 and "cancelled" not in statuses, statuses


def test_list_tasks_and_runs_go_through_the_same_client(worlds_url: str, tmp_path: Path) -> None:
    tasks = anyio.run(list_tasks, airline(worlds_url), None, None)
    assert tasks and not any(t.solution or t.answer for t in tasks), "references stay on the server"
    spec = RunSpec(server=airline(worlds_url), tasks=tasks[:6], samples=2, concurrency=12,
                   output=tmp_path / "run.jsonl")
    trajs, summary = anyio.run(lambda: run(spec, lambda i: OraclePolicy()))
    assert len(trajs) == 12 and summary.success_rate == 1.0 and summary.lost == 0
    assert len({t.episode for t in trajs}) == 12, "a fresh server-minted episode for every sample"


def _children() -> set[int]:
    """This process's child processes (Linux /proc), to find the stdio server the SDK started."""
    return {int(pid) for task in Path("/proc/self/task").iterdir()
            for pid in (task / "children").read_text().split()}


def _gone(pid: int) -> bool:
    """Dead: reaped already, or a zombie waiting for the SDK to reap it (never reaped here, that is the SDK's)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the stdio server through Linux /proc")
def test_a_dead_stdio_connection_fails_its_requests_as_infra_and_is_reopened() -> None:
    record = local_record("airline", "Airline desk", "world", stdio_args=["serve", "world", "airline", "--stdio"])

    async def main() -> None:
        before = _children()
        async with EpisodeClient(record, prefer="stdio", timeout=60) as client:
            ctl = await client.control()
            assert not isinstance(ctl.client, SessionlessClient), "stdio goes through one mcp.Client"
            started = await ctl.start("cancel-within-24h")
            [server] = _children() - before
            os.kill(server, signal.SIGKILL)
            with anyio.fail_after(30):
                while not _gone(server):
                    await anyio.sleep(0.05)
                with pytest.raises(Exception) as lost:  # noqa: PT011 - the transport decides the type
                    await ctl.call(started.episode, "cancel_reservation", CANCEL)
            assert infra_reason(lost.value) in ("connection lost", "server error"), repr(lost.value)
            with anyio.fail_after(60):
                again = await client.control()
            assert again is not ctl and _children() - before - {server}, "a new server process"
            episode = (await again.start("cancel-within-24h")).episode
            assert not (await again.call(episode, "cancel_reservation", CANCEL)).is_error
            assert (await again.verify(episode, "Cancelled.", close=True)).verdict.passed

    anyio.run(main)


def test_nobody_listening_is_server_unreachable() -> None:
    url = f"http://127.0.0.1:{free_port()}/worlds/airline/mcp"

    async def main() -> None:
        with pytest.raises(ConnectError, match="cannot reach") as err:
            async with open_episodes(url, timeout=5):
                pass
        assert infra_reason(err.value) == "server unreachable"

    anyio.run(main)


def test_a_server_that_never_answers_is_an_infra_error_within_the_timeout(tmp_path: Path) -> None:
    """A real TCP server that reads requests and never answers: the run ends with `server timed out`."""

    async def main() -> tuple[list, object]:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as tg:
            async def hang(stream: anyio.abc.SocketStream) -> None:
                async with stream:
                    async for _ in stream:  # read requests, never answer; ends when the client hangs up
                        pass

            tg.start_soon(listener.serve, hang)
            spec = RunSpec(server=f"http://127.0.0.1:{port}/worlds/airline/mcp",
                           tasks=[TaskInfo(id="cancel-within-24h", instruction="Cancel ZFA04Y.")], retries=1,
                           backoff_s=0.01, output=tmp_path / "out.jsonl", config=EpisodeConfig(turn_timeout_s=1))
            with anyio.fail_after(30):
                result = await run(spec, lambda i: OraclePolicy())
            tg.cancel_scope.cancel()
        return result

    [traj], summary = anyio.run(main)
    assert (traj.termination, traj.reward, traj.verdict, traj.attempts) == ("infra_error", 0.0, None, 2), traj.error
    assert traj.infra_reason == "server timed out" and summary.lost_reasons == {"server timed out": 1}


def test_the_docs_example_plays_64_episodes_on_one_client(worlds_url: str) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "agent.md").read_text()
    code = re.search(r"<!-- example: episodes -->\s*```python\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]
    code = code.replace("http://127.0.0.1:8765/worlds/airline/mcp", airline(worlds_url))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "64 of 64 passed"


def test_a_server_answering_in_server_sent_events_and_pages_is_read_whole() -> None:
    """A third-party server may answer a POST as an SSE stream (the spec allows it), page its tools, or stream
    without end: a real local aiohttp server that does all three, read through the same sessionless client."""
    from aiohttp import web

    seen: list[str] = []

    async def mcp(request: web.Request) -> web.StreamResponse:
        message = await request.json()
        seen.append(request.headers.get("Mcp-Method", ""))
        params = message.get("params") or {}
        if message["method"] == "server/discover":
            result: dict = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                            "serverInfo": {"name": "sse", "version": "1"}}
        elif message["method"] == "tools/list":
            page = 2 if params.get("cursor") == "p2" else 1
            result = {"tools": [{"name": f"t{page}", "inputSchema": {"type": "object"}}],
                      **({"nextCursor": "p2"} if page == 1 else {})}
        else:
            result = {"content": [{"type": "text", "text": f"called {params['name']}"}], "isError": False}
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if params.get("name") == "endless":  # a stream that never ends: 1 MiB events until the client hangs up
            for _ in range(200):
                try:
                    await response.write(b"event: message\ndata: " + b"x" * (1 << 20) + b"\n\n")
                except ConnectionError:
                    break
            return response
        await response.write(b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress",'
                             b'"params":{"progressToken":1,"progress":0.5}}\n\n')
        answer = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
        await response.write(f"event: message\ndata: {answer}\n\n".encode())
        return response

    async def main() -> tuple[list[str], str]:
        app = web.Application()
        app.router.add_post("/mcp", mcp)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            async with open_episodes(f"http://127.0.0.1:{port}/mcp", timeout=10) as ctl:
                tools = [t.name for t in await ctl.tools()]
                text = (await ctl.call("e-1", "t2", {})).content[0].text  # type: ignore[union-attr]
                with pytest.raises(MCPError, match="over 67108864 bytes"):  # memory stays bounded
                    await ctl.call("e-1", "endless", {})
        finally:
            await runner.cleanup()
        return tools, text

    tools, text = anyio.run(main)
    assert tools == ["t1", "t2"], "every page of tools/list"
    assert text == "called t2" and seen == ["server/discover", "tools/list", "tools/list", "tools/call", "tools/call"]
