"""N server processes behind one port (`--workers N`): SO_REUSEPORT spreads connections, ids route requests.

Why this design (see docs/benchmarks.md, "Serving"): a front router process would parse every request twice and,
on 2 cores, take a core from the workers; with SO_REUSEPORT each worker accepts its own share of connections and
a request reaches its episode's process without any extra hop as long as the client keeps using the connection it
started on (what a keep-alive client does). When it does not (a pooled client), the id says where to go: every
session id and episode id a worker mints carries its tag `w<index>.<generation>-`, and a worker that receives a
request naming another worker's id forwards it whole over that worker's Unix socket (private to this user).

- New episodes and sessions start where their connection landed: the kernel spreads connections evenly.
- A worker that dies is restarted by the supervisor with the next generation; a request naming an episode or
  session of the dead process gets a clear error (503 while it is down, then "held by an earlier process") and
  nothing else is affected. A worker that dies again and again at start stops the whole server, saying so.
- A request of a live worker's episode that was passing through the dying one (forwarded) loses its connection,
  though its episode lives on: the client asks once more, marked `RETRY_HEADER`, and the owner answers with the
  reply it kept for that request (`Replies`), so the request never acts twice and the episode goes on.
- Single process (`--workers 1`, the default): none of this runs; ids are as before.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpworld.core.streamable import BodyTimeout, BodyTooLarge, ClientGone, read_body, rpc_error, send_json

logger = logging.getLogger(__name__)

ENV_WORKER = "MCPWORLD_WORKER"  # "<index>.<generation>" in a worker process
ENV_WORKERS = "MCPWORLD_WORKERS"
ENV_DIR = "MCPWORLD_WORKER_DIR"  # where the workers' Unix sockets and ready files are
HOP_HEADER = b"x-mcpworld-forwarded"
RETRY_HEADER = "x-mcpworld-retry"  # a client asking again after its connection broke under the request
KEPT_REPLIES = 4096  # episodes whose last reply a worker keeps for such a retry (least recently used go first)
TAG = re.compile(r"w(\d+)\.(\d+)-")
MAX_BODY = 4 * 1024 * 1024
CRASH_WINDOW_S = 5.0  # a worker that exits this soon after starting, CRASH_LIMIT times running, is not restarted
CRASH_LIMIT = 3
INERT_META = "io.mcpworld/episode"


@dataclass(frozen=True)
class Worker:
    index: int
    generation: int
    count: int
    directory: Path

    @property
    def tag(self) -> str:
        return f"w{self.index}.{self.generation}-"

    def socket_path(self, index: int) -> Path:
        return self.directory / f"worker-{index}.sock"


def current() -> Worker | None:
    """This process's place among the workers, or None when it serves alone."""
    value = os.environ.get(ENV_WORKER)
    if not value:
        return None
    index, _, generation = value.partition(".")
    return Worker(int(index), int(generation or 0), int(os.environ.get(ENV_WORKERS, "1")),
                  Path(os.environ[ENV_DIR]))


def id_tag() -> str:
    """What every id this process mints starts with after its kind prefix (empty when it serves alone)."""
    value = os.environ.get(ENV_WORKER)
    return f"w{value}-" if value else ""


def owner_of(identifier: Any) -> tuple[int, int] | None:
    """(worker index, generation) named by an id, or None for an untagged id."""
    if not isinstance(identifier, str):
        return None
    match = TAG.search(identifier[:40])
    return (int(match.group(1)), int(match.group(2))) if match else None


def _episode_ids(body: bytes) -> tuple[Any, list[Any]]:
    """A JSON-RPC body's id, and the episode ids it names: `_meta` (the extension), `params.episode`,
    `arguments.episode`."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):  # the worker that serves it answers the parse error
        return None, []
    params = message.get("params") if isinstance(message, dict) else None
    if not isinstance(params, dict):
        return None, []
    meta, arguments = params.get("_meta"), params.get("arguments")
    return message.get("id"), [meta.get(INERT_META) if isinstance(meta, dict) else None, params.get("episode"),
                               arguments.get("episode") if isinstance(arguments, dict) else None]


Reply = tuple[int, list[Any], bytes]  # status, headers, body


class Replies:
    """The reply to each episode's latest request, kept so a request asked again (`RETRY_HEADER`) after the
    connection broke under it gets the answer it missed instead of acting twice.

    One per episode (a client that sends the next request got the last answer), at most KEPT_REPLIES episodes.
    """

    def __init__(self, cap: int = KEPT_REPLIES):
        self.cap = cap
        self._kept: OrderedDict[str, tuple[Any, asyncio.Future[Reply]]] = OrderedDict()

    def get(self, episode: str, rid: Any) -> asyncio.Future[Reply] | None:
        kept = self._kept.get(episode)
        return kept[1] if kept is not None and kept[0] == rid else None

    def begin(self, episode: str, rid: Any) -> asyncio.Future[Reply]:
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._kept[episode] = (rid, future)
        self._kept.move_to_end(episode)
        while len(self._kept) > self.cap:
            self._kept.popitem(last=False)
        return future

    def forget(self, episode: str, future: asyncio.Future[Reply]) -> None:
        """Drop a request that ended without a whole reply (asking again then plays it again)."""
        kept = self._kept.get(episode)
        if kept is not None and kept[1] is future:
            del self._kept[episode]
        if not future.done():
            future.cancel()


class WorkerRouter:
    """ASGI middleware of each worker: tags the session ids it mints, and sends a request naming another worker's
    session or episode to that worker (over its Unix socket), so every request of an episode reaches its process."""

    def __init__(self, app: Any, worker: Worker):
        self.app, self.worker = app, worker
        self._clients: dict[int, Any] = {}
        self.replies = Replies()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope["headers"]
        forwarded = any(k == HOP_HEADER for k, _ in headers)
        owner, what, rid, episode = None, "", None, None
        session = next((v.decode("latin-1") for k, v in headers if k == b"mcp-session-id"), None)
        if session is not None:
            owner, what = owner_of(session), "session"
        body: bytes | None = None
        if scope["method"] == "POST" and owner is None:
            try:
                body = await read_body(receive, MAX_BODY)
            except ClientGone:
                return
            except (BodyTooLarge, BodyTimeout) as exc:
                status, text = (413, f"Request body too large (max {MAX_BODY} bytes); send less") if isinstance(
                    exc, BodyTooLarge) else (408, "the request body did not arrive in time; send it whole")
                await send_json(send, status, rpc_error(-32600, text), close=True)
                return
            if b"-w" in body:  # a tagged id may be in it: look where ids go
                rid, ids = _episode_ids(body)
                episode = next((i for i in ids if owner_of(i) is not None), None)
                owner, what = owner_of(episode), "episode"
        if owner is not None and not 0 <= owner[0] < self.worker.count:  # no such worker: never a new client for it
            text = (f"unknown {what}: it names worker {owner[0]}, and this server runs workers 0 to "
                    f"{self.worker.count - 1}")
            await send_json(send, 404, rpc_error(-32602 if what == "episode" else -32600, text))
            return
        if owner is not None and owner[0] != self.worker.index and not forwarded:
            await self._forward(owner, what, scope, receive, send, body)
            return
        if owner is not None and owner != (self.worker.index, self.worker.generation):
            await self._gone(owner, what, send)
            return
        if session is not None and owner is not None:  # the app knows the id without its tag
            raw = session[len(self.worker.tag):] if session.startswith(self.worker.tag) else session
            scope = {**scope, "headers": [(k, raw.encode() if k == b"mcp-session-id" else v) for k, v in headers]}
        if episode is not None and rid is not None:  # our own episode's request: keep its reply
            await self._kept(scope, receive, send, body, episode, rid)
            return
        await self.app(scope, _replay(body, receive) if body is not None else receive, self._tagging(send))

    async def _kept(self, scope: Any, receive: Any, send: Any, body: bytes | None, episode: str, rid: Any) -> None:
        """Serve a request of one of our episodes, keeping its reply; a retry of one already served (or being
        served) gets that reply, and the request does not run again."""
        tagged = self._tagging(send)
        if any(k == RETRY_HEADER.encode() for k, _ in scope["headers"]) and (
                earlier := self.replies.get(episode, rid)) is not None:
            try:
                status, headers, payload = await asyncio.shield(earlier)
            except asyncio.CancelledError:
                if not earlier.cancelled():
                    raise
            else:
                await tagged({"type": "http.response.start", "status": status, "headers": headers})
                await tagged({"type": "http.response.body", "body": payload})
                return
        future = self.replies.begin(episode, rid)
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def keeping(message: Any) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body") and not future.done():
                    future.set_result((start.get("status", 200), list(start.get("headers", [])), b"".join(chunks)))
            await tagged(message)
        try:
            await self.app(scope, _replay(body, receive) if body is not None else receive, keeping)
        finally:
            if not future.done():
                self.replies.forget(episode, future)

    def _tagging(self, send: Any) -> Callable[[Any], Any]:
        tag = self.worker.tag.encode()

        async def tagged(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [
                    (k, v if k.lower() != b"mcp-session-id" or v.startswith(tag) else tag + v)
                    for k, v in message.get("headers", [])]}
            await send(message)
        return tagged

    async def _gone(self, owner: tuple[int, int], what: str, send: Any) -> None:
        text = (f"this {what} was held by an earlier process of worker {owner[0]} (generation {owner[1]}), which "
                f"stopped; what it held is lost: start a new {what}")
        await send_json(send, 404, rpc_error(-32602 if what == "episode" else -32600, text))

    async def _forward(self, owner: tuple[int, int], what: str, scope: Any, receive: Any, send: Any,
                       body: bytes | None) -> None:
        import httpx

        if body is None:
            try:
                body = await read_body(receive, MAX_BODY)
            except (ClientGone, BodyTooLarge, BodyTimeout):
                await send_json(send, 400, rpc_error(-32600, "the request body could not be read"), close=True)
                return
        client = self._clients.get(owner[0])
        if client is None:
            # Idle connections are dropped well before uvicorn's keep-alive timeout (5 s) would close them under a
            # request; no cap on how many (a forward waits for nothing but its owner).
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=256, keepalive_expiry=1.0)
            transport = httpx.AsyncHTTPTransport(uds=str(self.worker.socket_path(owner[0])), limits=limits)
            client = self._clients[owner[0]] = httpx.AsyncClient(transport=transport, timeout=None)
        path = scope.get("raw_path") or scope["path"].encode()
        url = "http://worker" + path.decode("latin-1") + ("?" + scope["query_string"].decode("latin-1")
                                                           if scope.get("query_string") else "")
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"content-length", b"connection",
                                                                    b"transfer-encoding")]
        headers.append((HOP_HEADER, b"1"))
        try:
            request = client.build_request(scope["method"], url, headers=headers, content=body)
            response = await client.send(request, stream=True)
        except httpx.TransportError as exc:
            logger.warning("forwarding to worker %d failed: %r", owner[0], exc)
            text = (f"worker {owner[0]}, which holds this {what}, is not running (it stopped and is being "
                    f"restarted); what it held is lost: start a new {what}")
            await send_json(send, 503, rpc_error(-32603, text))
            return
        try:
            out = [(k, v) for k, v in response.headers.raw if k.lower() not in (b"transfer-encoding", b"connection")]
            await send({"type": "http.response.start", "status": response.status_code, "headers": out})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()


def _replay(body: bytes, receive: Any) -> Callable[[], Any]:
    sent = [False]

    async def replayed() -> Any:
        if not sent[0]:
            sent[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replayed


# -- processes -------------------------------------------------------------------------------------------------


def port_free(host: str, port: int) -> bool:
    """Whether nothing listens on host:port (SO_REUSEADDR, as servers bind: TIME_WAIT leftovers do not count)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


class Supervisor:
    """Starts, watches and restarts the worker processes."""

    def __init__(self, host: str, port: int, count: int, startup_timeout_s: float = 120.0):
        self.host, self.port, self.count = host, port, count
        self.startup_timeout_s = startup_timeout_s
        self.directory = Path(tempfile.mkdtemp(prefix="mcpworld-workers-"))  # mode 0700: this user only
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.generations = dict.fromkeys(range(count), 0)
        self.started_at: dict[int, float] = {}
        self.crashes = dict.fromkeys(range(count), 0)
        self.restarting: set[int] = set()
        self.stopping = False

    def command(self) -> list[str]:
        return [sys.executable, *sys.orig_argv[1:]]

    def start(self, index: int) -> None:
        env = {**os.environ, ENV_WORKER: f"{index}.{self.generations[index]}", ENV_WORKERS: str(self.count),
               ENV_DIR: str(self.directory)}
        self.procs[index] = subprocess.Popen(self.command(), env=env)
        self.started_at[index] = time.monotonic()

    def wait_ready(self, index: int) -> None:
        ready = self.directory / f"ready-{index}.{self.generations[index]}"
        deadline = time.monotonic() + self.startup_timeout_s
        while not ready.exists():
            if self.procs[index].poll() is not None:
                raise RuntimeError(f"worker {index} exited with code {self.procs[index].returncode} while starting")
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker {index} did not start within {self.startup_timeout_s:g}s")
            time.sleep(0.05)

    def run(self, on_ready: Callable[[], None] | None = None) -> None:
        """Start every worker, run `on_ready()` once all answer, then watch them until Ctrl-C or SIGTERM."""
        if not port_free(self.host, self.port):
            raise SystemExit(f"error: port {self.port} on {self.host} is already in use by another program; "
                             "pass --port to pick another")

        def stop(signum: int, frame: Any) -> None:
            self.stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            for index in range(self.count):
                self.start(index)
            for index in range(self.count):
                try:
                    self.wait_ready(index)
                except RuntimeError as exc:
                    raise SystemExit(f"error: {exc} (its output is above)") from None
            print(f"{self.count} workers ready on {self.host}:{self.port} (pids "
                  f"{', '.join(str(p.pid) for p in self.procs.values())})", file=sys.stderr, flush=True)
            if on_ready is not None:
                on_ready()
            while not self.stopping:
                self.watch()
                time.sleep(0.1)
        finally:
            self.shutdown()

    def watch(self) -> None:
        for index in list(self.restarting):
            if (self.directory / f"ready-{index}.{self.generations[index]}").exists():
                self.restarting.discard(index)
                print(f"worker {index} ready again (pid {self.procs[index].pid}, generation "
                      f"{self.generations[index]})", file=sys.stderr, flush=True)
        for index, proc in list(self.procs.items()):
            code = proc.poll()
            if code is None or self.stopping:
                continue
            quick = time.monotonic() - self.started_at[index] < CRASH_WINDOW_S
            self.crashes[index] = self.crashes[index] + 1 if quick else 0
            if self.crashes[index] >= CRASH_LIMIT:
                print(f"error: worker {index} exited with code {code} {CRASH_LIMIT} times right after starting; "
                      "stopping (see its output above)", file=sys.stderr, flush=True)
                self.stopping = True
                return
            self.generations[index] += 1
            print(f"worker {index} (pid {proc.pid}) exited with code {code}: restarting it as generation "
                  f"{self.generations[index]}; the episodes and sessions it held are lost, every other worker's "
                  "go on", file=sys.stderr, flush=True)
            self.start(index)
            self.restarting.add(index)

    def shutdown(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for path in self.directory.iterdir():
            path.unlink(missing_ok=True)
        self.directory.rmdir()
