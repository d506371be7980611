"""Registry: the official API (/v0.1 and /v0) against the real app, records valid per the official schema (shipped
in the package), status changes, health in the registry's own _meta, export."""

from __future__ import annotations

import threading
from pathlib import Path

import jsonschema
import pytest
from fastapi.testclient import TestClient

from mcpworld.registry.api import create_app
from mcpworld.registry.health import check_all
from mcpworld.registry.records import OFFICIAL, RecordError, health_of, local_record, official_schema, validate_record
from mcpworld.registry.store import RegistryStore

LOCAL = "http://127.0.0.1"  # a loopback server answers only to loopback names (DNS rebinding)

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def record(name: str, version: str = "1.0.0", **kw) -> dict:
    return local_record(name, f"The {name} server", "world", url=f"http://127.0.0.1:9/worlds/{name}/mcp",
                        stdio_args=["serve", "world", name, "--stdio"], version=version,
                        facts={"tags": ["demo"], "tools": 3, "tasks": 2}, **kw)


@pytest.fixture
def store(tmp_path: Path) -> RegistryStore:
    return RegistryStore(f"sqlite:///{tmp_path / 'registry.db'}")


@pytest.fixture
def api(store: RegistryStore) -> TestClient:
    return TestClient(create_app(store, TOKEN), base_url=LOCAL)


def official_validator() -> jsonschema.Draft7Validator:
    schema = official_schema()  # package data: present in every install, no workspace needed
    assert schema["$id"] == "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
    return jsonschema.Draft7Validator(schema)


def test_publish_requires_the_token(api) -> None:
    assert api.post("/v0/publish", json=record("a")).status_code == 401
    wrong = api.post("/v0/publish", json=record("a"), headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json() == {"error": "wrong registry token", "status": 401}
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
    assert latest["_meta"][OFFICIAL]["isLatest"] is True
    versions = api.get("/v0/servers/io.mcpworld/a/versions").json()["servers"]
    assert [v["server"]["version"] for v in versions] == ["1.1.0", "1.0.0"]  # newest first, as the OpenAPI says
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


def test_status_changes_are_patch_with_message_and_time(api) -> None:
    api.post("/v0/publish", json=record("a"), headers=AUTH)
    since = api.get("/v0/servers").json()["servers"][0]["_meta"][OFFICIAL]["updatedAt"]
    change = {"status": "deprecated", "statusMessage": "use b"}
    url = "/v0.1/servers/io.mcpworld%2Fa/versions/1.0.0/status"
    assert api.patch(url, json=change).status_code == 401
    assert api.put(url, json=change, headers=AUTH).status_code == 405  # the official API has no PUT here
    done = api.patch(url, json=change, headers=AUTH).json()
    official = done["_meta"][OFFICIAL]
    assert official["status"] == "deprecated" and official["statusMessage"] == "use b"
    assert official["statusChangedAt"] >= since
    again = api.patch(url, json=change, headers=AUTH)
    assert again.status_code == 400 and "already deprecated" in again.json()["error"]
    bad = api.patch(url, json={"status": "gone"}, headers=AUTH)
    assert bad.status_code == 422 and bad.json()["errors"][0]["path"] == "$.body.status"


def test_status_of_every_version_answers_updated_count_and_servers(api) -> None:
    for v in ("1.0.0", "1.1.0"):
        api.post("/v0/publish", json=record("a", v), headers=AUTH)
    body = api.patch("/v0/servers/io.mcpworld%2Fa/status", json={"status": "deleted", "statusMessage": "gone"},
                     headers=AUTH).json()
    assert body["updatedCount"] == 2 and {s["server"]["version"] for s in body["servers"]} == {"1.0.0", "1.1.0"}
    assert all(s["_meta"][OFFICIAL]["statusChangedAt"] for s in body["servers"])
    assert api.patch("/v0/servers/io.mcpworld%2Fzzz/status", json={"status": "active"},
                     headers=AUTH).json() == {"error": "no server 'io.mcpworld/zzz'", "status": 404}


def test_deleted_versions_are_hidden_unless_asked_for(api) -> None:
    api.post("/v0/publish", json=record("a"), headers=AUTH)
    since = api.get("/v0/servers").json()["servers"][0]["_meta"][OFFICIAL]["updatedAt"]
    api.post("/v0/publish", json=record("a", "1.1.0"), headers=AUTH)
    assert api.delete("/v0/servers/io.mcpworld/a/versions/1.0.0", headers=AUTH).status_code == 200
    assert [s["server"]["version"] for s in api.get("/v0/servers").json()["servers"]] == ["1.1.0"]
    assert [s["server"]["version"] for s in api.get("/v0/servers/io.mcpworld%2Fa/versions").json()["servers"]] \
        == ["1.1.0"]
    assert api.get("/v0/servers/io.mcpworld%2Fa/versions/1.0.0").status_code == 404
    shown = api.get("/v0/servers/io.mcpworld%2Fa/versions/1.0.0", params={"include_deleted": True}).json()
    assert shown["_meta"][OFFICIAL]["status"] == "deleted"
    every = api.get("/v0/servers/io.mcpworld%2Fa/versions", params={"include_deleted": True}).json()["servers"]
    assert len(every) == 2
    assert len(api.get("/v0/servers", params={"include_deleted": True}).json()["servers"]) == 2
    assert len(api.get("/v0/servers", params={"updated_since": since}).json()["servers"]) == 2  # deleted included


def test_every_error_has_one_shape(api) -> None:
    answers = [api.get("/v0/servers/io.mcpworld%2Fnone/versions/latest"), api.get("/v0/servers?cursor=garbage"),
               api.get("/v0/servers?limit=0"), api.post("/v0/publish", json=record("a")),
               api.post("/v0/publish", json={"name": "x"}, headers=AUTH),
               api.put("/v0/servers/io.mcpworld%2Fa/versions/1.0.0", json=record("a"), headers=AUTH)]
    assert [a.status_code for a in answers] == [404, 400, 422, 401, 422, 501]
    for answer in answers:
        body = answer.json()
        assert isinstance(body["error"], str) and body["error"] and body["status"] == answer.status_code
        assert set(body) <= {"error", "status", "errors"}
        assert all(set(e) == {"path", "message"} for e in body.get("errors", []))


def test_refusals_of_an_exposed_registry_have_the_same_shape(store: RegistryStore) -> None:
    exposed = TestClient(create_app(store, TOKEN, host="0.0.0.0", allow_hosts=["testserver"]))
    for answer, status in [(exposed.get("/v0/servers", headers={"Host": "evil.example"}), 421),
                           (exposed.get("/v0/servers", headers={"Origin": "http://evil.example"}), 403)]:
        assert answer.status_code == status and set(answer.json()) == {"error", "status"}
        assert answer.json()["status"] == status


def test_validate_checks_without_publishing(api) -> None:
    good = api.post("/v0/validate", json=record("a")).json()
    assert good == {"valid": True, "issues": []}
    bad = record("a")
    bad["version"] = "^1.0"
    issues = api.post("/v0/validate", json=bad).json()
    assert issues["valid"] is False and issues["issues"][0]["path"] == "$.version"
    assert api.get("/v0/servers").json()["servers"] == []


def test_publish_follows_the_official_schema(api) -> None:
    # an OCI package without `version`: the 2025-12-11 schema accepts it, so the registry does too
    oci = {"$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
           "name": "io.example/oci", "description": "An OCI image", "version": "1.0.0",
           "packages": [{"registryType": "oci", "identifier": "docker.io/example/server:1.0.0",
                         "transport": {"type": "stdio"}}]}
    assert api.post("/v0/publish", json=oci, headers=AUTH).status_code == 200
    latest = {**oci, "version": "1.0.1", "packages": [{**oci["packages"][0], "version": "latest"}]}
    refused = api.post("/v0/publish", json=latest, headers=AUTH)  # the schema forbids a package version "latest"
    assert refused.status_code == 422 and refused.json()["errors"][0]["path"] == "$.packages[0].version"


def test_records_name_no_package_nobody_can_install() -> None:
    doc = record("a")
    assert "packages" not in doc  # mcpworld is on no package registry: no `uvx mcpworld`
    assert doc["_meta"]["io.mcpworld/server"]["stdio"] == ["serve", "world", "a", "--stdio"]
    assert doc["$schema"].endswith("/2025-12-11/server.schema.json")
    evil = record("b")
    evil["_meta"]["io.mcpworld/server"]["stdio"] = ["serve", "world", "/tmp/evil_world", "--stdio"]
    with pytest.raises(RecordError, match="not filesystem paths"):
        validate_record(evil)
    evil["_meta"]["io.mcpworld/server"]["stdio"] = ["up", "--host", "0.0.0.0"]  # not a server over stdio
    with pytest.raises(RecordError, match="serve ... --stdio"):
        validate_record(evil)


def test_a_store_from_before_status_times_is_upgraded_in_place(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    RegistryStore(f"sqlite:///{path}").publish(record("a"))
    with sqlite3.connect(path) as db:  # what an older mcpworld left: no status_changed_at column
        db.execute("ALTER TABLE server_version DROP COLUMN status_changed_at")
    store = RegistryStore(f"sqlite:///{path}")
    assert store.get("io.mcpworld/a")["server"]["name"] == "io.mcpworld/a"
    changed = store.set_status("io.mcpworld/a", "1.0.0", "deprecated")
    assert changed[0]["_meta"][OFFICIAL]["statusChangedAt"]


def test_every_returned_record_is_valid_server_json(api, store: RegistryStore) -> None:
    validator = official_validator()
    store.publish(record("a"))
    store.record_health("io.mcpworld/a", "down", None, "refused")
    for item in api.get("/v0/servers").json()["servers"]:
        errors = sorted(validator.iter_errors(item["server"]), key=str)
        assert not errors, errors[0].message
        assert health_of(item)["status"] == "down"
        assert "health" not in item["server"]["_meta"]["io.mcpworld/server"]  # the publisher's record is untouched


def test_openapi_is_served(api) -> None:
    spec = api.get("/openapi.json").json()
    assert {"/v0.1/servers", "/v0.1/publish", "/v0.1/servers/{name}/versions/{version}",
            "/v0.1/servers/{name}/versions/{version}/status", "/v0.1/servers/{name}/status",
            "/v0/servers", "/v0/auth/none", "/v0/validate"} <= set(spec["paths"])
    assert "patch" in spec["paths"]["/v0.1/servers/{name}/status"]


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
    listed = health_of(store.get("io.mcpworld/dead"))
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


def test_cors_lets_the_named_browser_origins_use_the_rest_api(store: RegistryStore) -> None:
    ui, other = "http://ui.example:5173", "http://evil.example"
    for host in ("127.0.0.1", "0.0.0.0"):  # on loopback, and exposed (where foreign Origins are refused)
        app = TestClient(create_app(store, TOKEN, host=host, allow_hosts=["testserver"], cors_origins=[ui]),
                         base_url=LOCAL if host == "127.0.0.1" else "http://testserver")
        preflight = app.options("/v0.1/servers/io.mcpworld%2Fa/status", headers={
            "Origin": ui, "Access-Control-Request-Method": "PATCH", "Access-Control-Request-Headers": "authorization"})
        assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == ui
        assert "PATCH" in preflight.headers["access-control-allow-methods"]
        listed = app.get("/v0/servers", headers={"Origin": ui})
        assert listed.status_code == 200 and listed.headers["access-control-allow-origin"] == ui
        foreign = app.get("/v0/servers", headers={"Origin": other})
        assert "access-control-allow-origin" not in foreign.headers
        assert foreign.status_code == 403  # on loopback too (issue 30): a cross-site page reads nothing
    exposed_mcp = app.post("/registry/mcp", json={}, headers={"Origin": ui})
    assert exposed_mcp.status_code == 403  # only the REST API is opened to the UI, never an MCP endpoint


def test_cors_is_off_unless_configured(store: RegistryStore, monkeypatch) -> None:
    assert "access-control-allow-origin" not in TestClient(create_app(store, TOKEN), base_url=LOCAL).get(
        "/v0/servers", headers={"Origin": "http://ui.example"}).headers
    monkeypatch.setenv("MCPWORLD_CORS_ORIGINS", "http://ui.example, http://other.example")
    answer = TestClient(create_app(store, TOKEN), base_url=LOCAL).get("/v0/servers",
                                                                      headers={"Origin": "http://other.example"})
    assert answer.headers["access-control-allow-origin"] == "http://other.example"


def test_cli_changes_status_and_says_what_changed(store: RegistryStore) -> None:
    from click.testing import CliRunner

    from mcpworld.core.serving import serve_in_thread
    from mcpworld.core.testing import free_port
    from mcpworld.registry.cli import registry_group

    for v in ("1.0.0", "1.1.0"):
        store.publish(record("a", v))
    with serve_in_thread(create_app(store, TOKEN), free_port()) as base:
        def cli(*args: str):  # the real command, in this process, against the real server over HTTP
            return CliRunner().invoke(registry_group, ["status", "--registry", base, "--token", TOKEN, *args])

        one = cli("a", "deprecated", "--version", "1.0.0", "-m", "use 1.1")
        assert one.exit_code == 0 and one.output.split() == ["deprecated", "io.mcpworld/a", "1.0.0"], one.output
        every = cli("a", "deleted")
        assert every.exit_code == 0 and len(every.output.splitlines()) == 2
        missing = cli("nope", "active")
        assert missing.exit_code == 1 and "404: no server 'io.mcpworld/nope'" in missing.output
    official = store.get("io.mcpworld/a", "1.0.0", include_deleted=True)["_meta"][OFFICIAL]
    assert official["status"] == "deleted" and "statusMessage" not in official


def test_cli_list_shows_a_deprecated_server_as_deprecated(store: RegistryStore) -> None:
    """A deprecated server is still listed (the official API's rule), and `registry list` says so, with the
    maintainer's message (it showed it like any other, issue 35)."""
    from click.testing import CliRunner

    from mcpworld.core.serving import serve_in_thread
    from mcpworld.core.testing import free_port
    from mcpworld.registry.cli import registry_group

    store.publish(record("a", "1.0.0"))
    store.publish(record("b", "1.0.0"))
    store.set_status("io.mcpworld/a", "1.0.0", "deprecated", "use b")
    with serve_in_thread(create_app(store, TOKEN), free_port()) as base:
        listed = CliRunner().invoke(registry_group, ["list", "--registry", base])
    assert listed.exit_code == 0, listed.output
    rows = {line.split()[1]: line for line in listed.output.splitlines() if "io.mcpworld/" in line}
    assert "deprecated (use b)" in rows["io.mcpworld/a"]
    assert "active" in rows["io.mcpworld/b"] and "deprecated" not in rows["io.mcpworld/b"]
