"""`mcpworld serve worlds --workers 2` as real processes: episodes spread over both, every request reaches the
process holding its episode (whatever connection it comes on), and killing one worker fails only its episodes,
with a clear error, while the supervisor restarts it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from mcpworld.core.testing import free_port, mcpworld_cmd, read_until, stop

MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture()
def served(tmp_path) -> Iterator[dict]:
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp_path)}
    proc = subprocess.Popen(mcpworld_cmd("serve", "worlds", "--only", "airline", "--port", str(port), "--workers", "2"),
                            env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        ready = read_until(proc, r"2 workers ready .* \(pids (\d+), (\d+)\)")
        yield {"url": f"http://127.0.0.1:{port}/worlds/airline/mcp", "proc": proc,
               "pids": [int(ready.group(1)), int(ready.group(2))]}
    finally:
        stop(proc)


def post(url: str, method: str, params: dict | None = None, *, session: str | None = None,
         modern: bool = False) -> httpx.Response:
    """One JSON-RPC request on a fresh connection (so the kernel may hand it to either worker)."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    params = dict(params or {})
    if modern:
        params["_meta"] = {**ENVELOPE, **params.get("_meta", {})}
        headers |= {"mcp-protocol-version": MODERN, "mcp-method": method}
        if "name" in params:
            headers["mcp-name"] = params["name"]
    elif session:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    with httpx.Client(timeout=30) as client:
        return client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                           headers=headers)


def open_session(url: str) -> str:
    response = post(url, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                        "clientInfo": {"name": "test", "version": "1"}})
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    with httpx.Client() as client:
        done = client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                           headers={"content-type": "application/json", "accept": "application/json",
                                    "mcp-session-id": session})
    assert done.status_code == 202, done.text
    return session


def start(url: str, seed: int) -> str:
    response = post(url, "io.mcpworld/episode/start", {"task": "cancel-within-24h", "seed": seed}, modern=True)
    assert response.status_code == 200, response.text
    return response.json()["result"]["episode"]


def get_flight(url: str, episode: str) -> httpx.Response:
    return post(url, "tools/call", {"name": "get_flight", "arguments": {"flight_id": "MW307-0602"},
                                    "_meta": {"io.mcpworld/episode": episode}}, modern=True)


def worker_of(identifier: str) -> int:
    match = re.search(r"w(\d+)\.(\d+)-", identifier)
    assert match, f"{identifier} names no worker"
    return int(match.group(1))


def test_requests_follow_their_episode_and_a_dead_worker_fails_only_its_own(served: dict) -> None:
    url = served["url"]
    episodes = [start(url, 0) for _ in range(16)]  # seed 0: the flight get_flight names exists
    sessions = [open_session(url) for _ in range(16)]  # hashed by the kernel: 8 all on one worker is 1 in 128
    by_worker = {0: [e for e in episodes if worker_of(e) == 0], 1: [e for e in episodes if worker_of(e) == 1]}
    assert by_worker[0] and by_worker[1], f"16 new episodes all landed on one worker: {episodes}"
    assert {worker_of(s) for s in sessions} == {0, 1}

    # Each call comes on a new connection, so about half arrive at the other worker: all must still work.
    for episode in episodes:
        result = get_flight(url, episode)
        assert result.status_code == 200 and not result.json()["result"]["isError"], result.text
    for session in sessions:
        listed = post(url, "tools/list", session=session)
        assert listed.status_code == 200 and listed.json()["result"]["tools"], listed.text

    # Issue 30: ids naming workers that do not exist made a worker create and keep a new client each (2,000
    # requests grew two workers past 1 GB); they are refused, and nothing is kept for them.
    for index in (2, 7, 99_999):
        ghost = get_flight(url, f"e-w{index}.0-0123456789abcdef")
        assert ghost.status_code == 404 and f"names worker {index}" in ghost.text, ghost.text
    deep = httpx.post(url, content=b'{"episode": "e-w1.0-x", "p": ' + b"[" * 100_000, timeout=30,
                      headers={"accept": "application/json, text/event-stream", "content-type": "application/json"})
    assert deep.status_code == 400 and "Parse error" in deep.text, deep.text  # the router's 500 before

    os.kill(served["pids"][1], signal.SIGKILL)  # mid-run
    restarted = read_until(served["proc"], r"worker 1 \(pid \d+\) exited .* generation 1")
    assert restarted

    for episode in by_worker[0]:  # the other worker's episodes are untouched
        result = get_flight(url, episode)
        assert result.status_code == 200 and not result.json()["result"]["isError"], result.text
    for episode in by_worker[1]:  # the dead worker's fail, saying why
        result = get_flight(url, episode)
        assert result.status_code in (404, 503), result.text
        message = result.json()["error"]["message"]
        assert "worker 1" in message and "start a new episode" in message, message
    for session in sessions:
        listed = post(url, "tools/list", session=session)
        if worker_of(session) == 0:
            assert listed.status_code == 200, listed.text
        else:
            assert listed.status_code in (404, 503) and "worker 1" in listed.json()["error"]["message"]

    # Once the new worker 1 is up, new episodes land on both workers again.
    read_until(served["proc"], r"worker 1 ready again .* generation 1")
    assert {worker_of(start(url, 0)) for _ in range(16)} == {0, 1}
