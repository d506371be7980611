"""A worker killed mid-rollout, as a user meets it: `mcpworld run` (the real CLI) plays oracle episodes against
`mcpworld serve worlds --workers 2`, one worker is SIGKILLed while both hold episodes, and

- with retries (the default) the run still ends with every (task, sample) played once and passed;
- with retries used up (`--retries 0`) exactly the dead worker's episodes are written as infra_error (no reward,
  not counted as failures), the run exits 3 saying to resume, and `--resume` plays exactly those, once each.

A request of the live worker's episode that was passing through the dying one is asked again and answered from
the reply its worker kept, so it is not lost and does not act twice (the last test shows that directly)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mcpworld.agent.trajectory import Trajectory, read_trajectories
from mcpworld.core.testing import free_port, mcpworld_cmd, read_until, stop
from mcpworld.core.workers import RETRY_HEADER

SAMPLES = 4  # x 23 airline tasks: enough that the run is mid-way when the kill comes
CONCURRENCY = 16  # episodes in flight: both workers hold several at any moment
KILL_AFTER = 20  # trajectories written before the kill


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[dict]:
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp_path)}
    proc = subprocess.Popen(mcpworld_cmd("serve", "worlds", "--only", "airline", "--port", str(port), "--workers", "2"),
                            env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        ready = read_until(proc, r"2 workers ready .* \(pids (\d+), (\d+)\)")
        yield {"url": f"http://127.0.0.1:{port}/worlds/airline/mcp", "proc": proc, "env": env,
               "pids": [int(ready.group(1)), int(ready.group(2))], "out": tmp_path / "run.jsonl"}
    finally:
        stop(proc)


def run_cmd(served: dict, *extra: str) -> list[str]:
    return mcpworld_cmd("run", "--server", served["url"], "--policy", "oracle", "-n", str(SAMPLES),
                        "--concurrency", str(CONCURRENCY), "--retry-backoff", "0.1", "-o", str(served["out"]), *extra)


def kill_worker_mid_run(served: dict, *extra: str) -> subprocess.CompletedProcess:
    """Start `mcpworld run`, SIGKILL worker 1 once KILL_AFTER trajectories are written, let the run finish."""
    out: Path = served["out"]
    run = subprocess.Popen(run_cmd(served, *extra), env=served["env"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        deadline = time.monotonic() + 120
        while not (out.exists() and out.read_text().count("\n") >= KILL_AFTER):
            assert run.poll() is None, f"run ended before the kill: {run.communicate()}"
            assert time.monotonic() < deadline, "the run wrote no trajectories"
            time.sleep(0.005)  # polling the file: the condition is its line count
        os.kill(served["pids"][1], signal.SIGKILL)
        stdout, stderr = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    read_until(served["proc"], r"worker 1 \(pid \d+\) exited .* generation 1")
    return subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr)


def held_by(t: Trajectory) -> str | None:
    """'0.0' / '1.0': the worker (index.generation) that held the episode; None when its start never came back."""
    match = re.search(r"w(\d+\.\d+)-", t.episode or "")
    return match.group(1) if match else None


def assert_every_job_once_and_passed(rows: list[Trajectory], jobs: int) -> None:
    final = [t for t in rows if not t.is_infra]
    counts = Counter(t.key for t in final)
    assert len(counts) == jobs and set(counts.values()) == {1}, \
        f"{jobs} jobs, {len(counts)} played; played twice: {[k for k, n in counts.items() if n > 1]}"
    failed = [(t.task, t.sample, t.termination, t.error) for t in final if not (t.verdict and t.verdict.passed)]
    assert not failed, failed


def test_run_retries_the_dead_workers_episodes_and_plays_every_job_once(served: dict) -> None:
    result = kill_worker_mid_run(served)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_trajectories(served["out"])
    jobs = len({t.key for t in rows})
    assert jobs == 23 * SAMPLES and len(rows) == jobs  # one line per job: a retried one is written once
    assert_every_job_once_and_passed(rows, jobs)
    retried = [t for t in rows if t.attempts > 1]
    assert retried, "worker 1 was killed with episodes in flight, yet no episode needed a second try"
    assert "lost: infrastructure" not in result.stdout


def test_dead_workers_episodes_are_lost_alone_and_resume_plays_exactly_those(served: dict) -> None:
    result = kill_worker_mid_run(served, "--retries", "0")
    rows = read_trajectories(served["out"])
    lost = [t for t in rows if t.is_infra]
    assert result.returncode == 3, (result.returncode, result.stderr[-3000:])
    assert lost, "worker 1 was killed with episodes in flight, yet none was lost"
    assert f"error: {len(lost)} episode" in result.stderr and "lost to infrastructure errors" in result.stderr
    assert "--resume -o" in result.stderr

    # Exactly the dead worker's episodes: each was held by worker 1's first process (or its start died with it).
    assert {held_by(t) for t in lost} <= {"1.0", None}, [(t.episode, t.error) for t in lost]
    for t in lost:
        assert t.reward == 0.0 and t.verdict is None
        assert "worker 1" in t.error or "connection lost" in t.error, t.error  # its worker, or its connection, died
    # Every other episode, on either worker, played to a pass; the lost ones are not counted as failures.
    assert_every_job_once_and_passed([t for t in rows if not t.is_infra], len(rows) - len(lost))
    assert any(held_by(t) == "0.0" for t in rows) and any(held_by(t) == "1.0" and not t.is_infra for t in rows)
    assert "failed:" not in result.stdout and "lost: infrastructure" in result.stdout
    assert re.search(r"success rate\s*│\s*100\.0%", result.stdout), result.stdout

    before = served["out"].read_text().count("\n")
    read_until(served["proc"], r"worker 1 ready again .* generation 1")
    resumed = subprocess.run(run_cmd(served, "--retries", "0", "--resume"), env=served["env"], capture_output=True,
                             text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    lines = served["out"].read_text().splitlines()
    replayed = [Trajectory.model_validate(json.loads(line)) for line in lines[before:]]
    assert sorted(t.key for t in replayed) == sorted(t.key for t in lost)  # exactly the lost jobs, once each
    everything = read_trajectories(served["out"])
    assert_every_job_once_and_passed(everything, 23 * SAMPLES)
    assert re.search(r"skipped \(resume\)\s*│\s*" + str(23 * SAMPLES - len(lost)), resumed.stdout), resumed.stdout


def test_a_request_asked_again_gets_its_kept_reply_and_does_not_act_twice(served: dict) -> None:
    """What saves a live worker's episode whose request was passing through the dying worker: the client asks
    again with the retry header, and the holder answers from the reply it kept instead of cancelling twice."""
    url = served["url"]
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-protocol-version": "2026-07-28"}

    def post(method: str, params: dict, rid: int, retry: bool = False) -> dict:
        extra = {"mcp-method": method} | ({"mcp-name": params["name"]} if "name" in params else {})
        extra |= {RETRY_HEADER: "1"} if retry else {}
        params = {**params, "_meta": {**envelope, **params.get("_meta", {})}}
        with httpx.Client(timeout=30) as client:  # a new connection each time: either worker may take it
            response = client.post(url, json={"jsonrpc": "2.0", "id": rid, "method": method, "params": params},
                                   headers=headers | extra)
        assert response.status_code == 200, response.text
        return response.json()

    episode = post("io.mcpworld/episode/start", {"task": "cancel-within-24h", "seed": 0}, 1)["result"]["episode"]
    cancel = {"name": "cancel_reservation", "arguments": {"reservation_id": "ZFA04Y", "reason": "change_of_plan"},
              "_meta": {"io.mcpworld/episode": episode}}
    first = post("tools/call", cancel, 2)
    assert not first["result"]["isError"], first
    for _ in range(4):  # asked again, on whichever worker the connection reaches: the same answer, no second act
        assert post("tools/call", cancel, 2, retry=True) == first
    again = post("tools/call", cancel, 3)  # a new request (new id) does act: the reservation is cancelled already
    assert again["result"]["isError"], again
    verdict = post("io.mcpworld/episode/verify", {"episode": episode, "answer": None, "close": True}, 4)
    assert verdict["result"]["verdict"]["passed"], verdict
