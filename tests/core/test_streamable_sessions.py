"""A flood of sessions that are opened and never used or ended must not lock new clients out (issue 30).

Before: 10,000 `initialize` calls without a DELETE filled the session table, and every new client got a 503
until the 30-minute idle expiry. Now a full table ends the least recently used session that made no request
after its handshake (or one idle over a minute); sessions that work are kept.
"""

from __future__ import annotations

import httpx

from mcpworld.core.serving import serve_in_thread
from mcpworld.core.streamable import StreamableHTTP
from mcpworld.core.testing import free_port
from mcpworld.worlds.episodes import EpisodeLimits
from mcpworld.worlds.host import build_servers, worlds_app

PATH = "/worlds/airline/mcp"
LEGACY = "2025-06-18"  # sessions belong to the protocol versions before 2026-07-28
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream",
           "mcp-protocol-version": LEGACY}


def initialize(url: str) -> httpx.Response:
    return httpx.post(url, headers=HEADERS, timeout=30, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})


def open_session(url: str) -> dict[str, str]:
    reply = initialize(url)
    assert reply.status_code == 200, reply.text
    headers = {**HEADERS, "mcp-session-id": reply.headers["mcp-session-id"]}
    note = httpx.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status_code == 202
    return headers


def list_tools(url: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, timeout=30)


def test_unused_sessions_make_room_and_working_ones_stay() -> None:
    app = worlds_app(build_servers(["airline"], EpisodeLimits()))
    inner = app.endpoints[PATH][1]
    transport = inner if isinstance(inner, StreamableHTTP) else inner.app
    transport.max_sessions = 20
    with serve_in_thread(app, free_port()) as base:
        url = base + PATH
        worker = open_session(url)
        assert list_tools(url, worker).status_code == 200  # a client that works
        flood = [initialize(url) for _ in range(60)]  # opened, never used, never ended
        assert all(r.status_code == 200 for r in flood), {r.status_code for r in flood}
        newcomer = open_session(url)  # before: 503 "Too many open sessions" for 30 minutes
        assert list_tools(url, newcomer).status_code == 200
        assert list_tools(url, worker).status_code == 200, "a session that works is never the one ended"
        assert len(transport.sessions) == 20
