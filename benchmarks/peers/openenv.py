"""The OpenEnv peer beside the mcpworld world server, same run, same episode shape, interleaved.

Runs in the project's venv; the peer's server (`openenv_airline`) and load generator (`openenv_load`) run under
the peer venv's interpreter, each in its own process. Ours: `mcpworld serve worlds --only airline` driven by
`benchmarks.loadgen` (start -> 10 x get_flight -> verify with close). Theirs: OpenEnv's WebSocket sessions driven
by its own `GenericEnvClient` (reset -> 10 x step get_flight -> step end). Both 12 messages an episode, both one
server process, both on uvloop + httptools.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.common import Row
from benchmarks.peers import ROOT, openenv_missing, openenv_python

TASK = "cancel-within-24h"  # the task benchmarks.loadgen's episodes start
MESSAGES = 12  # per episode, on both sides
CALLS = 10


def export_airline(path: Path, task: str = TASK) -> None:
    """Write the airline world's starting state for `task` (schema and rows) as JSON, for the peer to load.

    Only the world's own tables: mcpworld's change log (and its triggers) is our bookkeeping, not the world."""
    from mcpworld.worlds.host import load_runtime

    runtime = load_runtime("airline")
    conn = runtime.open_connection(runtime.template(runtime.tasks[task]).data)
    try:
        names = [(n, sql) for n, sql in conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE '\\_mcpworld%' ESCAPE '\\' ORDER BY rowid")]
        tables = {}
        for name, _ in names:
            cursor = conn.execute(f'SELECT * FROM "{name}"')
            tables[name] = {"columns": [d[0] for d in cursor.description], "rows": [list(r) for r in cursor]}
    finally:
        conn.close()
    path.write_text(json.dumps({"world": "airline", "task": task, "schema": [sql for _, sql in names],
                                "tables": tables}))


@contextlib.contextmanager
def peer_server(python: Path, data: Path) -> Iterator[dict[str, Any]]:
    """The OpenEnv server process under the peer venv; yields its base URL and pid."""
    from mcpworld.core.testing import free_port, stop, wait_http

    port = free_port()
    log = data.with_suffix(".log")  # a file, not a pipe: OpenEnv logs a traceback per client that closes first
    with log.open("w") as sink:
        proc = subprocess.Popen([str(python), "-m", "benchmarks.peers.openenv_airline", "--data", str(data),
                                 "--port", str(port)], cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
    try:
        try:
            wait_http(f"http://127.0.0.1:{port}/health", proc, timeout=120)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"the OpenEnv peer did not start: {exc}\n{log.read_text()[-2000:]}") from exc
        yield {"url": f"http://127.0.0.1:{port}", "pids": [proc.pid]}
    finally:
        stop(proc)


def peer_load(python: Path, s: dict[str, Any], concurrency: int, episodes: int) -> dict[str, Any]:
    """One run of the peer's load generator against server `s`, with the server's CPU per message."""
    from benchmarks.serving import FAILED, cpu_s

    before = cpu_s(s["pids"])
    done = subprocess.run([str(python), "-m", "benchmarks.peers.openenv_load", s["url"], "--concurrency",
                           str(concurrency), "--episodes", str(episodes)], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    if done.returncode != 0:
        print(f"  serving: OpenEnv at c={concurrency} failed: {done.stderr[-500:]}", file=sys.stderr)
        return {**FAILED, "errors": episodes}
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["cpu_us"] = (cpu_s(s["pids"]) - before) / max(1, out["requests"]) * 1e6
    if out["errors"]:
        print(f"  serving: OpenEnv at c={concurrency}: {out['errors']} failed episodes: {out['first_errors']}",
              file=sys.stderr)
    return out


def skipped(reason: str) -> list[Row]:
    print(f"  serving: {reason}", file=sys.stderr)
    return [Row(f"OpenEnv peer skipped: {reason}", 1.0, "calls/s", "skipped", 1.0, "optional", True)]


def openenv_rows(quick: bool) -> list[Row]:
    """Ours and OpenEnv at c = 1, 64, 256 (and 1,024 without --quick), interleaved, best of each kept."""
    python = openenv_python()
    if python is None:
        return skipped(openenv_missing())
    from benchmarks.serving import FAILED, server, try_load

    levels = [1, 64, 256] if quick else [1, 64, 256, 1024]
    rounds = 1 if quick else 2

    def episodes(c: int) -> int:  # as bench_serving's
        return max(c, 30 if quick else 150) if c > 1 else (15 if quick else 60)

    def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
        good = [r for r in runs if not r.get("failed")]
        return max(good, key=lambda r: r["rate"]) if good else FAILED

    print("  serving: OpenEnv peer beside the world server (interleaved) ...", file=sys.stderr)
    ours: dict[int, dict[str, Any]] = {}
    theirs: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        data = Path(tmp) / "airline.json"
        export_airline(data)
        world = stack.enter_context(server("world"))
        peer = stack.enter_context(peer_server(python, data))
        try_load(world, 64, episodes(64))  # warm-up, untimed: a fresh server answers its first ~1,000 calls
        peer_load(python, peer, 64, episodes(64))  # at up to half speed (caches, templates), either side
        for c in levels:
            mine, other = [], []
            for r in range(rounds):
                first_ours = r % 2 == 0
                if first_ours:
                    mine.append(try_load(world, c, episodes(c)))
                other.append(peer_load(python, peer, c, episodes(c)))
                if not first_ours:
                    mine.append(try_load(world, c, episodes(c)))
            ours[c], theirs[c] = best(mine), best(other)
    out = Path(__file__).resolve().parents[1] / "results" / "openenv.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"python": str(python), "ours": ours, "openenv": theirs}, indent=2, default=str))
    return rows_for(levels, ours, theirs, {c: episodes(c) for c in levels})


def rows_for(levels: list[int], ours: dict[int, dict[str, Any]], theirs: dict[int, dict[str, Any]],
             attempted: dict[int, int]) -> list[Row]:
    """The table rows: ours as the figure, OpenEnv as the same-run baseline, "ahead" as the target."""
    nan = float("nan")
    rows: list[Row] = []
    for c in levels:
        w, o = ours[c], theirs[c]
        reset, step = o.get("reset", {}), o.get("step", {})
        starts, calls = w["rate"] / MESSAGES, w["rate"] * CALLS / MESSAGES
        rows += [
            Row(f"vs OpenEnv c={c}: episode starts/s", starts, "episodes/s", "OpenEnv resets/s (WebSocket)",
                reset.get("rate", nan), ">= 1x (ahead)", starts >= reset.get("rate", nan)),
            Row(f"vs OpenEnv c={c}: tool calls/s", calls, "calls/s", "OpenEnv steps/s (WebSocket)",
                step.get("rate", nan), ">= 1x (ahead)", calls >= step.get("rate", nan)),
            Row(f"vs OpenEnv c={c}: p50, every message", w["p50_ms"], "ms", "OpenEnv p50", o["p50_ms"],
                "<= OpenEnv's", w["p50_ms"] <= o["p50_ms"]),
            Row(f"vs OpenEnv c={c}: p99, every message", w["p99_ms"], "ms", "OpenEnv p99", o["p99_ms"],
                "<= OpenEnv's", w["p99_ms"] <= o["p99_ms"]),
            Row(f"vs OpenEnv c={c}: server CPU per message", w["cpu_us"], "us", "OpenEnv server CPU per message",
                o["cpu_us"], "<= OpenEnv's", w["cpu_us"] <= o["cpu_us"]),
            Row(f"OpenEnv c={c}: failed episodes", float(o.get("errors", nan)), "episodes", "episodes played",
                float(attempted[c]), "0", o.get("errors") == 0),
        ]
    return rows
