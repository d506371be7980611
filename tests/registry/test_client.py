"""The one registry client (`mcpworld.registry.client`) against a real `mcpworld registry serve`: every page of a
listing, records by name, writes with the token, and errors that say what to do next."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http
from mcpworld.registry.cli import registry_group
from mcpworld.registry.client import AsyncRegistryClient, RegistryClient, RegistryError
from mcpworld.registry.connect import fetch_record
from mcpworld.registry.records import local_record
from mcpworld.tui.registry import RegistryError as ScreenError
from mcpworld.tui.registry import fetch_servers

TOKEN = os.environ["MCPWORLD_REGISTRY_TOKEN"]  # conftest sets it for every server the tests start
COUNT = 130  # more than one page of 100


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real registry process holding COUNT world records, published through the client."""
    port = free_port()
    env = {**os.environ, "MCPWORLD_HOME": str(tmp_path_factory.mktemp("registry-home"))}
    proc = subprocess.Popen(mcpworld_cmd("registry", "serve", "--port", str(port)), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/healthz", proc)
        with RegistryClient(base, token=TOKEN) as client:
            for i in range(COUNT):
                client.request("POST", "/v0/publish", json=local_record(
                    f"w{i:03d}", f"World number {i}", "world", version="1.0.0",
                    url=f"http://127.0.0.1:1/worlds/w{i:03d}/mcp"))
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_every_page_is_followed_sync_and_async(registry: str) -> None:
    with RegistryClient(registry) as client:
        names = [item["server"]["name"] for item in client.servers(page_size=40)]
        assert client.record("w007")["name"] == "io.mcpworld/w007"
        assert [i["server"]["name"] for i in client.servers(search="w012")] == ["io.mcpworld/w012"]

    async def listed() -> list[str]:
        async with AsyncRegistryClient(registry) as client:
            return [item["server"]["name"] async for item in client.servers(page_size=40)]

    assert len(names) == COUNT and len(set(names)) == COUNT, "no record lost or repeated across 4 pages"
    assert anyio.run(listed) == names
    assert anyio.run(fetch_record, "w129", registry)["name"] == "io.mcpworld/w129"


def test_every_consumer_lists_through_it(registry: str) -> None:
    assert len(fetch_servers(registry, page_size=50)) == COUNT  # the TUI's Servers screen
    listed = CliRunner().invoke(registry_group, ["list", "--registry", registry, "--json"])
    assert listed.exit_code == 0, listed.output
    assert listed.output.count('"io.mcpworld/w') >= COUNT


def test_errors_say_what_was_wrong_and_what_to_do(registry: str, tmp_path: Path) -> None:
    with RegistryClient(registry) as client:
        with pytest.raises(RegistryError, match="no server named 'io.mcpworld/nope'.*mcpworld registry list"):
            client.record("nope")
        with pytest.raises(RegistryError) as refused:  # a write without the token
            client.request("POST", "/v0/publish", json=local_record("x", "X", "world", url="http://127.0.0.1:1/x"))
        assert refused.value.status == 401 and "answered 401" in str(refused.value)
        assert [i["server"]["name"] for i in client.servers(search="x-does-not-exist")] == []

    nobody = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RegistryError, match="unreachable.*mcpworld up"):
        with RegistryClient(nobody) as client:
            client.record("airline")
    with pytest.raises(ScreenError, match="unreachable"):
        fetch_servers(nobody)
    cli = CliRunner().invoke(registry_group, ["list", "--registry", nobody])
    assert cli.exit_code == 1 and "unreachable" in cli.output
