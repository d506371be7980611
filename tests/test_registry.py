"""Registry: the /v0 API against the real app, records valid per the official schema, health, export."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import jsonschema
import pytest
from fastapi.testclient import TestClient

from mcpworld.registry.api import create_app
from mcpworld.registry.export import export
from mcpworld.registry.health import check_all
from mcpworld.registry.records import local_record
from mcpworld.registry.store import RegistryStore

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SCHEMA = Path(__file__).resolve().parents[2] / "shared/thirdparty/mcp-registry/server.schema.json"


def record(name: str, version: str = "1.0.0", **kw) -> dict:
    return local_record(name, f"The {name} server", "world", url=f"http://127.0.0.1:9/worlds/{name}/mcp",
                        stdio_args=["serve", "world", name, "--stdio"], version=version,
                        facts={"tags": ["demo"], "tools": 3, "tasks": 2}, **kw)


@pytest.fixture
def store(tmp_path: Path) -> RegistryStore:
    return RegistryStore(f"sqlite:///{tmp_path / 'registry.db'}")


@pytest.fixture
def api(store: RegistryStore) -> TestClient:
    return TestClient(create_app(store, TOKEN))


def official_validator():
    if not SCHEMA.is_file():
        pytest.skip(f"official schema not found at {SCHEMA}")
    return jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))


def test_publish_requires_the_token(api) -> None:
    assert api.post("/v0/publish", json=record("a")).status_code == 401
    wrong = api.post("/v0/publish", json=record("a"), headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and "wrong registry token" in wrong.json()["detail"]
    assert api.post("/v0/publish", json=record("a"), headers=AUTH).status_code == 200
    assert api.get("/v0/servers").json()["metadata"]["count"] == 1


def test_invalid_server_json_is_422_with_every_path(api) -> None:
    bad = record("a")
    bad["name"] = "no-namespace"
    bad["description"] = "x" * 101
    bad["remotes"][0]["type"] = "carrier-pigeon"
    response = api.post("/v0/publish", json=bad, headers=AUTH)
    assert response.status_code == 422
    paths = {e["path"] for e in response.json()["errors"]}
    assert {"$.name", "$.description", "$.remotes[0].type"} <= paths
    not_json = api.post("/v0/publish", content=b"{oops", headers={**AUTH, "Content-Type": "application/json"})
    assert not_json.status_code == 422
    assert api.get("/v0/servers").json()["servers"] == []


def test_duplicate_version_is_409_and_new_version_becomes_latest(api) -> None:
    assert api.post("/v0/publish", json=record("a"), headers=AUTH).status_code == 200
    assert api.post("/v0/publish", json=record("a"), headers=AUTH).status_code == 409
    assert api.post("/v0/publish", json=record("a", "1.1.0"), headers=AUTH).status_code == 200
    latest = api.get("/v0/servers/io.mcpworld%2Fa/versions/latest").json()
    assert latest["server"]["version"] == "1.1.0"
    assert latest["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"] is True
    versions = api.get("/v0/servers/io.mcpworld/a/versions").json()["servers"]
    assert [v["server"]["version"] for v in versions] == ["1.0.0", "1.1.0"]
    only_latest = api.get("/v0/servers", params={"version": "latest"}).json()["servers"]
    assert [s["server"]["version"] for s in only_latest] == ["1.1.0"]
    assert api.get("/v0/servers/io.mcpworld%2Fmissing/versions/latest").status_code == 404


def test_search_and_cursor_pagination(api, store: RegistryStore) -> None:
    for i in range(25):
        store.publish(record(f"s{i:02d}"))
    store.publish(local_record("io.example/weather", "Forecasts", "external", url="http://127.0.0.1:9/mcp"))
    seen, cursor = [], None
    while True:
        page = api.get("/v0/servers", params={"limit": 10, **({"cursor": cursor} if cursor else {})}).json()
        seen += [s["server"]["name"] for s in page["servers"]]
        assert page["metadata"]["count"] == len(page["servers"])
        cursor = page["metadata"].get("nextCursor")
        if not cursor:
            break
    assert len(seen) == 26 and len(set(seen)) == 26 and seen == sorted(seen)
    found = api.get("/v0/servers", params={"search": "forecast"}).json()["servers"]
    assert [s["server"]["name"] for s in found] == ["io.example/weather"]
    assert api.get("/v0/servers", params={"cursor": "garbage"}).status_code == 400
    assert api.get("/v0/kinds").json() == {"external": 1, "world": 25}


def test_status_changes_and_updated_since(api) -> None:
    api.post("/v0/publish", json=record("a"), headers=AUTH)
    since = api.get("/v0/servers").json()["servers"][0]["_meta"]["io.modelcontextprotocol.registry/official"][
        "updatedAt"]
    change = {"status": "deprecated", "statusMessage": "use b"}
    assert api.put("/v0/servers/io.mcpworld/a/versions/1.0.0/status", json=change).status_code == 401
    done = api.put("/v0/servers/io.mcpworld/a/versions/1.0.0/status", json=change, headers=AUTH).json()
    assert done["_meta"]["io.modelcontextprotocol.registry/official"]["status"] == "deprecated"
    assert api.delete("/v0/servers/io.mcpworld/a/versions/1.0.0", headers=AUTH).status_code == 200
    assert api.get("/v0/servers").json()["servers"] == []
    assert len(api.get("/v0/servers", params={"include_deleted": True}).json()["servers"]) == 1
    assert len(api.get("/v0/servers", params={"updated_since": since}).json()["servers"]) == 1
    assert api.put("/v0/servers/io.mcpworld/zzz/status", json=change, headers=AUTH).status_code == 404


def test_every_returned_record_is_valid_server_json(api, store: RegistryStore) -> None:
    validator = official_validator()
    store.publish(record("a"))
    store.record_health("io.mcpworld/a", "down", None, "refused")
    for item in api.get("/v0/servers").json()["servers"]:
        errors = sorted(validator.iter_errors(item["server"]), key=str)
        assert not errors, errors[0].message
        assert item["server"]["_meta"]["io.mcpworld/server"]["health"]["status"] == "down"


def test_openapi_is_served(api) -> None:
    spec = api.get("/openapi.json").json()
    assert {"/v0/servers", "/v0/publish", "/v0/servers/{name}/versions/{version}"} <= set(spec["paths"])


def test_v0_1_alias(api) -> None:
    api.post("/v0.1/publish", json=record("a"), headers=AUTH)
    assert api.get("/v0.1/servers").json()["metadata"]["count"] == 1


@pytest.mark.anyio
async def test_unreachable_server_is_down_not_a_crash(store: RegistryStore) -> None:
    store.publish(record("dead"))
    store.publish(local_record("io.example/nothing", "No transport that works", "external",
                               url="http://127.0.0.1:1/mcp"))
    results = await check_all(store, timeout=5)
    assert {r["status"] for r in results} == {"down"}
    assert all(r["error"] for r in results)
    listed = store.get("io.mcpworld/dead")["server"]["_meta"]["io.mcpworld/server"]["health"]
    assert listed["status"] == "down" and listed["error"]


def test_concurrent_writers(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    stores = [RegistryStore(url) for _ in range(4)]
    errors: list[Exception] = []

    def writer(k: int) -> None:
        try:
            for i in range(25):
                stores[k].publish(record(f"w{k}-{i}"))
        except Exception as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and stores[0].count() == 100


@pytest.mark.parametrize("fmt", ["claude-desktop", "claude-code", "vscode", "cursor"])
def test_export_names_every_server(fmt: str) -> None:
    docs = [record("a"), local_record("io.example/remote-only", "x", "external", url="http://127.0.0.1:9/mcp")]
    config = json.loads(json.dumps(export(docs, fmt)))
    entries = config["servers"] if fmt == "vscode" else config["mcpServers"]
    assert set(entries) == {"a", "remote-only"}
    if fmt == "claude-desktop":
        assert entries["a"]["args"][-4:] == ["serve", "world", "a", "--stdio"]
        assert entries["remote-only"]["args"][-1] == "http://127.0.0.1:9/mcp"
    elif fmt == "cursor":
        assert entries["a"] == {"url": "http://127.0.0.1:9/worlds/a/mcp"}
    else:
        assert entries["a"] == {"type": "http", "url": "http://127.0.0.1:9/worlds/a/mcp"}
