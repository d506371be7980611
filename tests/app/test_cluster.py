"""`mcpworld up --ray` on a real Ray engine: a local multi-node cluster (a head and worker raylets on this machine,
one CPU each), world servers placed on several nodes as actors and registered as replicas; a run through the
registry spreads over them; a replica's process killed mid-run loses no reward (its episodes end as
infrastructure errors and are retried on a live replica), Ray restarts it and the registry takes it back.

Skips, saying why, where Ray is not installed or its cluster cannot start here.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mcpworld.core.testing import free_port, wait_http
from mcpworld.registry.records import REGISTRY_META

TOKEN = os.environ.get("MCPWORLD_REGISTRY_TOKEN", "test-registry-token")
NAME = "io.mcpworld/airline"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'mcpworld[ray]')")
    from mcpworld.app.ray_local import LocalRayCluster

    local = LocalRayCluster(nodes=3, cpus=1)
    try:
        local.start()
    except Exception as exc:  # noqa: BLE001 - a machine where Ray cannot run: say why
        local.stop()
        pytest.skip(f"a local Ray cluster could not start here: {str(exc)[:300]}")
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def up(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mcpworld up --ray` on the cluster (2 replicas of airline), as a real process; yields the registry URL."""
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp_path_factory.mktemp("up-ray-home")),
           "MCPWORLD_REGISTRY_TOKEN": TOKEN, "RAY_USAGE_STATS_ENABLED": "0"}
    log = tmp_path_factory.mktemp("up-ray-log") / "up.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mcpworld", "up", "--ray", cluster.address, "--port", str(port),
                                 "--only", "airline", "--no-swe", "--replicas", "2", "--health-interval", "1"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_http(base + "/healthz", proc, timeout=120)
        except RuntimeError as exc:
            pytest.fail(f"{exc}\n{log.read_text()[-3000:]}")
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def replicas(base: str) -> list[dict[str, Any]]:
    item = httpx.get(f"{base}/v0/servers/io.mcpworld%2Fairline/versions/latest", timeout=10).json()
    return item["_meta"].get(REGISTRY_META, {}).get("replicas", [])


def wait_replicas_up(base: str, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reps = replicas(base)
        if sum(r["status"] == "up" for r in reps) >= count:
            return reps
        time.sleep(0.5)
    raise AssertionError(f"{count} replicas were not up within {timeout:g}s: {replicas(base)}")


def ensure_replicas(base: str, count: int) -> list[dict[str, Any]]:
    """Scale to `count` actors (whatever an earlier test left) and wait for them to be up."""
    answer = httpx.post(f"{base}/cluster/replicas", json={"replicas": count}, timeout=120,
                        headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200, answer.text
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        reps = replicas(base)
        if len(reps) == count and all(r["status"] == "up" for r in reps):
            return reps
        time.sleep(0.5)
    raise AssertionError(f"not {count} replicas up: {replicas(base)}")


def replica_pids(cluster: Any) -> list[int]:
    """The processes of this cluster's WorldReplica actors."""
    from mcpworld.app.ray_local import _descendants

    out = []
    for proc in cluster.procs:
        for pid in _descendants(proc.pid):
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::WorldReplica"):
                    out.append(pid)
            except OSError:
                pass
    return out


async def _tasks(base: str) -> list[Any]:
    from mcpworld.agent.runner import list_tasks

    return await list_tasks("airline", base)


def test_replicas_on_several_nodes_and_a_run_spreads_over_them(up: str) -> None:
    reps = ensure_replicas(up, 2)
    assert len({r["node"] for r in reps}) == 2, reps  # SPREAD: one actor per node
    item = httpx.get(f"{up}/v0/servers/io.mcpworld%2Fairline/versions/latest", timeout=10).json()
    assert sorted(r["url"] for r in item["server"]["remotes"]) == sorted(r["url"] for r in reps)

    from mcpworld.agent.episodes import EpisodeClient

    async def main() -> list[int]:
        tasks = await _tasks(up)
        async with EpisodeClient("airline", registry=up) as client:
            controls = [await client.control() for _ in range(4)]
            assert controls[0] is controls[2] and controls[1] is controls[3] and controls[0] is not controls[1]
            started = [await ctl.start(tasks[0].id, 0) for ctl in controls[:2]]
            live = []
            async with httpx.AsyncClient(timeout=10, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
                for rep in reps:
                    index = (await http.get(rep["url"].rsplit("/worlds/", 1)[0] + "/worlds")).json()
                    live.append(index["worlds"][0]["live_episodes"])
            for ctl, s in zip(controls, started):
                await ctl.close(s.episode)
            return live

    assert anyio.run(main) == [1, 1]  # one episode on each replica: no router, each holds its own


def test_a_killed_replica_loses_no_reward_and_comes_back(up: str, cluster: Any) -> None:
    from mcpworld.agent.loop import EpisodeConfig
    from mcpworld.agent.policies import OraclePolicy
    from mcpworld.agent.runner import RunSpec, run

    before = ensure_replicas(up, 2)
    pids = replica_pids(cluster)
    assert len(pids) == 2, pids
    tasks = anyio.run(_tasks, up)
    samples = math.ceil(60 / len(tasks))
    done: list[Any] = []
    killed: list[int] = []

    def on_done(traj: Any) -> None:
        done.append(traj)
        if len(done) == 6 and not killed:
            killed.append(pids[0])
            os.kill(pids[0], signal.SIGKILL)

    spec = RunSpec(server="airline", registry=up, tasks=tasks, samples=samples, concurrency=4, retries=4,
                   backoff_s=0.2, config=EpisodeConfig(turn_timeout_s=30))
    started = time.monotonic()
    trajs, summary = anyio.run(lambda: run(spec, lambda i: OraclePolicy(), on_done=on_done))
    assert killed, "the run ended before a replica could be killed"
    assert len(trajs) == len(tasks) * samples
    lost = [t for t in trajs if t.is_infra]
    assert all(t.reward == 0.0 and t.verdict is None for t in lost)  # never a reward for a lost episode
    played = [t for t in trajs if not t.is_infra]
    assert summary.lost == len(lost) == 0, [t.error for t in lost]  # every lost try was retried on a live replica
    assert all(t.reward == 1.0 for t in played), [(t.task, t.reward, t.error) for t in played if t.reward != 1.0]
    retried = [t for t in trajs if t.attempts > 1]
    assert retried, "no episode was on the killed replica"
    print(f"{len(trajs)} episodes in {time.monotonic() - started:.1f}s, {len(retried)} retried after the kill")

    # Ray restarts the actor (at a new address); the registry drops the dead URL and takes the new one
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        reps = replicas(up)
        if len(reps) == 2 and all(r["status"] == "up" for r in reps) and reps != before:
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"the killed replica did not come back: {replicas(up)}")
    assert {r["url"] for r in before} != {r["url"] for r in reps}
    assert len(replica_pids(cluster)) == 2 and killed[0] not in replica_pids(cluster)

    again, summary = anyio.run(lambda: run(RunSpec(server="airline", registry=up, tasks=tasks[:4], concurrency=4),
                                           lambda i: OraclePolicy()))
    assert summary.lost == 0 and all(t.reward == 1.0 for t in again)


def test_scaling_up_and_down_while_episodes_play_loses_none(up: str) -> None:
    """POST /cluster/replicas while clients play: a new actor joins the records' remotes, and a leaving one is
    dropped from the registry, drained and stopped; no episode fails on the way."""
    from mcpworld.agent.episodes import REFRESH_S, EpisodeClient

    ensure_replicas(up, 2)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.post(f"{up}/cluster/replicas", json={"replicas": 3}).status_code == 401

    async def main() -> tuple[int, list[str], set[str]]:
        played, errors = [0], []
        stop = anyio.Event()
        async with EpisodeClient("airline", registry=up) as client:

            async def worker() -> None:
                while not stop.is_set():
                    try:
                        ctl = await client.control()
                        started = await ctl.start("cancel-within-24h")
                        await ctl.call(started.episode, "get_flight", {"flight_id": "MW307-0602"})
                        await ctl.verify(started.episode, None, close=True)
                        played[0] += 1
                    except Exception as exc:  # noqa: BLE001 - counted: none may fail
                        errors.append(f"{type(exc).__name__}: {exc}")

            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    tg.start_soon(worker)
                async with httpx.AsyncClient(timeout=120, headers=auth) as http:
                    grown = (await http.post(f"{up}/cluster/replicas", json={"replicas": 3})).json()["replicas"]
                    assert len(grown) == 3
                    await anyio.sleep(REFRESH_S + 1)  # clients read the record again: the new replica is used
                    used = set(client._links)
                    shrunk = (await http.post(f"{up}/cluster/replicas", json={"replicas": 1})).json()["replicas"]
                    assert len(shrunk) == 1
                await anyio.sleep(1)
                stop.set()
        return played[0], errors, used

    played, errors, used = anyio.run(main)
    assert played > 20 and errors == [], errors[:5]
    assert len(used) == 3, used  # every replica got episodes while it was there
    reps = replicas(up)
    assert len(reps) == 1 and reps[0]["status"] == "up", reps


def test_a_node_lost_mid_run_loses_no_reward(up: str, cluster: Any) -> None:
    """A whole worker node (its raylet and every process on it) killed while a run plays: its replica's episodes
    are retried on the other replica, Ray restarts the actor on a node that is left, and the registry follows."""
    from mcpworld.agent.loop import EpisodeConfig
    from mcpworld.agent.policies import OraclePolicy
    from mcpworld.agent.runner import RunSpec, run

    reps = ensure_replicas(up, 2)
    ids = cluster.node_ids()
    victim = next(i for i, node in enumerate(ids)
                  if i > 0 and node and any(r["node"].startswith(node[:12]) for r in reps))
    tasks = anyio.run(_tasks, up)
    killed: list[int] = []
    done: list[Any] = []

    def on_done(traj: Any) -> None:
        done.append(traj)
        if len(done) == 6 and not killed:
            killed.append(victim)
            cluster.kill_node(victim)

    spec = RunSpec(server="airline", registry=up, tasks=tasks, samples=math.ceil(60 / len(tasks)), concurrency=4,
                   retries=4, backoff_s=0.2, config=EpisodeConfig(turn_timeout_s=30))
    trajs, summary = anyio.run(lambda: run(spec, lambda i: OraclePolicy(), on_done=on_done))
    try:
        assert killed and summary.lost == 0, [t.error for t in trajs if t.is_infra][:3]
        assert all(t.reward == 1.0 for t in trajs)
        assert any(t.attempts > 1 for t in trajs), "no episode was on the lost node"
        lost_node = ids[victim]
        assert lost_node is not None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            now = replicas(up)
            if len(now) == 2 and all(r["status"] == "up" and not r["node"].startswith(lost_node[:12]) for r in now):
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"the lost node's replica was not restarted elsewhere: {replicas(up)}")
    finally:
        cluster.add_node()  # the cluster as the other tests expect it
