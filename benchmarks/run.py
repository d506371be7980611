"""Run the benchmarks: `python -m benchmarks.run [--quick] [--only fork,calls,rss,verify,registry,agent,swe,...]`.

Sections: fork, calls, rss, verify, registry, agent, swe, serving, scale (many imported worlds), awm (1,000 AWM
worlds on one machine: import, start-up, memory, cold and warm calls, episodes/s), tau2 (τ²-bench telecom: import,
calls on both sides, verdicts; needs τ²'s data).
Optional, only with --only: cluster (`up --ray` with 1, 2 and 4 actors on a local multi-node Ray cluster).

Prints a table (every figure beside a baseline measured in the same run) and writes benchmarks/results/latest.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from pathlib import Path

from benchmarks.common import Row, print_table

SECTIONS = ["fork", "calls", "rss", "verify", "registry", "agent", "swe", "serving", "scale", "awm", "tau2"]
OPTIONAL = ["cluster"]  # only when named in --only: `up --ray` on a local Ray cluster (needs the ray extra)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples (for a smoke run)")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    args = parser.parse_args(argv)
    wanted = [s for s in args.only.split(",") if s]
    unknown = set(wanted) - set(SECTIONS) - set(OPTIONAL)
    if unknown:
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}; choose from "
                     f"{', '.join(SECTIONS + OPTIONAL)}")
    from benchmarks import worlds

    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for section in wanted:
            print(f"running {section} ...", file=sys.stderr)
            if section == "fork":
                rows += worlds.bench_fork(args.quick)
            elif section == "calls":
                rows += worlds.bench_calls(args.quick, tmp)
            elif section == "rss":
                rows += worlds.bench_rss(args.quick)
            elif section == "verify":
                rows += worlds.bench_verify(args.quick)
            elif section == "registry":
                from benchmarks import registry

                rows += registry.bench_registry(args.quick, tmp)
            elif section == "agent":
                from benchmarks import agent

                rows += agent.bench_agent(args.quick)
            elif section == "swe":
                from benchmarks import swe

                rows += swe.bench_swe(args.quick)
            elif section == "serving":
                from benchmarks import in_process, serving

                rows += in_process.bench_in_process(args.quick) + serving.bench_serving(args.quick)
            elif section == "scale":
                from benchmarks import worlds_scale

                rows += worlds_scale.bench_worlds_scale(args.quick)
            elif section == "cluster":
                from benchmarks import cluster

                rows += cluster.bench_cluster(args.quick)
            elif section == "awm":
                from benchmarks import awm_scale

                rows += awm_scale.bench_awm_scale(args.quick)
            elif section == "tau2":
                from benchmarks import tau2

                rows += tau2.bench_tau2(args.quick)
    print_table(rows)
    out = Path(__file__).parent / "results" / "latest.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "python": platform.python_version(),
                               "rows": [r.as_dict() for r in rows]}, indent=2))
    print(f"wrote {out}", file=sys.stderr)
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
