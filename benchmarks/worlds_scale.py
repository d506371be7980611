"""Serving many imported worlds: start-up time and RSS with 10, 100 and 1,000 small AWM worlds installed.

Each world is a copy of the pet-clinic scenario imported from tests/data/awm (4 tools, 3 tables, its
generated FastAPI server run in a contained worker). A fresh process starts the worlds the way `serve worlds`
and `up` do (`build_servers`: package import, runtime, MCP server; then the ASGI app with every world mounted)
and reports its wall time, its RSS and how many worker processes it started. Lazy (now): no seed runs at
start-up, a world's template is built on its first episode and its worker on its first tool call. Eager (before,
measured in the same run): each world loaded and its seeded template built in turn, as `build_servers` did.
The baseline of the RSS rows is the same process serving no world (interpreter, mcpworld and SQLAlchemy imported).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

from benchmarks.common import Row

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "awm"
COUNTS = (10, 100, 1000)

PROBE = r"""
import json, os, sys, time
began = time.perf_counter()
from mcpworld.worlds.episodes import EpisodeLimits
from mcpworld.worlds.host import build_servers, load_runtime, worlds_app
from mcpworld.worlds.server import WorldServer
imported = time.perf_counter()
root, mode = sys.argv[1], sys.argv[3]
paths = [os.path.join(root, name) for name in sorted(os.listdir(root))[: int(sys.argv[2])]]
if mode == "eager":  # what build_servers did before: each world loaded and seeded in turn
    servers = [WorldServer(load_runtime(path), EpisodeLimits()) for path in paths]
else:
    servers = build_servers(paths, EpisodeLimits())
worlds_app(servers)
runtimes = [s.runtime for s in servers]
loaded = time.perf_counter()
first_episode = first_call = call_p50 = job_p50 = None
if runtimes and mode == "call":
    t = time.perf_counter()
    episode = runtimes[0].fork()
    first_episode = time.perf_counter() - t
    t = time.perf_counter()
    result = runtimes[0].call(episode, "list_pets", {"owner_id": 1})
    assert result.error is None, result.error
    first_call = time.perf_counter() - t
    samples = []
    for i in range(20):
        t = time.perf_counter()
        assert runtimes[0].call(episode, "list_pets", {"owner_id": 1 + i % 2}).error is None
        samples.append(time.perf_counter() - t)
    from mcpworld.synth.sandbox.worker import Limits, shared_worker
    bare = shared_worker(Limits())
    trivial_job = {"source": "def f():\n    return 1", "name": "f", "args": {}}
    bare.run("mcpworld.synth.sandbox.jobs:call_function", trivial_job)
    trivial = []
    for _ in range(20):
        t = time.perf_counter()
        bare.run("mcpworld.synth.sandbox.jobs:call_function", trivial_job)
        trivial.append(time.perf_counter() - t)
    call_p50, job_p50 = sorted(samples)[10], sorted(trivial)[10]
def ppid(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[1]
    except OSError:
        return None
children = sum(1 for p in os.listdir("/proc") if p.isdigit() and ppid(p) == str(os.getpid()))
rss = int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) / 1024
print(json.dumps({"worlds": len(runtimes), "load_s": loaded - imported, "import_s": imported - began,
                  "seeded": sum(r.has_template(None) for r in runtimes),
                  "rss_mib": rss, "children": children, "first_episode_s": first_episode,
                  "first_call_s": first_call, "call_p50_s": call_p50, "job_p50_s": job_p50}))
"""


def _package(tmp: Path) -> Path:
    """The pet-clinic scenario, imported once (validated, without the audit: only its loading is measured)."""
    from mcpworld.synth.importers.awm import import_scenario, read_references
    from mcpworld.synth.importers.awm_format import read_dataset

    scenario = next(s for s in read_dataset(DATA) if s.key == "pet_clinic_1")
    refs = read_references(DATA / "references.jsonl")
    report = anyio.run(lambda: import_scenario(scenario, tmp / "source", references=refs, audit=False))
    if not report.ok:
        raise RuntimeError(f"the benchmark's world did not import: {report.problems}")
    return Path(report.path or "")


def _probe(root: Path, count: int, mode: str = "lazy") -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, str(root), str(count), mode],
                         capture_output=True, text=True, timeout=1800, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"probe failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_worlds_scale(quick: bool) -> list[Row]:
    counts = (10, 100) if quick else COUNTS
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        package = _package(Path(tmp))
        root = Path(tmp) / "worlds"
        root.mkdir()
        for i in range(max(counts)):
            dest = root / f"awm-clinic-{i:04d}"
            shutil.copytree(package, dest)
            manifest = json.loads((dest / "scenario.json").read_text())
            manifest["name"] = dest.name
            (dest / "scenario.json").write_text(json.dumps(manifest))
        base = _probe(root, 0)
        for n in counts:
            lazy, eager = _probe(root, n, "lazy"), _probe(root, n, "eager")
            lazy_ms, eager_ms = lazy["load_s"] * 1000, eager["load_s"] * 1000
            rows.append(Row(f"start-up, {n:,} AWM worlds served (lazy, {lazy['seeded']} seeded)", lazy_ms, "ms",
                            "eager: every template built (before)", eager_ms, "<= 25 ms per world, none seeded",
                            lazy_ms / n <= 25 and lazy["seeded"] == 0))
            small = n < 100  # the first world's imports (~9 MiB, shared by all) dominate: no per-world target
            rows.append(Row(f"RSS, {n:,} AWM worlds served (lazy, {lazy['children']} workers)", lazy["rss_mib"],
                            "MiB", "same process, no world", base["rss_mib"],
                            "no worker" if small else "<= 0.5 MiB per world, no worker",
                            lazy["children"] == 0 and (small or (lazy["rss_mib"] - base["rss_mib"]) / n <= 0.5)))
            rows.append(Row(f"  RSS, {n:,} worlds served, every template built (before)", eager["rss_mib"], "MiB",
                            "same process, no world", base["rss_mib"], "informational", True))
        called = _probe(root, 1, "call")
        rows.append(Row("first episode of a served world (builds its template)", called["first_episode_s"] * 1000,
                        "ms", "starting that world", called["load_s"] * 1000, "<= 1 s", called["first_episode_s"] <= 1))
        rows.append(Row("first tool call of a served world (starts its worker)", called["first_call_s"] * 1000, "ms",
                        "starting that world", called["load_s"] * 1000, "<= 10 s", called["first_call_s"] <= 10))
        rows.append(Row("AWM tool call p50 (forked worker, FastAPI request, row diff)", called["call_p50_s"] * 1000,
                        "ms", "a trivial job in a worker", called["job_p50_s"] * 1000, "<= 250 ms",
                        called["call_p50_s"] <= 0.25))
    return rows


if __name__ == "__main__":
    from benchmarks.common import print_table

    print_table(bench_worlds_scale("--quick" in sys.argv))
