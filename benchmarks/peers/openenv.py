"""The OpenEnv peer beside the mcpworld world server, same run, same episode shape, interleaved.

Runs in the project's venv; the peer's servers (`openenv_airline`) and load generator (`openenv_load`) run under
the peer venv's interpreter, each in its own process. Ours: `mcpworld serve worlds --only airline` driven by
`benchmarks.loadgen` (start -> 10 x get_flight -> verify with close). Theirs: OpenEnv's WebSocket sessions driven
by its own `GenericEnvClient` (reset -> 10 x step get_flight -> step end), in two variants, both up at once:
`runtime` runs our own WorldRuntime per step (fork / call / verify: the serving stacks on equal environment
code), `raw` one sqlite3 query per step (what the ORM read costs). All 12 messages an episode, one server process
each, all on uvloop + httptools.
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

from benchmarks.common import Row, burst_medians
from benchmarks.peers import OPENENV_SETUP, ROOT, has_runtime, openenv_missing, openenv_python
from benchmarks.servers import FAILED, server

TASK = "cancel-within-24h"  # the task benchmarks.loadgen's episodes start
MESSAGES = 12  # per episode, on both sides
CALLS = 10
VARIANTS = {  # the peer's environment code -> its label in the rows
    "runtime": "OpenEnv (same runtime)",
    "raw": "OpenEnv (raw sqlite)",
}


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
def peer_server(python: Path, env: str, data: Path) -> Iterator[dict[str, Any]]:
    """One OpenEnv server process (`env`: runtime or raw) under the peer venv; yields its base URL and pid."""
    from mcpworld.core.testing import free_port, stop, wait_http

    port = free_port()
    log = data.parent / f"openenv-{env}.log"  # a file, not a pipe: OpenEnv logs a traceback per client that closes
    args = ["--env", env, "--port", str(port)] + (["--data", str(data)] if env == "raw" else [])
    with log.open("w") as sink:
        proc = subprocess.Popen([str(python), "-m", "benchmarks.peers.openenv_airline", *args], cwd=ROOT,
                                stdout=sink, stderr=subprocess.STDOUT)
    try:
        try:
            wait_http(f"http://127.0.0.1:{port}/health", proc, timeout=120)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"the OpenEnv peer ({env}) did not start: {exc}\n{log.read_text()[-2000:]}") from exc
        yield {"url": f"http://127.0.0.1:{port}", "pids": [proc.pid]}
    finally:
        stop(proc)


def skipped(reason: str, what: str = "OpenEnv peer") -> list[Row]:
    print(f"  serving: {what} skipped: {reason}", file=sys.stderr)
    return [Row(f"{what} skipped: {reason}", 1.0, "calls/s", "skipped", 1.0, "optional", True)]


def paired_peers(python: Path, targets: list[tuple[str, dict[str, Any]]], concurrency: int, episodes: int,
                 pairs: int) -> list[dict[str, Any]]:
    """One load generator (under the peer venv: `openenv_load --pairs`) loading every target in turn, `pairs`
    bursts of `episodes` each: per target its median burst rate and CPU per message, p50/p99 over all bursts.
    A generator that fails gives every target NaN figures (the reason printed): the run goes on."""
    cmd = [str(python), "-m", "benchmarks.peers.openenv_load", "--concurrency", str(concurrency), "--episodes",
           str(episodes), "--pairs", str(pairs)]
    for kind, s in targets:
        cmd += ["--target", kind, s["url"], ",".join(map(str, s["pids"]))]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        print(f"  serving: the paired OpenEnv run at c={concurrency} failed: {done.stderr[-500:]}", file=sys.stderr)
        return [{**FAILED, "errors": episodes * pairs} for _ in targets]
    out = []
    for t in json.loads(done.stdout.strip().splitlines()[-1])["targets"]:
        if t["errors"]:
            print(f"  serving: {t['url']} at c={concurrency}: {t['errors']} failed episodes: {t['first_errors']}",
                  file=sys.stderr)
        out.append(burst_medians(t))
    return out


def openenv_rows(quick: bool) -> list[Row]:
    """Ours and both OpenEnv variants at c = 1, 64, 256 (and 1,024 without --quick), in paired bursts from one
    load generator (`paired_peers`), medians of each."""
    python = openenv_python()
    if python is None:
        return skipped(openenv_missing())
    levels = [1, 64, 256] if quick else [1, 64, 256, 1024]
    pairs = 3 if quick else 7
    notes: list[Row] = []
    variants = list(VARIANTS)
    if not has_runtime(python):  # a peer venv from before mcpworld went in: the raw variant still runs
        variants.remove("runtime")
        notes = skipped(f"{python} cannot load mcpworld's runtime; run `{OPENENV_SETUP}` (idempotent: adds it)",
                        VARIANTS["runtime"])

    def episodes(c: int) -> int:  # per burst, as bench_serving's
        return max(c, 30 if quick else 150) if c > 1 else (15 if quick else 60)

    print(f"  serving: OpenEnv peer ({', '.join(variants)}) beside the world server (paired bursts) ...",
          file=sys.stderr)
    ours: dict[int, dict[str, Any]] = {}
    theirs: dict[str, dict[int, dict[str, Any]]] = {v: {} for v in variants}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        data = Path(tmp) / "airline.json"
        export_airline(data)
        world = stack.enter_context(server("world"))
        bare = stack.enter_context(server("bare"))  # at c=1 only: what any HTTP request per message costs
        peers = {v: stack.enter_context(peer_server(python, v, data)) for v in variants}
        sides = [("mcp", world), *[("openenv", peers[v]) for v in variants]]
        # warm-up, untimed: a fresh server answers its first ~1,000 calls at up to half speed
        paired_peers(python, [*sides, ("mcp", bare)], 64, 100, 1)
        floor: dict[str, Any] = {}
        for c in levels:
            measured = paired_peers(python, sides + ([("mcp", bare)] if c == 1 else []), c, episodes(c), pairs)
            ours[c] = measured[0]
            for v, figures in zip(variants, measured[1:]):
                theirs[v][c] = figures
            if c == 1:
                floor = measured[-1]
    attempted = {c: episodes(c) * pairs for c in levels}
    out = Path(__file__).resolve().parents[1] / "results" / "openenv.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"python": str(python), "ours": ours, "openenv": theirs, "episodes": attempted,
                               "bare_http_c1": floor}, indent=2, default=str))
    print(side_by_side(levels, ours, theirs, attempted), file=sys.stderr)
    return notes + rows_for(levels, ours, theirs, attempted) + floor_rows(floor, ours[1], theirs)


def floor_rows(floor: dict[str, Any], ours: dict[str, Any], theirs: dict[str, dict[int, dict[str, Any]]]) -> list[Row]:
    """At c=1 a message's round trip is the whole cost: the bare JSON-RPC handler on the same uvicorn (no MCP,
    the same world runtime) is the fastest any HTTP-request-per-message transport here can be, set beside
    OpenEnv's WebSocket frames; and ours as a share of that floor."""
    rows = [Row("bare JSON-RPC over HTTP c=1 (any HTTP transport's floor): messages/s", floor["rate"],
                "messages/s", f"{VARIANTS[v]} messages/s", o[1]["rate"], "reported (HTTP request vs WebSocket frame)",
                True) for v, o in theirs.items()]
    rows.append(Row("ours c=1: messages/s", ours["rate"], "messages/s", "bare JSON-RPC over HTTP c=1", floor["rate"],
                    "reported", True))
    return rows


def failures(run: dict[str, Any], attempted: int) -> float:
    """Failed episodes of one run (all of them when the run itself failed)."""
    return float(attempted if run.get("failed") and run.get("errors") is None else run.get("errors", 0))


def rows_for(levels: list[int], ours: dict[int, dict[str, Any]], theirs: dict[str, dict[int, dict[str, Any]]],
             attempted: dict[int, int]) -> list[Row]:
    """The table rows, per concurrency and per peer variant: ours as the figure, that OpenEnv variant as the
    same-run baseline, "ahead" as the target; then each side's failed episodes (target 0)."""
    rows: list[Row] = []
    for c in levels:
        w = ours[c]
        for v, runs in theirs.items():
            o, label = runs[c], VARIANTS[v]
            rows += [
                Row(f"vs {label} c={c}: messages/s", w["rate"], "messages/s", f"{label} messages/s", o["rate"],
                    ">= 1x (ahead)", w["rate"] >= o["rate"]),
                Row(f"vs {label} c={c}: p50, every message", w["p50_ms"], "ms", f"{label} p50", o["p50_ms"],
                    "<= its", w["p50_ms"] <= o["p50_ms"]),
                Row(f"vs {label} c={c}: p99, every message", w["p99_ms"], "ms", f"{label} p99", o["p99_ms"],
                    "<= its", w["p99_ms"] <= o["p99_ms"]),
                Row(f"vs {label} c={c}: server CPU per message", w["cpu_us"], "us", f"{label} CPU per message",
                    o["cpu_us"], "<= its", w["cpu_us"] <= o["cpu_us"]),
                Row(f"{label} c={c}: failed episodes", failures(o, attempted[c]), "episodes", "episodes played",
                    float(attempted[c]), "0", failures(o, attempted[c]) == 0),
            ]
        rows.append(Row(f"ours c={c}: failed episodes", failures(w, attempted[c]), "episodes", "episodes played",
                        float(attempted[c]), "0", failures(w, attempted[c]) == 0))
    return rows


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def side_by_side(levels: list[int], ours: dict[int, dict[str, Any]], theirs: dict[str, dict[int, dict[str, Any]]],
                 attempted: dict[int, int]) -> str:
    """The comparison as one Markdown table (what docs/benchmarks.md shows): ours beside each OpenEnv variant."""
    names = [VARIANTS[v] for v in theirs]
    head = ["c", "ours messages/s", *[f"{n} messages/s" for n in names], "ours p50 / p99 ms",
            *[f"{n} p50 / p99 ms" for n in names], "server CPU/message: ours, " + ", ".join(names),
            "failed episodes: ours, " + ", ".join(names),
            *[f"ours ÷ {n}: messages/s, CPU/message (> 1 = ours ahead)" for n in names]]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for c in levels:
        sides = [ours[c], *[theirs[v][c] for v in theirs]]
        cells = [f"{c:,}", *[f"{s['rate']:,.0f}" for s in sides], *[f"{s['p50_ms']:,.1f} / {s['p99_ms']:,.0f}"
                                                                    for s in sides],
                 ", ".join(f"{s['cpu_us']:,.0f} µs" for s in sides),
                 ", ".join(f"{failures(s, attempted[c]):.0f}" for s in sides) + f" of {attempted[c]:,}"]
        w = ours[c]
        cells += [f"{ratio(w['rate'], o['rate']):.2f}×, {ratio(o['cpu_us'], w['cpu_us']):.2f}×" for o in sides[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
