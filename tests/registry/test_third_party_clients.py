"""Third-party registry clients from PyPI against a real running registry (`mcpworld registry serve`).

- `mcp-registry-sdk` (typed async client of the official API; strict pydantic models of every response): reads,
  publishes, changes status. It needs Python >= 3.13, so it lives in its own environment: `.ci/run` makes
  `.venv/registry-sdk` (or set MCPWORLD_REGISTRY_SDK_PYTHON to an interpreter that has it).
- `mcp-registry-cli` (in the test extra): lists, searches, reads versions.
- `mcp-publisher`'s requests: `POST /v0/auth/none` for an anonymous token, then publish with it.

Each runs against `mcpworld registry serve` and against `mcpworld up`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http

LOCAL = "http://127.0.0.1"  # a loopback server answers only to loopback names (DNS rebinding)

TOKEN = os.environ["MCPWORLD_REGISTRY_TOKEN"]  # conftest sets it for every server the tests start


def sdk_python() -> Path | None:
    given = os.environ.get("MCPWORLD_REGISTRY_SDK_PYTHON")
    path = Path(given) if given else Path(sys.prefix) / "registry-sdk" / "bin" / "python"
    return path if path.is_file() else None


@pytest.fixture(scope="module", params=["registry serve", "up"])
def registry(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real registry process with the airline world's record: `mcpworld registry serve --anonymous` (the record
    published by hand), and `mcpworld up` (which registers the world it serves)."""
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp_path_factory.mktemp("registry-home")),
           "MCPWORLD_REGISTRY_ANONYMOUS": "1"}
    args = ["registry", "serve"] if request.param == "registry serve" else ["up", "--only", "airline", "--no-swe"]
    proc = subprocess.Popen(mcpworld_cmd(*args, "--port", str(port)), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/healthz", proc)
        if request.param == "registry serve":
            from mcpworld.registry.records import local_record

            doc = local_record("airline", "An airline customer desk", "world", version="1.0.0",
                               url=f"{base}/worlds/airline/mcp", stdio_args=["serve", "world", "airline", "--stdio"])
            published = httpx.post(base + "/v0/publish", json=doc, headers={"Authorization": f"Bearer {TOKEN}"})
            assert published.is_success, published.text
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


SDK_SCRIPT = r'''
import asyncio, json, sys
from mcpreg import HttpError, PublisherClient, RegistryClient, RegistrySettings, HttpSettings, ServerDetail


base, token = sys.argv[1], sys.argv[2]
settings = RegistrySettings(base_url=base, http=HttpSettings(max_attempts=1))
out = {}

async def main():
    async with RegistryClient(settings) as reader:
        out["listed"] = [e.server.name async for e in reader.iter_servers(limit=1)]
        latest = await reader.get_version("io.mcpworld/airline")
        out["latest_status"] = str(latest.status)
    detail = ServerDetail.model_validate({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": "io.example/weather", "description": "Forecasts", "version": "1.0.0",
        "packages": [{"registryType": "oci", "identifier": "docker.io/example/weather:1.0.0",
                      "transport": {"type": "stdio"}}]})
    async with PublisherClient({"Authorization": f"Bearer {token}"}, settings) as pub:
        published = await pub.publish(detail)
        out["published_latest"] = published.meta.official.is_latest
        await pub.publish(detail.model_copy(update={"version": "1.1.0"}))
        one = await pub.set_version_status("io.example/weather", "1.0.0", "deprecated", status_message="use 1.1")
        out["one"] = [str(one.status), one.meta.official.status_message, bool(one.meta.official.status_changed_at)]
        every = await pub.set_status("io.example/weather", "deleted")
        out["every"] = [every.updated_count, sorted(s.server.version for s in every.servers)]
        try:
            await pub.update_version("io.example/weather", "1.1.0", detail)
        except HttpError as exc:
            out["update"] = exc.status_code
    async with RegistryClient(settings) as reader:
        try:
            await reader.list_versions("io.example/weather")
        except HttpError as exc:
            out["hidden"] = exc.status_code
        shown = await reader.list_versions("io.example/weather", include_deleted=True)
        out["with_deleted"] = sorted(str(e.status) for e in shown.servers)
    async with PublisherClient({"Authorization": "Bearer wrong"}, settings) as pub:
        try:
            await pub.publish(detail.model_copy(update={"version": "2.0.0"}))
        except HttpError as exc:
            out["wrong_token"] = [exc.status_code, str(exc)]

asyncio.run(main())
print(json.dumps(out))
'''


def test_registry_sdk_reads_publishes_and_changes_status(registry: str, tmp_path: Path) -> None:
    python = sdk_python()
    if python is None:
        pytest.skip("mcp-registry-sdk needs Python >= 3.13: .ci/run installs it into .venv/registry-sdk "
                    "(or set MCPWORLD_REGISTRY_SDK_PYTHON)")
    script = tmp_path / "sdk.py"
    script.write_text(SDK_SCRIPT)
    run = subprocess.run([str(python), str(script), registry, TOKEN], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["listed"] == ["io.mcpworld/airline"] and out["latest_status"] == "active"
    assert out["published_latest"] is True
    assert out["one"] == ["deprecated", "use 1.1", True]
    assert out["every"] == [2, ["1.0.0", "1.1.0"]]
    assert out["update"] == 501
    assert out["hidden"] == 404 and out["with_deleted"] == ["deleted", "deleted"]
    assert out["wrong_token"][0] == 401 and "wrong registry token" in out["wrong_token"][1]


def test_registry_cli_lists_searches_and_reads_versions(registry: str) -> None:
    from mcp_registry_cli.api import MCPRegistryAPI

    api = MCPRegistryAPI()
    api.BASE_URL = registry  # its one setting: the official instance by default
    listed = api.list_servers(limit=30)
    names = [s.name for s in listed["servers"]]
    assert "io.mcpworld/airline" in names and listed["count"] == len(names)
    assert [s.status for s in listed["servers"] if s.name == "io.mcpworld/airline"] == ["active"]
    found = api.search_servers("airline")["servers"]
    assert [s.name for s in found] == ["io.mcpworld/airline"]
    versions = api.get_server_versions("io.mcpworld/airline")
    assert len(versions) == 1 and versions[0].version


def test_mcp_publisher_flow_anonymous_token_then_publish(registry: str) -> None:
    """What `mcp-publisher login none` then `mcp-publisher publish` send to a registry."""
    login = httpx.post(registry + "/v0/auth/none").json()
    anon = {"Authorization": f"Bearer {login['registry_token']}"}
    assert isinstance(login["expires_at"], int)
    doc = {"name": "io.modelcontextprotocol.anonymous/clock", "description": "What time is it", "version": "1.0.0",
           "remotes": [{"type": "streamable-http", "url": "https://clock.example/mcp"}]}
    checked = httpx.post(registry + "/v0/validate", json=doc).json()
    assert checked == {"valid": True, "issues": []}
    assert httpx.post(registry + "/v0.1/publish", json=doc, headers=anon).status_code == 200
    elsewhere = httpx.post(registry + "/v0/publish", json={**doc, "name": "io.mcpworld/clock"}, headers=anon)
    assert elsewhere.status_code == 403 and "io.modelcontextprotocol.anonymous/" in elsewhere.json()["error"]
    assert httpx.get(registry + "/v0/servers", params={"search": "anonymous/clock"}).json()["metadata"]["count"] == 1


def test_anonymous_tokens_are_off_unless_asked_for(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from mcpworld.registry.api import create_app
    from mcpworld.registry.store import RegistryStore

    api = TestClient(create_app(RegistryStore(f"sqlite:///{tmp_path / 'r.db'}"), "t", anonymous=False),
                     base_url=LOCAL)
    refused = api.post("/v0/auth/none")
    assert refused.status_code == 403 and "anonymous publishing is off" in refused.json()["error"]
