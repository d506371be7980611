"""Many AWM worlds, a bounded pool of warm zygotes: memory depends on the pool, not on the worlds installed.
Zygotes start on a world's first call and the least recently used idle one is closed past the bound; a busy
zygote is never closed under its job, and an evicted world's next call starts it again."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mcpworld.synth.importers.awm import import_scenario, load_package, package_worker, read_references
from mcpworld.synth.importers.awm_format import read_dataset
from mcpworld.synth.sandbox.worker import POOL, Interpreter, Limits, Worker
from mcpworld.worlds.runtime import WorldRuntime

DATA = Path(__file__).parents[1] / "data" / "awm"


@pytest.fixture
def pool_of_two() -> Iterator[None]:
    POOL.resize(2)
    try:
        yield
    finally:
        POOL.resize(None)


def _worker(n: int) -> Worker:
    return Worker(Limits(), ("json",), warm=(("json:dumps", (("obj", n),)),))


def test_past_the_bound_the_least_recently_used_idle_zygote_closes(pool_of_two: None) -> None:
    a, b, c = _worker(1), _worker(2), _worker(3)
    try:
        for w in (a, b):
            assert w.run("json:dumps", {"obj": 0}).ok
        assert a.run("json:dumps", {"obj": 0}).ok  # a is now the most recent: b is the least
        assert c.run("json:dumps", {"obj": 0}).ok
        assert a._proc is not None and c._proc is not None and b._proc is None
        assert {id(w) for w in POOL.live()} >= {id(a), id(c)} and id(b) not in {id(w) for w in POOL.live()}
        with a._lock, c._lock:  # both busy: b's start evicts neither (the bound is passed for a while)
            assert b._start() is not None
            assert a._proc is not None and c._proc is not None
        assert b.run("json:dumps", {"obj": 5}).value == "5"  # and after a job, an idle one goes
        assert sum(w._proc is not None for w in (a, b, c)) == 2
    finally:
        for w in (a, b, c):
            w.close()


@pytest.fixture(scope="module")
def three_worlds(awm_runtime: Interpreter, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("awm-pool")
    scenario = next(s for s in read_dataset(DATA) if s.key == "pet_clinic_1")
    refs = read_references(DATA / "references.jsonl")
    report = anyio.run(lambda: import_scenario(scenario, out / "src", references=refs, audit=False))
    assert report.ok, report.problems
    paths = []
    for i in range(3):
        dest = out / f"awm-clinic-{i}"
        shutil.copytree(report.path or "", dest)
        manifest = json.loads((dest / "scenario.json").read_text())
        manifest["name"] = dest.name
        (dest / "scenario.json").write_text(json.dumps(manifest))
        paths.append(dest)
    return paths


def test_three_worlds_served_by_a_pool_of_two(three_worlds: list[Path], pool_of_two: None) -> None:
    runtimes = [WorldRuntime(load_package(p)) for p in three_worlds]
    try:
        for _ in range(2):  # round robin over more worlds than zygotes: every call still answers
            for rt in runtimes:
                episode = rt.fork("task-1")
                done = rt.call(episode, "cancel_appointment", {"appointment_id": 2})
                assert done.error is None and "cancelled" in json.dumps(done.value)
                assert rt.verify(episode, None).passed
                episode.close()
                live = [w for w in POOL.live() if w.warm]
                assert len(live) <= 2
        # 0, 1, 2, 0, 1, 2 with room for two: world 0's zygote is the one closed last
        assert package_worker(three_worlds[0])._proc is None and package_worker(three_worlds[2])._proc is not None
        assert POOL.evictions >= 3
    finally:
        for p in three_worlds:
            package_worker(p).close()


def test_a_zygote_started_by_a_short_lived_thread_outlives_it() -> None:
    """bubblewrap's --die-with-parent follows the thread that started it: request threads come and go."""
    import threading

    worker = _worker(9)
    try:
        thread = threading.Thread(target=lambda: worker.run("json:dumps", {"obj": 1}))
        thread.start()
        thread.join()
        proc = worker._proc
        assert proc is not None
        time.sleep(0.5)
        assert proc.poll() is None and worker.run("json:dumps", {"obj": 2}).ok and worker.starts == 1
    finally:
        worker.close()


def test_an_episode_keeps_one_session_that_ends_with_it(three_worlds: list[Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Warm calls ship no database: the session's, kept between calls and mirrored byte for byte, is the episode's;
    a write beside the session (the server's own database changed) is noticed and sent; closing ends the process."""
    from mcpworld.synth.importers import awm
    from tests.synth.test_worker_sessions import under

    shipped: list[bool] = []
    real = awm.run_job

    def spy(path: Path, entry: str, args: dict, session: str | None = None) -> object:
        shipped.append("db" in args)
        return real(path, entry, args, session)

    monkeypatch.setattr(awm, "run_job", spy)
    runtime = WorldRuntime(load_package(three_worlds[0]))
    worker = package_worker(three_worlds[0])
    try:
        episode = runtime.fork("task-1")
        assert runtime.call(episode, "list_pets", {"owner_id": 1}).error is None
        alone = under(worker) - 1
        assert runtime.call(episode, "cancel_appointment", {"appointment_id": 2}).error is None
        assert runtime.call(episode, "cancel_appointment", {"appointment_id": 2}).error  # a 400: nothing written
        assert "cancelled" in json.dumps(runtime.call(episode, "get_appointment", {"appointment_id": 2}).value)
        assert shipped == [True, False, False, False]
        episode.conn.execute("UPDATE appointments SET status = 'scheduled' WHERE id = 2")
        seen = runtime.call(episode, "get_appointment", {"appointment_id": 2})
        assert '"scheduled"' in json.dumps(seen.value) and shipped[-2:] == [False, True]
        assert under(worker) == alone + 1
        episode.close()
        assert under(worker) == alone
    finally:
        worker.close()
