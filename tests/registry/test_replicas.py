"""Replicas without a cluster: the store merges live replicas into a record's remotes (SQLite here; PostgreSQL in
test_store_postgres.py), the health checks drop a replica that fails and take it back when it answers, and an
`EpisodeClient` spreads episodes over a record's replicas, skipping one it cannot reach."""

from __future__ import annotations

import anyio
import pytest

from mcpworld.agent.episodes import EpisodeClient
from mcpworld.core.testing import free_port
from mcpworld.registry.health import check_all
from mcpworld.registry.records import REGISTRY_META, local_record
from mcpworld.registry.store import RegistryStore

NAME = "io.mcpworld/airline"


def _record(url: str | None = None) -> dict:
    return local_record(NAME, "airline", "world", url=url, stdio_args=["serve", "world", "airline", "--stdio"])


def test_health_checks_drop_a_failing_replica_and_take_it_back(tmp_path, worlds_url: str) -> None:
    store = RegistryStore(f"sqlite:///{tmp_path / 'r.db'}")
    store.publish(_record())
    version = store.get(NAME)["server"]["version"]
    live = f"{worlds_url}/worlds/airline/mcp"
    dead = f"http://127.0.0.1:{free_port()}/worlds/airline/mcp"
    store.add_replica(NAME, version, live, node="a")
    store.add_replica(NAME, version, dead, node="b")
    assert [r["url"] for r in store.get(NAME)["server"]["remotes"]] == [live, dead]

    results = anyio.run(lambda: check_all(store, [NAME], timeout=5))
    assert [r["status"] for r in results] == ["up"]  # the record is up while a replica is
    item = store.get(NAME)
    assert [r["url"] for r in item["server"]["remotes"]] == [live]
    assert {r["url"]: r["status"] for r in item["_meta"][REGISTRY_META]["replicas"]} == {live: "up", dead: "down"}

    store.replica_health(NAME, live, "down", "was unreachable a moment ago")
    anyio.run(lambda: check_all(store, [NAME], timeout=5))
    assert [r["url"] for r in store.get(NAME)["server"]["remotes"]] == [live]  # answered again: back


def test_an_episode_client_spreads_over_replicas_and_skips_a_dead_one(worlds_url: str) -> None:
    port = worlds_url.rsplit(":", 1)[1]
    one, two = f"{worlds_url}/worlds/airline/mcp", f"http://localhost:{port}/worlds/airline/mcp"
    dead = f"http://127.0.0.1:{free_port()}/worlds/airline/mcp"
    record = _record()
    record["remotes"] = [{"type": "streamable-http", "url": u} for u in (one, two, dead)]

    async def main() -> None:
        async with EpisodeClient(record) as client:
            picks = [await client.control() for _ in range(4)]
            assert picks[0] is not picks[1] and picks[2] is picks[0] and picks[3] is picks[1]  # the dead one skipped
            assert sorted(client._links) == sorted([one, two, dead])
            started = [await ctl.start("cancel-within-24h") for ctl in picks[:2]]
            assert started[0].episode != started[1].episode
            for ctl, s in zip(picks, started):
                await ctl.close(s.episode)

    anyio.run(main)


def test_a_record_whose_replicas_are_all_down_still_names_them(tmp_path) -> None:
    store = RegistryStore(f"sqlite:///{tmp_path / 'r.db'}")
    store.publish(_record())
    version = store.get(NAME)["server"]["version"]
    store.add_replica(NAME, version, "http://10.9.9.9:1/worlds/airline/mcp")
    store.replica_health(NAME, "http://10.9.9.9:1/worlds/airline/mcp", "down", "refused")
    # no silent fallback to launching the world locally over stdio: the client fails as an infrastructure error
    assert [r["url"] for r in store.get(NAME)["server"]["remotes"]] == ["http://10.9.9.9:1/worlds/airline/mcp"]


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_postgres_urls_get_the_psycopg_driver(scheme: str) -> None:
    pytest.importorskip("psycopg")
    from mcpworld.registry.store import engine_url

    assert engine_url(f"{scheme}://u@h:5/db") == "postgresql+psycopg://u@h:5/db"
    assert engine_url("sqlite:///x.db") == "sqlite:///x.db"


def test_up_ray_without_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from click.testing import CliRunner

    from mcpworld.app.up_cli import up_command

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    result = CliRunner().invoke(up_command, ["--ray", "--only", "airline", "--no-swe", "--port", str(free_port())])
    assert result.exit_code != 0 and "pip install 'mcpworld[ray]'" in result.output, result.output
