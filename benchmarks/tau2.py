"""τ²-bench worlds: what a call and a verdict cost on the imported domains, beside a catalog world's call.

Needs τ²'s data (`../shared/thirdparty/tau2-bench/data/tau2`, or `MCPWORLD_TAU2_DATA`); without it the section
says so and measures nothing. A τ² call loads its records, runs τ²'s logic on models and writes back what
changed (telecom: both sides, then τ²'s sync), so it costs more than a catalog world's indexed row access.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Row, p50, timed
from mcpworld.worlds.host import load_runtime
from mcpworld.worlds.runtime import WorldRuntime

DATA = Path(os.environ.get("MCPWORLD_TAU2_DATA") or Path(__file__).resolve().parents[2] / "shared" / "thirdparty"
            / "tau2-bench" / "data" / "tau2")


def bench_tau2(quick: bool) -> list[Row]:
    from mcpworld.synth.importers.tau2.package import load_package, write_package

    if not (DATA / "domains" / "telecom" / "db.toml").is_file():
        print(f"tau2: no τ² data at {DATA} (set MCPWORLD_TAU2_DATA): nothing measured", file=sys.stderr)
        return []
    n = 100 if quick else 1000
    catalog = load_runtime("airline")
    step = next(s for task in catalog.world.tasks for s in task.solution if not catalog.tools[s.name].meta.writes)
    episode = catalog.fork()
    assert catalog.call(episode, step.name, step.arguments).error is None
    catalog_call = p50(timed(lambda: catalog.call(episode, step.name, step.arguments), n))
    episode.close()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        package = write_package(DATA, "telecom", Path(tmp) / "tau2-telecom")
        written = time.perf_counter() - began
        runtime = WorldRuntime(load_package(package))
        task = runtime.world.tasks[0]
        rows.append(Row("telecom import: package written, every task's gold played", written * 1000, "ms",
                        "per task", written * 1000 / len(runtime.world.tasks), "informational", True))
        episode = runtime.fork(task.id)
        user = p50(timed(lambda: runtime.call(episode, "check_status_bar", {}, "user"), n)) * 1000
        agent = p50(timed(lambda: runtime.call(episode, "get_customer_by_id", {"customer_id": "C1001"}), n)) * 1000
        episode.close()
        verdicts = []
        for _ in range(20 if quick else 100):
            episode = runtime.fork(task.id)
            for gold in task.solution:
                runtime.call(episode, gold.name, gold.arguments, gold.role)
            began = time.perf_counter()
            runtime.verify(episode, None)
            verdicts.append(time.perf_counter() - began)
            episode.close()
    catalog_ms = catalog_call * 1000
    rows += [
        Row("telecom user call p50 (check_status_bar)", user, "ms", f"catalog airline {step.name} p50",
            catalog_ms, "informational", True),
        Row("telecom agent call p50 (get_customer_by_id)", agent, "ms", f"catalog airline {step.name} p50",
            catalog_ms, "informational", True),
        Row("telecom verdict p50 (strict + τ²'s ENV_ASSERTION)", p50(verdicts) * 1000, "ms",
            "telecom agent call p50", agent, "informational", True),
    ]
    return rows
