"""The registry store on a real PostgreSQL server: the same API as on SQLite, and two registry processes on one
database agreeing under concurrent writes (publishes, status changes, health, replicas) with no lost update.

The server is started here (initdb into a temporary directory, pg_ctl on a free port, its socket in the same
directory; as an unprivileged user when the tests run as root, since PostgreSQL refuses root). Without PostgreSQL's
binaries or the psycopg driver (`pip install 'mcpworld[postgres]'`) the tests skip, saying why.
"""

from __future__ import annotations

import concurrent.futures
import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http
from mcpworld.registry.records import REGISTRY_META, local_record

TOKEN = os.environ.get("MCPWORLD_REGISTRY_TOKEN", "test-registry-token")


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _as_user() -> tuple[list[str], int | None, int | None]:
    """The prefix that runs PostgreSQL's programs as an unprivileged user when we are root, and its uid/gid."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        entry = pwd.getpwnam("postgres")
        uid, gid = entry.pw_uid, entry.pw_gid
    except KeyError:
        uid, gid = 65534, 65534
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv is missing: PostgreSQL refuses to run as root")
    return [setpriv, "--reuid", str(uid), "--regid", str(gid), "--clear-groups"], uid, gid


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    """A PostgreSQL server of our own for this module; yields a `postgresql://` URL of an empty database."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed (pip install 'mcpworld[postgres]')")
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("PostgreSQL's initdb/pg_ctl are not installed (Debian: apt-get install postgresql)")
    prefix, uid, gid = _as_user()
    root = Path(tempfile.mkdtemp(prefix="mcpworld-pg-"))
    data, log = root / "data", root / "server.log"
    if uid is not None:
        os.chown(root, uid, gid or 0)
    port = free_port()
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    started = False
    try:
        init = subprocess.run([*prefix, initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                               "--no-sync"], capture_output=True, text=True, env=env, timeout=120)
        if init.returncode != 0:
            pytest.skip(f"initdb failed: {(init.stderr or init.stdout).strip()[-500:]}")
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        start = subprocess.run([*prefix, pg_ctl, "-D", str(data), "-o", options, "-l", str(log), "-w", "-t", "60",
                                "start"], capture_output=True, text=True, env=env, timeout=90)
        if start.returncode != 0:
            tail = log.read_text()[-500:] if log.exists() else start.stderr
            pytest.skip(f"PostgreSQL did not start: {tail.strip()}")
        started = True
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        if started:
            subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], capture_output=True,
                           env=env, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def db(pg_url: str) -> str:
    """The module's database, emptied."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS server_version, health, replica")
    return pg_url


def record(name: str, version: str = "1.0.0", url: str | None = "http://127.0.0.1:1/worlds/x/mcp") -> dict:
    return local_record(name, f"{name} world", "world", url=url, version=version,
                        stdio_args=["serve", "world", name.split("/")[-1], "--stdio"])


def test_store_on_postgres(db: str) -> None:
    from mcpworld.registry.store import Conflict, NoChange, RegistryStore

    store = RegistryStore(db)
    assert store.postgres and store.url == db
    store.publish(record("io.mcpworld/a"))
    store.publish(record("io.mcpworld/a", "1.1.0"))
    with pytest.raises(Conflict):
        store.publish(record("io.mcpworld/a", "1.1.0"))
    store.publish(record("io.mcpworld/a", "1.1.0"), replace=True)
    assert store.get("io.mcpworld/a")["server"]["version"] == "1.1.0"
    assert [v["server"]["version"] for v in store.versions("io.mcpworld/a")] == ["1.1.0", "1.0.0"]
    store.set_status("io.mcpworld/a", "1.0.0", "deprecated", "old")
    with pytest.raises(NoChange):
        store.set_status("io.mcpworld/a", "1.0.0", "deprecated", "old")
    store.record_health("io.mcpworld/a", "up", 1.5, None, 3)
    store.record_health("io.mcpworld/a", "down", None, "refused")
    item = store.get("io.mcpworld/a")
    assert item["_meta"][REGISTRY_META]["health"]["status"] == "down"
    page, cursor = store.list(search="a world", version="latest")
    assert [p["server"]["version"] for p in page] == ["1.1.0"] and cursor is None
    assert store.kinds() == {"world": 1} and store.count() == 2


def test_replicas_join_and_leave_remotes(db: str) -> None:
    from mcpworld.registry.store import RegistryStore

    store = RegistryStore(db)
    store.publish(record("io.mcpworld/b", url=None))
    store.add_replica("io.mcpworld/b", "1.0.0", "http://10.0.0.1:9000/worlds/b/mcp", node="n1")
    store.add_replica("io.mcpworld/b", "1.0.0", "http://10.0.0.2:9000/worlds/b/mcp", node="n2")
    urls = [r["url"] for r in store.get("io.mcpworld/b")["server"]["remotes"]]
    assert urls == ["http://10.0.0.1:9000/worlds/b/mcp", "http://10.0.0.2:9000/worlds/b/mcp"]
    assert store.replica_health("io.mcpworld/b", "http://10.0.0.1:9000/worlds/b/mcp", "down", "refused")
    item = store.get("io.mcpworld/b")
    assert [r["url"] for r in item["server"]["remotes"]] == ["http://10.0.0.2:9000/worlds/b/mcp"]
    assert [r["status"] for r in item["_meta"][REGISTRY_META]["replicas"]] == ["down", "up"]
    store.replica_health("io.mcpworld/b", "http://10.0.0.2:9000/worlds/b/mcp", "down", "refused")
    assert len(store.get("io.mcpworld/b")["server"]["remotes"]) == 2  # all down: still named, never a local launch
    store.replica_health("io.mcpworld/b", "http://10.0.0.1:9000/worlds/b/mcp", "up")
    assert [r["url"] for r in store.get("io.mcpworld/b")["server"]["remotes"]] == ["http://10.0.0.1:9000/worlds/b/mcp"]
    assert store.remove_replica("io.mcpworld/b", "http://10.0.0.1:9000/worlds/b/mcp") == 1
    assert not store.replica_health("io.mcpworld/b", "http://10.0.0.1:9000/worlds/b/mcp", "up")  # never re-added
    assert [r["url"] for r in store.replicas(["io.mcpworld/b"])] == ["http://10.0.0.2:9000/worlds/b/mcp"]


def _registry(db: str, tmp: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp), "MCPWORLD_REGISTRY_TOKEN": TOKEN}
    proc = subprocess.Popen(mcpworld_cmd("registry", "serve", "--port", str(port), "--db", db), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, f"http://127.0.0.1:{port}"


def test_two_registry_processes_agree(db: str, tmp_path: Path) -> None:
    """Two `registry serve` processes on one database, written to at once: every publish lands, exactly one
    version is latest, status changes and health from one are seen by the other, and concurrent replica
    registrations and checks from both processes are all kept."""
    from mcpworld.registry.store import RegistryStore

    procs = [_registry(db, tmp_path / f"home{i}") for i in range(2)]
    try:
        for proc, base in procs:
            wait_http(base + "/healthz", proc)
        bases = [base for _, base in procs]
        auth = {"Authorization": f"Bearer {TOKEN}"}
        versions = [f"1.0.{i}" for i in range(40)]

        def publish(i: int) -> int:
            with httpx.Client(timeout=30) as http:
                return http.post(f"{bases[i % 2]}/v0/publish", json=record("io.mcpworld/c", versions[i]),
                                 headers=auth).status_code

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            codes = list(pool.map(publish, range(len(versions))))
        assert codes == [200] * len(versions)
        for base in bases:
            listed = httpx.get(f"{base}/v0/servers/io.mcpworld%2Fc/versions", timeout=30).json()["servers"]
            assert sorted(v["server"]["version"] for v in listed) == sorted(versions)
            latest = [v for v in listed if v["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"]]
            assert len(latest) == 1, [v["server"]["version"] for v in latest]

        # and straight into the store from four processes at once (more overlap than two event loops give)
        script = ("import sys\nfrom mcpworld.registry.records import local_record\n"
                  "from mcpworld.registry.store import RegistryStore\ns = RegistryStore(sys.argv[1])\n"
                  "for v in sys.argv[2:]:\n"
                  "    s.publish(local_record('io.mcpworld/e', 'e', 'world', url='http://127.0.0.1:1/worlds/e/mcp', "
                  "version=v))\n")
        writers = [subprocess.Popen([sys.executable, "-c", script, db, *[f"3.{i}.{j}" for j in range(30)]])
                   for i in range(4)]
        assert [w.wait(timeout=120) for w in writers] == [0] * 4
        listed = RegistryStore(db).versions("io.mcpworld/e")
        assert len(listed) == 120
        assert sum(v["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"] for v in listed) == 1

        # the same new version published at once through both, replacing: never a conflict, one row
        def replace(i: int) -> None:
            RegistryStore(db).publish(record("io.mcpworld/d", "2.0.0"), replace=True)

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(replace, range(8)))
        assert len(RegistryStore(db).versions("io.mcpworld/d")) == 1

        # a status change through one registry is what the other answers
        answer = httpx.patch(f"{bases[0]}/v0.1/servers/io.mcpworld%2Fc/versions/1.0.3/status",
                             json={"status": "deprecated", "statusMessage": "superseded"}, headers=auth, timeout=30)
        assert answer.status_code == 200, answer.text
        seen = httpx.get(f"{bases[1]}/v0.1/servers/io.mcpworld%2Fc/versions/1.0.3", timeout=30).json()
        assert seen["_meta"]["io.modelcontextprotocol.registry/official"]["status"] == "deprecated"

        # replicas registered and checked from two processes at once: none lost
        urls = [f"http://10.1.0.{i}:9000/worlds/c/mcp" for i in range(24)]
        script = ("import sys\nfrom mcpworld.registry.store import RegistryStore\n"
                  "s = RegistryStore(sys.argv[1])\nlatest = s.get('io.mcpworld/c')['server']['version']\n"
                  "for url in sys.argv[3:]:\n"
                  "    s.add_replica('io.mcpworld/c', latest, url, node=sys.argv[2])\n"
                  "    s.replica_health('io.mcpworld/c', url, 'down', 'checked by ' + sys.argv[2])\n"
                  "    s.record_health('io.mcpworld/c', 'up', 1.0, None, 1)\n")
        writers = [subprocess.Popen([sys.executable, "-c", script, db, f"p{i}", *urls[i::2]]) for i in range(2)]
        assert [w.wait(timeout=120) for w in writers] == [0, 0]
        for base in bases:
            item = httpx.get(f"{base}/v0/servers/io.mcpworld%2Fc/versions/latest", timeout=30).json()
            replicas = item["_meta"][REGISTRY_META]["replicas"]
            assert sorted(r["url"] for r in replicas) == sorted(urls)
            assert {r["status"] for r in replicas} == {"down"}
            assert item["_meta"][REGISTRY_META]["health"]["status"] == "up"
    finally:
        for proc, _ in procs:
            proc.terminate()
            proc.wait(timeout=10)


def test_postgres_without_the_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpworld.registry.store import RegistryStore

    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg -> ImportError
    with pytest.raises(RuntimeError, match=r"pip install 'mcpworld\[postgres\]'"):
        RegistryStore("postgresql://nobody@127.0.0.1:1/x")
