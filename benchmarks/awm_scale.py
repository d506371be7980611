"""1,000 AWM worlds on one machine: a generated AWM-format corpus of 1,000 scenarios, imported without references
(their tasks provisional: what a user of AgentWorldModel-1K has), installed and served by one process.

The corpus: 1,000 scenarios in AWM's published layout (the seven gen_*.jsonl files), each the pet-clinic scenario
of tests/data/awm under its own name and with its own rows (owner names and e-mails carry the scenario's number).
A sample of it is imported for real (`import_scenario`, audit on, no references), `--parallel` as the CPUs allow,
which gives the import time per scenario; the other packages are copies of those imports under their own names
(same code, same size), so that 1,000 are installed without importing 1,000 on a small machine.

A fresh process then serves all 1,000 the way `mcpworld up` does (`build_servers`, `worlds_app`) with the worker
pool bounded (`MCPWORLD_WORKER_POOL`, default 32), and measures: start-up; a first tool call on cold worlds (their
zygote starts); 100 worlds in use (an episode and a call each); the RSS of the process and every worker it
started, also with 100 episodes open at once (each holds a worker session until the pool's bound ends the least
recent); a warm tool call beside a catalog world's (`airline`, in the same process), both in-process
(runtime.call) and over MCP (an in-memory client of each world's `WorldServer`: the served path, which the target
is judged on); and episodes per second (fork, two calls, AWM's verifier) across the pool's worlds and all 100.

    python -m benchmarks.awm_scale [--quick]        # or: python -m benchmarks.run --only awm --quick
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio

from benchmarks.common import Row

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "awm"
SCENARIOS = 1000
IN_USE = 100

PROBE = r"""
import json, os, sys, time, random, statistics
from concurrent.futures import ThreadPoolExecutor
import anyio
from mcp import Client
began = time.perf_counter()
from mcpworld.worlds.episodes import EpisodeLimits
from mcpworld.worlds.host import build_servers, load_runtime, worlds_app
from mcpworld.synth.sandbox.worker import POOL
from mcpworld.worlds.server import WorldServer
imported = time.perf_counter()
root, in_use, episodes, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
paths = [os.path.join(root, n) for n in sorted(os.listdir(root))]
servers = build_servers(paths, EpisodeLimits())
worlds_app(servers)
runtimes = [s.runtime for s in servers]
started = time.perf_counter()

def tree_rss():
    me = os.getpid()
    kids = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                kids.setdefault(int(open(f"/proc/{p}/stat").read().rpartition(")")[2].split()[1]), []).append(int(p))
            except (OSError, ValueError, IndexError):
                pass
    todo, seen = [me], []
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo += kids.get(pid, [])
    rss = pss = 0.0
    for pid in seen:
        try:
            rss += int(next(l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")).split()[1]) / 1024
            pss += int(next(l for l in open(f"/proc/{pid}/smaps_rollup") if l.startswith("Pss:")).split()[1]) / 1024
        except (OSError, StopIteration):
            pass
    return rss, pss, len(seen) - 1

rss_up, pss_up, _ = tree_rss()

def first_call(rt):
    ep = rt.fork("task-0")
    t = time.perf_counter()
    r = rt.call(ep, "list_pets", {"owner_id": 1})
    took = time.perf_counter() - t
    ep.close()
    assert r.error is None, r.error
    return took

cold = [first_call(runtimes[i]) for i in range(8)]  # one after the other: nothing else running
with ThreadPoolExecutor(threads) as pool:  # the rest of the worlds in use, as many at once as the CPUs
    list(pool.map(first_call, runtimes[8:in_use]))
rss_use, pss_use, children = tree_rss()
open_eps = [(rt, rt.fork("task-0")) for rt in runtimes[:in_use]]  # 100 episodes open at once, a call each
for rt, ep in open_eps:
    assert rt.call(ep, "list_pets", {"owner_id": 1}).error is None
rss_open, pss_open, open_children = tree_rss()
for rt, ep in open_eps:
    ep.close()
warm_rt = runtimes[in_use - 1]
ep = warm_rt.fork("task-0")
warm = []
for i in range(100):
    t = time.perf_counter()
    assert warm_rt.call(ep, "list_pets", {"owner_id": 1 + i % 2}).error is None
    warm.append(time.perf_counter() - t)
ep.close()
catalog = load_runtime("airline")
step = next(s for task in catalog.world.tasks for s in task.solution if not catalog.tools[s.name].meta.writes)
ep = catalog.fork()
catalog.call(ep, step.name, step.arguments)
cat = []
for i in range(200):
    t = time.perf_counter()
    assert catalog.call(ep, step.name, step.arguments).error is None
    cat.append(time.perf_counter() - t)
ep.close()

async def over_mcp(rt, tool, arguments, n):
    async with Client(WorldServer(rt).server, mode="legacy") as client:
        out = []
        for i in range(n + 10):
            t = time.perf_counter()
            result = await client.call_tool(tool, arguments)
            out.append(time.perf_counter() - t)
            assert not result.is_error, result
    return statistics.median(out[10:])

mcp_awm, mcp_cat = [], []
for _ in range(5):  # interleaved, so both meet the machine in the same state
    mcp_awm.append(anyio.run(over_mcp, warm_rt, "list_pets", {"owner_id": 1}, 40))
    mcp_cat.append(anyio.run(over_mcp, catalog, step.name, step.arguments, 40))

def episode(rt):
    ep = rt.fork("task-0")
    try:
        assert rt.call(ep, "list_pets", {"owner_id": 1}).error is None
        assert rt.call(ep, "create_appointment", {"pet_id": 1, "date": "2026-06-10"}).error is None
        return rt.verify(ep, "Booked.").passed
    finally:
        ep.close()

def rate(worlds, count):
    jobs = [worlds[i % len(worlds)] for i in range(count)]
    t = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        passed = list(pool.map(episode, jobs))
    return len(jobs) / (time.perf_counter() - t), sum(passed)

pool_worlds = runtimes[in_use - POOL.size:in_use]
evictions = POOL.evictions
warm_rate, warm_passed = rate(pool_worlds, episodes)
churn_rate, churn_passed = rate(runtimes[:in_use], in_use)  # one episode per world in use: most start a zygote
print(json.dumps({"worlds": len(runtimes), "import_s": imported - began, "up_s": started - imported,
    "rss_up": rss_up, "pss_up": pss_up, "rss_use": rss_use, "pss_use": pss_use, "children": children,
    "rss_open": rss_open, "pss_open": pss_open, "open_children": open_children,
    "mcp_awm_p50": statistics.median(mcp_awm), "mcp_catalog_p50": statistics.median(mcp_cat),
    "pool": POOL.size, "cold": cold, "warm_p50": statistics.median(warm), "catalog_p50": statistics.median(cat),
    "catalog_tool": step.name, "warm_rate": warm_rate, "churn_rate": churn_rate, "episodes": episodes,
    "passed": [warm_passed, churn_passed], "evictions": evictions}))
"""


def corpus(dest: Path, n: int = SCENARIOS) -> Path:
    """n scenarios in AWM's layout, each the pet clinic under its own name with its own rows."""
    records = {f: [json.loads(line) for line in (DATA / f).read_text().splitlines() if line.strip()]
               for f in ("gen_scenario.jsonl", "gen_tasks.jsonl", "gen_db.jsonl", "gen_sample.jsonl",
                         "gen_envs.jsonl", "gen_verifier.jsonl", "gen_verifier.pure_code.jsonl")}
    dest.mkdir(parents=True, exist_ok=True)
    for file, rows in records.items():
        own = [r for r in rows if (r.get("scenario") or r.get("name")) == "Pet Clinic 1"]
        with (dest / file).open("w") as f:
            for i in range(n):
                for r in own:
                    text = json.dumps(r).replace("Pet Clinic 1", f"Pet Clinic {i:04d}")
                    text = text.replace("Ana Ortiz", f"Ana Ortiz {i}").replace("ana@example", f"ana{i}@example")
                    f.write(text + "\n")
    return dest


def _import(data: Path, out: Path, count: int, parallel: int) -> tuple[float, list]:
    from mcpworld.synth.importers.awm import import_scenario
    from mcpworld.synth.importers.awm_format import read_dataset

    scenarios = read_dataset(data)[:count]
    began = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        reports = list(pool.map(lambda s: anyio.run(lambda: import_scenario(s, out)), scenarios))
    return time.perf_counter() - began, reports


def _probe(root: Path, in_use: int, episodes: int, threads: int, pool: int | None) -> dict:
    env = {**os.environ, **({"MCPWORLD_WORKER_POOL": str(pool)} if pool else {})}
    out = subprocess.run([sys.executable, "-c", PROBE, str(root), str(in_use), str(episodes), str(threads)],
                         capture_output=True, text=True, timeout=3600, cwd=ROOT, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"probe failed: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_awm_scale(quick: bool, pool: int | None = None) -> list[Row]:
    cpus = os.cpu_count() or 2
    sample = cpus if quick else max(32, 2 * cpus)
    episodes = 200 if quick else 1000
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = corpus(Path(tmp) / "corpus")
        root = Path(tmp) / "worlds"
        seconds, reports = _import(data, root, sample, cpus)
        ok = [r for r in reports if r.ok]
        if not ok:
            raise RuntimeError(f"no scenario of the corpus imported: {reports[0].problems}")
        per = seconds * min(cpus, sample) / len(reports)
        rows.append(Row(f"import, per scenario ({len(reports)} imported, {cpus} at once; audit on, no references)",
                        per * 1000, "ms", "the same, wall time per scenario", seconds / len(reports) * 1000,
                        "informational", True))
        provisional = sum(len(r.provisional) for r in ok)
        rows.append(Row("  tasks kept provisional per scenario (no references given)", provisional / len(ok), "tasks",
                        "tasks per scenario", float(ok[0].tasks_total), "> 0 (usable without a model)",
                        provisional > 0))
        for i in range(SCENARIOS - len(ok)):  # the rest installed as copies of real imports, under their own names
            src = Path(ok[i % len(ok)].path or "")
            dest = root / f"awm-pet-clinic-c{i:04d}"
            shutil.copytree(src, dest)
            manifest = json.loads((dest / "scenario.json").read_text())
            manifest["name"] = dest.name
            (dest / "scenario.json").write_text(json.dumps(manifest))
        got = _probe(root, IN_USE, episodes, cpus, pool)
    n, gib = got["worlds"], 1024.0
    rows.append(Row(f"`up` start-up, {n:,} AWM worlds installed", got["up_s"] * 1000, "ms",
                    "per world", got["up_s"] * 1000 / n, "informational", True))
    rows.append(Row(f"RSS, {n:,} installed, none in use (process tree)", got["rss_up"], "MiB", "PSS", got["pss_up"],
                    "<= 8 GiB", got["rss_up"] <= 8 * gib))
    rows.append(Row(f"RSS, {n:,} installed, {IN_USE} in use (pool {got['pool']}: {got['children']} processes)",
                    got["rss_use"], "MiB", "PSS", got["pss_use"], "<= 8 GiB", got["rss_use"] <= 8 * gib))
    rows.append(Row(f"RSS, {n:,} installed, {IN_USE} episodes open at once (sessions bound {got['pool']}: "
                    f"{got['open_children']} processes)", got["rss_open"], "MiB", "PSS", got["pss_open"], "<= 8 GiB",
                    got["rss_open"] <= 8 * gib))
    cold = sorted(got["cold"])
    rows.append(Row("first tool call of a cold world (zygote start), p50 of 8", cold[len(cold) // 2] * 1000, "ms",
                    "worst of 8", cold[-1] * 1000, "<= 2 s", cold[len(cold) // 2] <= 2.0))
    rows.append(Row("warm AWM tool call p50 (in-process: runtime.call)", got["warm_p50"] * 1000, "ms",
                    f"catalog world airline {got['catalog_tool']} p50", got["catalog_p50"] * 1000,
                    "informational (the target is judged over MCP)", True))
    rows.append(Row("warm AWM tool call p50 over MCP (in-memory client, WorldServer)", got["mcp_awm_p50"] * 1000,
                    "ms", f"catalog world airline {got['catalog_tool']} over MCP p50", got["mcp_catalog_p50"] * 1000,
                    "<= 1.5x the catalog's", got["mcp_awm_p50"] <= 1.5 * got["mcp_catalog_p50"]))
    rows.append(Row(f"episodes/s across the pool's {got['pool']} worlds ({got['passed'][0]}/{got['episodes']} passed)",
                    got["warm_rate"], "eps/s", f"{IN_USE} episodes across {IN_USE} worlds (LRU churn)",
                    got["churn_rate"],
                    "informational", got["passed"][0] == got["episodes"]))
    return rows


if __name__ == "__main__":
    from benchmarks.common import print_table

    print_table(bench_awm_scale("--quick" in sys.argv))
