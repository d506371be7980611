"""A local multi-node Ray cluster on one machine: a head raylet and worker raylets, each its own node with its own
CPUs, as `ray start` makes them on real hosts. For the tests and benchmarks of `up --ray` (CPU only).

Each raylet runs `ray start --block` in a session of its own, so stopping the cluster ends exactly the processes it
started (each raylet's whole process tree), never another Ray on the machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _descendants(pid: int) -> list[int]:
    tree, out, todo = _children(), [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo += tree.get(current, [])
    return out


class LocalRayCluster:
    """`nodes` raylets on this machine (the first is the head), `cpus` CPUs each. Use as a context manager."""

    def __init__(self, nodes: int = 3, cpus: float = 1, startup_timeout_s: float = 60.0):
        self.nodes, self.cpus, self.timeout = nodes, cpus, startup_timeout_s
        self.procs: list[subprocess.Popen[bytes]] = []
        self.temp = Path(tempfile.mkdtemp(prefix="mcpw-ray-"))  # short: Ray's socket paths must fit 107 bytes
        self.address = ""
        self.pids: set[int] = set()
        self.lost: set[int] = set()  # indices of nodes killed on purpose (`kill_node`)

    def _ray(self) -> str:
        exe = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
        if exe is None:
            raise RuntimeError("the `ray` command is not installed (pip install 'mcpworld[ray]')")
        return exe

    def env(self) -> dict[str, str]:
        # a node that is killed is known dead within ~5 s (the defaults wait ~30 s), so its actors restart soon
        return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_DEDUP_LOGS": "0",
                "RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "10"}

    def start(self) -> LocalRayCluster:
        ray = self._ray()
        port = _free_port()
        self.address = f"127.0.0.1:{port}"
        common = ["--num-cpus", str(self.cpus), "--block", "--disable-usage-stats"]
        log = open(self.temp / "head.log", "wb")
        self.procs.append(subprocess.Popen(
            [ray, "start", "--head", "--port", str(port), "--temp-dir", str(self.temp / "t"),
             "--include-dashboard", "false", *common],
            env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        self.wait_nodes(1)
        for _ in range(1, self.nodes):
            self.add_node()
        return self

    def add_node(self, tries: int = 3) -> subprocess.Popen[bytes]:
        """One more worker raylet (a node) joining the cluster; one that fails to start (a loaded machine: its
        raylet did not register in time) is started again, up to `tries` times."""
        for attempt in range(tries):
            log = open(self.temp / f"node{len(self.procs)}-{attempt}.log", "wb")
            proc = subprocess.Popen([self._ray(), "start", "--address", self.address, "--num-cpus", str(self.cpus),
                                     "--block", "--disable-usage-stats"],
                                    env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            self.procs.append(proc)
            try:
                self.wait_nodes(len(self.procs) - len(self.lost))
                return proc
            except RuntimeError:
                if attempt == tries - 1:
                    raise
                self.procs.remove(proc)
                self._kill(proc, signal.SIGKILL)
                proc.wait()
        raise AssertionError("unreachable")

    def alive_nodes(self) -> int:
        """How many nodes the cluster's control store lists as alive (asked from a fresh process)."""
        script = ("import ray, sys\nray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False)\n"
                  "print(sum(1 for n in ray.nodes() if n['Alive']))\n")
        out = subprocess.run([sys.executable, "-c", script, self.address], capture_output=True, text=True,
                             env=self.env(), timeout=60)
        try:
            return int(out.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return 0

    def wait_nodes(self, count: int) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for i, proc in enumerate(self.procs):
                if i not in self.lost and proc.poll() is not None:
                    raise RuntimeError(f"a raylet exited with {proc.returncode}: {self.logs()[-2000:]}")
            if self._raylets() >= count and (count == 1 or self.alive_nodes() >= count):
                return
            time.sleep(0.3)
        raise RuntimeError(f"the local Ray cluster did not reach {count} nodes in {self.timeout:g}s: "
                           f"{self.logs()[-2000:]}")

    def _raylets(self) -> int:
        """Raylet processes started by this cluster (each node runs one)."""
        count = 0
        for i, proc in enumerate(self.procs):
            if i in self.lost:
                continue
            for pid in _descendants(proc.pid):
                try:
                    if (Path("/proc") / str(pid) / "comm").read_text().strip() == "raylet":
                        count += 1
                except OSError:
                    pass
        return count

    def node_ids(self) -> list[str | None]:
        """Each node's Ray node id (hex), in the order the nodes were started; None for a node that is gone."""
        out: list[str | None] = []
        for proc in self.procs:
            found = None
            for pid in _descendants(proc.pid):
                try:
                    args = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                for arg in args:
                    if arg.startswith(b"--node_id="):
                        found = arg.split(b"=", 1)[1].decode()
            out.append(found if proc.poll() is None else None)
        return out

    def logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.temp.glob("*.log")))

    def kill_node(self, index: int) -> None:
        """Kill node `index` (not the head) at once, every process of it: a machine lost."""
        self.lost.add(index)
        self._kill(self.procs[index], signal.SIGKILL)

    def _kill(self, proc: subprocess.Popen[Any], sig: int) -> None:
        for pid in reversed(_descendants(proc.pid)):
            self.pids.add(pid)
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        """Stop every process this cluster started (each raylet's whole tree, found before any of them exits),
        then remove its files."""
        tree = [pid for proc in self.procs for pid in _descendants(proc.pid)]
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)  # `ray start --block` stops its node's processes
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 3
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for pid in [*tree, *self.pids]:  # whatever outlived it (workers, agents)
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for proc in self.procs:
            proc.wait()
        shutil.rmtree(self.temp, ignore_errors=True)

    def __enter__(self) -> LocalRayCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: Any) -> None:
        self.stop()
