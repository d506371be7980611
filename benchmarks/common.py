"""Timing helpers shared by the benchmarks: percentiles, a result row, a printed table."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass
class Row:
    """One measured figure, its baseline measured in the same run, and the target it must meet."""

    name: str
    value: float
    unit: str
    baseline_name: str
    baseline: float
    target: str
    ok: bool

    @property
    def ratio(self) -> float:
        return self.baseline / self.value if self.unit in ("ms", "us", "MiB") else self.value / self.baseline

    def as_dict(self) -> dict:
        return {**asdict(self), "ratio": self.ratio}


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def load_summary(latencies: list[float], seconds: float, errors: list[str]) -> dict:
    """What a load run reports: requests, rate, p50/p99 in ms, and how many failed (with the first reasons)."""
    ms = [x * 1000 for x in latencies]
    return {"requests": len(latencies), "seconds": seconds, "rate": len(latencies) / seconds if seconds else 0.0,
            "p50_ms": pct(ms, 0.5) if ms else 0.0, "p99_ms": pct(ms, 0.99) if ms else 0.0,
            "errors": len(errors), "first_errors": errors[:3]}


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def timed(fn: Callable[[], object], n: int) -> list[float]:
    """Seconds per call for n calls of fn."""
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def print_table(rows: list[Row]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("figure", "value", "baseline (same run)", "ratio", "target", "ok")
    for r in rows:
        table.add_row(r.name, f"{r.value:,.3f} {r.unit}", f"{r.baseline_name}: {r.baseline:,.3f} {r.unit}",
                      f"{r.ratio:,.2f}x", r.target, "[green]yes[/green]" if r.ok else "[red]NO[/red]")
    Console(width=160).print(table)


def burst_medians(target: dict) -> dict:
    """A target of paired bursts (`benchmarks.loadgen.in_turn`) with its figures: the median burst's rate and
    server CPU per request."""
    return {**target, "rate": statistics.median(b["rate"] for b in target["bursts"]),
            "cpu_us": statistics.median(b["cpu_us"] for b in target["bursts"])}


def cpu_s(pids: list[int]) -> float:
    """CPU seconds the processes have used so far, to the nanosecond: the scheduler's run time of each live
    thread (`/proc/PID/task/*/schedstat`), where `/proc/PID/stat` counts in 10 ms ticks (a 0.3 s burst of load
    would read to within 3%). A thread that exits takes its time with it; the servers measured here keep theirs."""
    total = 0.0
    for pid in pids:
        if not os.path.exists(f"/proc/{pid}/schedstat"):  # a kernel without schedstats: whole ticks
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            continue
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0]) / 1e9
            except FileNotFoundError:  # the thread exited since the listing
                pass
    return total
