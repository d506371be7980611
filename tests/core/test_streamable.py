"""The transport's fast path (`StreamableHTTP._fast_request`: tools/call and the extension's own methods) and
the direct endpoint dispatch (`serving.DirectEndpoints`) answer exactly what the SDK's full pipeline and the
app's router answer.

Two real world servers over HTTP, one per process thread: one plain, one with a pass-through middleware of its
own (which makes the transport take the SDK's path), sent the same requests on both protocol versions. Their
replies must match byte for byte, up to the episode ids each server mints.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcpworld.core import protocol
from mcpworld.core.episode_server import error_wire, text_result, value_result, value_wire, wire_result
from mcpworld.core.serving import DirectEndpoints, serve_in_thread
from mcpworld.core.testing import free_port
from mcpworld.worlds.episodes import EpisodeLimits
from mcpworld.worlds.host import build_servers, worlds_app

PATH = "/worlds/airline/mcp"
MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}
IDS = re.compile(r"e-[0-9a-f.w-]+")


async def passthrough(ctx: Any, call_next: Any) -> Any:
    return await call_next(ctx)


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    fast = build_servers(["airline"], EpisodeLimits())
    full = build_servers(["airline"], EpisodeLimits())
    full[0].server.middleware.append(passthrough)  # a server with middleware of its own: the SDK's path
    with serve_in_thread(worlds_app(fast), free_port()) as a, serve_in_thread(worlds_app(full), free_port()) as b:
        yield {"fast": a + PATH, "full": b + PATH}


class Session:
    """Raw JSON-RPC over HTTP, on either protocol version."""

    def __init__(self, url: str, version: str):
        self.url, self.version, self.n = url, version, 0
        self.headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                        "mcp-protocol-version": version}
        if version != MODERN:
            reply = self.post("initialize", {"protocolVersion": version, "capabilities": {},
                                             "clientInfo": {"name": "t", "version": "1"}})
            self.headers["mcp-session-id"] = reply.headers["mcp-session-id"]
            note = httpx.post(url, headers=self.headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert note.status_code == 202

    def post(self, method: str, params: dict[str, Any]) -> httpx.Response:
        self.n += 1
        headers = dict(self.headers)
        if self.version == MODERN:
            params = {**params, "_meta": {**ENVELOPE, **params.get("_meta", {})}}
            headers["mcp-method"] = method
            if isinstance(params.get("name"), str):
                headers["mcp-name"] = params["name"]
        return httpx.post(self.url, headers=headers, json={"jsonrpc": "2.0", "id": self.n, "method": method,
                                                           "params": params}, timeout=30)


def calls(episode: str) -> list[dict[str, Any]]:
    meta = {"io.mcpworld/episode": episode}
    return [
        {"name": "get_flight", "arguments": {"flight_id": "MW307-0602"}, "_meta": meta},  # a read
        {"name": "get_flight", "arguments": {"flight_id": "NOPE"}, "_meta": meta},  # the tool's own error
        {"name": "get_flight", "arguments": {"flight_id": 7}, "_meta": meta},  # a wrong argument type
        {"name": "get_flight", "arguments": {}, "_meta": meta},  # a missing argument
        {"name": "no_such_tool", "arguments": {}, "_meta": meta},
        {"name": "update_contact", "arguments": {"customer_id": "C003", "phone": "555"}, "_meta": meta},  # a write
        {"name": "get_flight", "arguments": {"flight_id": "MW307-0602"}, "_meta": {"io.mcpworld/episode": "e-gone"}},
        {"name": "get_flight", "arguments": {"flight_id": "MW307-0602"}},  # no episode named: the session's own
        {"name": "get_flight", "arguments": "not an object", "_meta": meta},  # malformed: the SDK's error shape
        {"name": 5, "arguments": {}, "_meta": meta},
        {"name": "list_payment_methods", "arguments": {"customer_id": "C003"}, "_meta": meta},  # a list
        {"name": "get_flight", "arguments": {"flight_id": "MW307-0602", "episode": episode}},  # the handle argument
        {"name": "get_flight", "arguments": {"flight_id": "MW307-0602"}, "_meta": {**meta, "progressToken": 1.5}},
        {"name": "get_flight", "arguments": {"flight_id": "MW307-0602"}, "_meta": meta, "task": 5},  # unknown param
        {"name": "get_flight", "arguments": {"flight_id": "x" * 300_000}, "_meta": meta},  # over the size guard
        {"name": "get_flight", "arguments": {"flight_id": "MW307-0602"}, "_meta": {"io.mcpworld/episode": 7}},
    ]


def control(episode: str) -> list[tuple[str, dict[str, Any]]]:
    """The extension's own methods: well-formed, refused by the handler, and malformed (the SDK's error shape)."""
    return [
        ("io.mcpworld/episode/start", {}),  # the seeded world, no task
        ("io.mcpworld/episode/start", {"task": "cancel-within-24h", "seed": True}),  # what the model makes of these
        ("io.mcpworld/episode/start", {"task": "cancel-within-24h", "seed": 2.0}),
        ("io.mcpworld/episode/start", {"task": "cancel-within-24h", "other": 1}),
        ("io.mcpworld/episode/verify", {"episode": episode, "answer": 5}),
        ("io.mcpworld/episode/verify", {"episode": episode, "close": [1]}),  # malformed: no verdict
        ("io.mcpworld/episode/state", {"episode": episode, "table": "reservation", "limit": 2}),
        ("io.mcpworld/episode/state", {"episode": episode, "table": "nope"}),
        ("io.mcpworld/episode/tasks", {"split": "test"}),
        ("io.mcpworld/episode/start", {"task": "no-such-task"}),
        ("io.mcpworld/episode/start", {"task": "cancel-within-24h", "seed": "not a number"}),
        ("io.mcpworld/episode/verify", {"episode": episode, "_meta": {"progressToken": "p"}}),  # judged: it ends
        ("io.mcpworld/episode/verify", {"episode": episode, "answer": "done"}),  # a second verdict: none
        ("io.mcpworld/episode/close", {"episode": episode}),  # closed already
        ("io.mcpworld/episode/verify", {"episode": "e-gone"}),
        ("io.mcpworld/episode/nope", {}),
    ]


def replies(url: str, version: str) -> list[tuple[int, Any]]:
    session = Session(url, version)
    started = session.post("io.mcpworld/episode/start", {"task": "cancel-within-24h", "seed": 0})
    episode = started.json()["result"]["episode"]
    out = [(started.status_code, json.loads(IDS.sub("e-ID", started.text)))]
    for params in calls(episode):
        reply = session.post("tools/call", params)
        out.append((reply.status_code, json.loads(IDS.sub("e-ID", reply.text))))
    for method, params in control(episode):
        reply = session.post(method, params)
        out.append((reply.status_code, json.loads(IDS.sub("e-ID", reply.text))))
        if method in MODELS and "result" in reply.json():  # handlers build these results as dicts: each must be
            result = {k: v for k, v in reply.json()["result"].items() if k not in ("resultType", "_meta")}
            model = MODELS[method].model_validate(result)  # exactly what the extension's result model dumps to
            assert model.model_dump(by_alias=True, mode="json", exclude_none=True) == result
    return out


MODELS = {"io.mcpworld/episode/start": protocol.StartResult, "io.mcpworld/episode/verify": protocol.VerifyResult}


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2024-11-05", MODERN])
def test_fast_path_answers_what_the_sdk_pipeline_answers(servers: dict[str, str], version: str) -> None:
    fast, full = replies(servers["fast"], version), replies(servers["full"], version)
    assert fast == full
    assert fast[0][1]["result"]["episode"] == "e-ID"
    ok = fast[1][1]["result"]
    assert ok["isError"] is False and ok["structuredContent"]["id"] == "MW307-0602"
    assert fast[2][1]["result"]["isError"] is True and fast[5][1]["result"]["isError"] is True
    state, refused, tasks, unknown, malformed, verdict, second, again, gone, nope = fast[-10:]
    assert len(state[1]["result"]["rows"]) == 2 and "error" in refused[1] and tasks[1]["result"]["tasks"]
    assert unknown[1]["error"]["code"] == malformed[1]["error"]["code"] == -32602
    assert verdict[1]["result"]["verdict"]["passed"] is False and verdict[1]["result"]["closed"] is True
    assert verdict[1]["result"]["sealed"] is True and all(c["detail"] == "" for c in
                                                          verdict[1]["result"]["verdict"]["checks"])
    assert second[1]["error"]["code"] == -32602  # one verdict per episode: the probe finds no episode
    assert again[1]["result"]["closed"] is False and "error" in gone[1] and nope[1]["error"]["code"] == -32601
    if version == MODERN:  # the 2026-07-28 result envelope: resultType and the server's identity
        assert ok["resultType"] == "complete"
        assert ok["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "io.mcpworld/airline"
    else:
        assert "resultType" not in ok


def test_sessionless_call_without_an_episode_mints_one_on_both_paths(servers: dict[str, str]) -> None:
    texts = []
    for url in (servers["fast"], servers["full"]):
        reply = Session(url, MODERN).post("tools/call", {"name": "get_flight",
                                                         "arguments": {"flight_id": "MW307-0602"}})
        result = reply.json()["result"]
        assert result["isError"] is False
        texts.append(IDS.sub("e-ID", json.dumps(result, sort_keys=True)))
    assert texts[0] == texts[1] and "e-ID" in texts[0]  # the minted handle is said the same way


def test_direct_dispatch_keeps_the_routers_answers(servers: dict[str, str]) -> None:
    base = servers["fast"][: -len(PATH)]
    assert httpx.get(base + "/healthz").json()["status"] == "ok"  # not an endpoint: the app's own route
    assert httpx.get(base + PATH).status_code == 405  # the endpoint, straight
    browser = httpx.post(base + PATH, headers={"origin": "http://evil.example", "content-type": "application/json"},
                         json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert browser.status_code == 403  # a request with an Origin takes the full stack: still refused
    assert httpx.post(base + "/worlds/nope/mcp", json={}).status_code == 404


def test_direct_endpoints_find_every_mounted_world() -> None:
    app = worlds_app(build_servers(["airline", "shop"], EpisodeLimits()))
    assert isinstance(app, DirectEndpoints)
    assert sorted(app.endpoints) == ["/worlds/airline/mcp", "/worlds/shop/mcp"]


def test_each_sessionless_request_is_its_own_connection() -> None:
    """2026-07-28 requests with the same envelope share the parsed client info, never per-connection state; a
    request with another envelope is seen as that client."""
    import mcp_types as types
    from mcp.server.lowlevel.server import Server
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from mcpworld.core.episode_server import endpoint, running
    from mcpworld.core.security import Exposure

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        connection = ctx.session._connection
        seen = {"client": ctx.session.client_params.client_info.name, "state": dict(connection.state),
                "capabilities": ctx.session.client_capabilities.model_dump(exclude_none=True)}
        connection.state["touched"] = True
        connection.exit_stack.push_async_callback(cleaned.append, True)  # a handler's cleanup for its connection
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(seen))])

    server: Server[Any] = Server("probe", on_call_tool=call_tool)
    app = Starlette(routes=[Mount("/p", app=endpoint(server, Exposure.of("127.0.0.1")))],
                    lifespan=lambda app: running([server]))
    seen: list[dict[str, Any]] = []
    cleaned: list[bool] = []
    with serve_in_thread(app, free_port()) as base:
        for name, caps in [("a", {}), ("a", {}), ("b", {"sampling": {}}), ("a", {})]:
            meta = {**ENVELOPE, "io.modelcontextprotocol/clientInfo": {"name": name, "version": "1"},
                    "io.modelcontextprotocol/clientCapabilities": caps}
            reply = httpx.post(base + "/p/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                     "params": {"name": "probe", "arguments": {}, "_meta": meta}},
                               headers={"accept": "application/json", "mcp-protocol-version": MODERN,
                                        "mcp-method": "tools/call", "mcp-name": "probe"})
            seen.append(json.loads(reply.json()["result"]["content"][0]["text"]))
    assert [s["client"] for s in seen] == ["a", "a", "b", "a"]
    assert [s["capabilities"] for s in seen] == [{}, {}, {"sampling": {}}, {}]
    assert all(s["state"] == {} for s in seen)  # what one request left on its connection, the next never sees
    assert cleaned == [True] * 4  # and its cleanup ran when the request ended


def test_a_cancelled_request_stops_and_gets_no_response() -> None:
    """2025-11-25: `notifications/cancelled` stops the named request (the spec: no response; the POST ends 202,
    empty), the session serves on, and ending a session stops what it still had running."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import anyio
    import mcp_types as types
    from mcp.server.lowlevel.server import Server
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from mcpworld.core.episode_server import endpoint, running
    from mcpworld.core.security import Exposure

    started, stopped = threading.Event(), threading.Event()

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "hang":
            started.set()
            try:
                await anyio.sleep_forever()
            finally:
                stopped.set()
        return types.CallToolResult(content=[types.TextContent(type="text", text="quick")])

    server: Server[Any] = Server("probe", on_call_tool=call_tool)
    app = Starlette(routes=[Mount("/p", app=endpoint(server, Exposure.of("127.0.0.1")))],
                    lifespan=lambda app: running([server]))
    with serve_in_thread(app, free_port()) as base, ThreadPoolExecutor(2) as pool:
        session = Session(base + "/p/mcp", "2025-11-25")
        for end in ("notifications/cancelled", "DELETE"):
            started.clear(), stopped.clear()
            hung = pool.submit(session.post, "tools/call", {"name": "hang", "arguments": {}})
            assert started.wait(30)
            if end == "DELETE":
                assert httpx.delete(session.url, headers=session.headers).status_code == 200
            else:
                for odd in ([session.n], {"id": session.n}, None):  # issue 30: a list here was a bare 500
                    note = {"jsonrpc": "2.0", "method": end, "params": {"requestId": odd}}
                    assert httpx.post(session.url, headers=session.headers, json=note).status_code == 202
                assert not stopped.is_set()  # and it cancels nothing
                note = {"jsonrpc": "2.0", "method": end, "params": {"requestId": session.n, "reason": "test"}}
                assert httpx.post(session.url, headers=session.headers, json=note).status_code == 202
            reply = hung.result(timeout=30)
            assert (reply.status_code, reply.content) == (202, b"")
            assert stopped.wait(30)
            if end != "DELETE":  # the session serves on
                assert session.post("tools/call", {"name": "quick", "arguments": {}}).json()["result"][
                    "content"][0]["text"] == "quick"


def test_a_routing_header_sent_twice_is_refused(servers: dict[str, str]) -> None:
    """2026-07-28: first-copy and last-copy readers would disagree, so a duplicated routing header is an error."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "get_flight", "arguments": {"flight_id": "MW307-0602"}, "_meta": ENVELOPE}}
    base = [("content-type", "application/json"), ("accept", "application/json"), ("mcp-protocol-version", MODERN),
            ("mcp-name", "get_flight")]
    for url in (servers["fast"], servers["full"]):
        twice = httpx.post(url, headers=[*base, ("mcp-method", "tools/call"), ("Mcp-Method", "tools/call")],
                           content=json.dumps(body))
        assert twice.status_code == 400 and "mcp-method header appears more than once" in twice.json()["error"][
            "message"]
        other = httpx.post(url, headers=[*base, ("mcp-method", "tools/call"), ("x-note", "a"), ("x-note", "b")],
                           content=json.dumps(body))  # a repeated header that routes nothing is fine
        assert other.status_code == 200 and other.json()["result"]["isError"] is False


@pytest.mark.parametrize("value", [
    {"id": "F1", "price": 12.5, "tags": ["a", "é"], "nested": {"n": None, "ok": True}},
    "plain text", [1, 2, 3], None, 3.5, 0,
    {"x": float("nan")}, [float("inf")],  # JSON has no NaN: pydantic writes null, text keeps json.dumps' NaN
    {"u": uuid.UUID(int=7), "b": b"raw"},  # types only `default=str` (text) and pydantic (structured) convert
])
def test_a_tool_value_in_wire_shape_is_what_the_sdk_model_dumps(value: Any) -> None:
    assert value_wire(value) == wire_result(value_result(value))
    assert json.loads(json.dumps(value_wire(value), allow_nan=False))  # always valid JSON on the wire


def test_a_tool_error_in_wire_shape_is_what_the_sdk_model_dumps() -> None:
    assert error_wire("no such flight") == wire_result(text_result("no such flight", error=True))


def test_admission_is_decided_per_header_combination(servers: dict[str, str]) -> None:
    """The transport remembers what each combination of Content-Type, Host, Origin and Accept let through: a bad
    header after good requests (and a good one after a refusal) must still get its own answer."""
    url = servers["fast"]
    body = {"jsonrpc": "2.0", "id": 1, "method": "io.mcpworld/episode/tasks", "params": {"_meta": ENVELOPE}}
    good = {"content-type": "application/json", "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MODERN, "mcp-method": "io.mcpworld/episode/tasks"}
    port = httpx.URL(url).port
    cases = [({}, 200), ({"host": "attacker.example"}, 421), ({"origin": "http://attacker.example"}, 403),
             ({"accept": "text/html"}, 406), ({"content-type": "text/plain"}, 400),
             ({"accept": "text/event-stream"}, 200), ({"host": f"LOCALHOST:{port}"}, 200),  # host names: any case
             ({"host": f"ATTACKER.example:{port}"}, 421), ({}, 200)]
    for _ in range(2):  # the second round is answered from what the first remembered
        for change, status in cases:
            reply = httpx.post(url, headers={**good, **change}, content=json.dumps(body), timeout=30)
            assert reply.status_code == status, (change, reply.text)
            if change == {"accept": "text/event-stream"}:  # an SSE-only client gets its answer as one event
                assert reply.headers["content-type"].startswith("text/event-stream")
                assert reply.text.startswith("event: message\ndata: {")


def test_a_remembered_envelope_never_answers_for_a_different_request(servers: dict[str, str]) -> None:
    """2026-07-28 classifications are remembered per exact envelope and routing headers: a request that differs
    from a good one in any of them (after the good one was answered) is checked afresh and refused."""
    url = servers["fast"]
    session = Session(url, MODERN)
    episode = session.post("io.mcpworld/episode/start", {"task": "cancel-within-24h"}).json()["result"]["episode"]
    call = {"name": "get_flight", "arguments": {"flight_id": "MW307-0602"}, "_meta": {"io.mcpworld/episode": episode}}

    def send(headers: dict[str, str], meta: dict[str, Any], name: str = "get_flight") -> httpx.Response:
        base = {**session.headers, "mcp-method": "tools/call", "mcp-name": "get_flight", **headers}
        params = {**call, "name": name, "_meta": {**ENVELOPE, **call["_meta"], **meta}}
        return httpx.post(url, headers=base, json={"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                                                   "params": params}, timeout=30)

    good = send({}, {})
    assert good.status_code == 200 and good.json()["result"]["isError"] is False
    unsupported = {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    for headers, meta, name in [({"mcp-name": "get_reservation"}, {}, "get_flight"),  # header and body disagree
                                ({}, {}, "get_reservation"),
                                ({"mcp-method": "tools/list"}, {}, "get_flight"),
                                ({"mcp-protocol-version": "2099-01-01"}, unsupported, "get_flight")]:
        refused = send(headers, meta, name)
        assert refused.status_code == 400 and "error" in refused.json(), (headers, meta, name, refused.text)
    missing = {**call, "_meta": {k: v for k, v in {**ENVELOPE, **call["_meta"]}.items()
                                 if k != "io.modelcontextprotocol/clientCapabilities"}}
    refused = httpx.post(url, headers={**session.headers, "mcp-method": "tools/call", "mcp-name": "get_flight"},
                         json={"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": missing}, timeout=30)
    assert refused.status_code == 400 and "clientCapabilities" in refused.json()["error"]["message"]
    assert send({}, {}).json()["result"]["isError"] is False  # and the good one is still good


def test_envelopes_kept_stay_few_and_small_whatever_clients_send() -> None:
    """What the transport remembers of 2026-07-28 envelopes is bounded: an envelope over 4 KiB is classified per
    request and never kept, and many distinct small ones never keep more than 256; every request is answered."""
    from starlette.routing import Mount

    from mcpworld.core.streamable import StreamableHTTP

    app = worlds_app(build_servers(["airline"], EpisodeLimits()))
    mounted = [getattr(r.app, "app", r.app) for r in app.app.router.routes if isinstance(r, Mount)]  # past the guard
    transport = next(a for a in mounted if isinstance(a, StreamableHTTP))
    with serve_in_thread(app, free_port()) as base, httpx.Client(timeout=30) as client:
        for i in range(600):  # 300 big, 300 small: more than 256 to keep
            big = i % 2 == 0
            caps = {"experimental": {f"x{i}": {"blob": "z" * (8000 if big else 10)}}}
            meta = {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": caps}
            reply = client.post(base + PATH, json={"jsonrpc": "2.0", "id": i, "method": "io.mcpworld/episode/tasks",
                                                    "params": {"_meta": meta}},
                                headers={"accept": "application/json", "mcp-protocol-version": MODERN,
                                         "mcp-method": "io.mcpworld/episode/tasks"})
            assert reply.status_code == 200 and reply.json()["result"]["tasks"], reply.text
            kept = list(transport._routes)
            assert len(kept) <= 256 and all(sum(len(k) for k in key if k) <= 4096 for key in kept)
    assert kept  # the small ones were kept (the cache works at all)


def test_a_hosted_world_answers_plain_calls_start_and_verify_through_the_hooks_it_hands_in() -> None:
    """The hot path is explicit: the world server hands its `WireHooks` to the transport it is mounted on, and a
    plain tools/call, episode start and verify over HTTP reach exactly those handlers (the answers alone cannot
    tell: the typed path answers the same)."""
    from mcpworld.core.streamable import WireHooks

    world = build_servers(["airline"], EpisodeLimits())
    reached: list[str] = []

    def counted(name: str, handler: Any) -> Any:
        async def wrapped(*args: Any) -> Any:
            reached.append(name)
            return await handler(*args)
        return wrapped

    hooks = world[0].wire
    world[0].wire = WireHooks(call_tool=counted("tools/call", hooks.call_tool),
                              methods={m: counted(m, h) for m, h in hooks.methods.items()})
    with serve_in_thread(worlds_app(world), free_port()) as base:
        session = Session(base + PATH, MODERN)
        started = session.post(protocol.METHOD_START, {"task": "cancel-within-24h"}).json()["result"]
        episode = started["episode"]
        session.post("tools/call", {"name": "get_flight", "arguments": {"flight_id": "MW307-0602"},
                                    "_meta": {"io.mcpworld/episode": episode}})
        session.post(protocol.METHOD_VERIFY, {"episode": episode})
    assert reached == [protocol.METHOD_START, "tools/call", protocol.METHOD_VERIFY]
