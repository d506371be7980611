"""Client configs from the registry: one entry per server (qualified where short names collide), pinned package
launches, `--interactive` where a person plays, and files MCP Inspector's `--config` loads."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from mcpworld.core.paths import home
from mcpworld.core.serving import serve_in_thread
from mcpworld.core.testing import free_port
from mcpworld.registry.api import create_app
from mcpworld.registry.cli import registry_group
from mcpworld.registry.export import MCP_REMOTE, export, package_command
from mcpworld.registry.records import local_record
from mcpworld.registry.store import RegistryStore

INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"  # what npm installs on Node 20

# The shape MCP Inspector's `--config` reads (its CLI's loadConfigFile: `mcpServers[name]`, then command/args/env
# for stdio, type + url for HTTP in Inspector 2.x).
INSPECTOR_CONFIG = {
    "type": "object", "required": ["mcpServers"],
    "properties": {"mcpServers": {"type": "object", "minProperties": 1, "additionalProperties": {"oneOf": [
        {"type": "object", "required": ["command"], "additionalProperties": False,
         "properties": {"type": {"const": "stdio"}, "command": {"type": "string", "minLength": 1},
                        "args": {"type": "array", "items": {"type": "string"}},
                        "env": {"type": "object", "additionalProperties": {"type": "string"}}}},
        {"type": "object", "required": ["type", "url"], "additionalProperties": False,
         "properties": {"type": {"enum": ["sse", "streamable-http"]}, "url": {"type": "string"}}},
    ]}}},
}


def world(name: str, namespace: str = "io.mcpworld") -> dict:
    return local_record(f"{namespace}/{name}", f"The {name} world", "world",
                        url=f"http://127.0.0.1:9/worlds/{name}/mcp", stdio_args=["serve", "world", name, "--stdio"])


def remote(name: str) -> dict:
    return local_record(name, "Remote only", "external", url="http://127.0.0.1:9/mcp")


def entries(config: dict, fmt: str) -> dict:
    return config["servers"] if fmt == "vscode" else config["mcpServers"]


@pytest.mark.parametrize("fmt", ["claude-desktop", "claude-code", "vscode", "cursor", "inspector"])
def test_every_server_gets_its_entry(fmt: str) -> None:
    got = entries(json.loads(json.dumps(export([world("a"), remote("io.example/remote-only")], fmt))), fmt)
    assert set(got) == {"a", "remote-only"}
    if fmt in ("claude-desktop", "inspector"):  # launched here, over stdio
        assert got["a"]["command"] == sys.executable
        assert got["a"]["args"][:6] == ["-m", "mcpworld", "serve", "world", "a", "--stdio"]
        assert got["a"]["env"] == {"MCPWORLD_HOME": str(home())}  # a client starts it with its own environment
    if fmt == "claude-desktop":
        assert got["a"]["args"][-1] == "--interactive"  # a person plays in Claude Desktop: start_task / check_task
        assert got["remote-only"] == {"command": "npx", "args": ["-y", MCP_REMOTE, "http://127.0.0.1:9/mcp"]}
    elif fmt == "cursor":
        assert got["a"] == {"url": "http://127.0.0.1:9/worlds/a/mcp"}
    elif fmt == "inspector":
        assert got["remote-only"] == {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp"}
    else:
        assert got["a"] == {"type": "http", "url": "http://127.0.0.1:9/worlds/a/mcp"}


def test_servers_whose_names_end_alike_keep_separate_qualified_entries() -> None:
    docs = [world("weather"), world("weather", "io.example"), world("airline")]
    for fmt in ("claude-desktop", "claude-code", "vscode", "cursor", "inspector"):
        keys = set(entries(export(docs, fmt), fmt))  # type: ignore[arg-type]
        assert keys == {"io-mcpworld-weather", "io-example-weather", "airline"}
        assert all(re.fullmatch(r"[a-z0-9_-]+", k) for k in keys)  # no dots: clients build tool names from keys


def test_packages_launch_pinned_and_without_prompts() -> None:
    def pkg(kind: str, ident: str, version: str | None = "1.2.3", **extra: object) -> dict:
        return {"registryType": kind, "identifier": ident, "transport": {"type": "stdio"},
                **({"version": version} if version else {}), **extra}

    assert package_command(pkg("npm", "@scope/server")) == {"command": "npx", "args": ["-y", "@scope/server@1.2.3"]}
    assert package_command(pkg("pypi", "mcp-server-time")) == {"command": "uvx", "args": ["mcp-server-time@1.2.3"]}
    assert package_command(pkg("oci", "docker.io/acme/srv")) == \
        {"command": "docker", "args": ["run", "-i", "--rm", "docker.io/acme/srv:1.2.3"]}
    assert package_command(pkg("oci", "docker.io/acme/srv:2.0", version=None))["args"][-1] == "docker.io/acme/srv:2.0"
    named = pkg("npm", "srv", packageArguments=[{"type": "named", "name": "--port", "value": "9"}],
                environmentVariables=[{"name": "API_KEY", "isSecret": True}])
    assert package_command(named) == {"command": "npx", "args": ["-y", "srv@1.2.3", "--port", "9"],
                                      "env": {"API_KEY": ""}}
    with pytest.raises(ValueError, match="not allowed"):
        package_command(pkg("npm", "srv", runtimeHint="bash"))


@pytest.mark.parametrize("fmt", ["inspector", "claude-desktop"])
def test_exports_have_the_shape_inspector_loads(fmt: str) -> None:
    package = {"registryType": "npm", "identifier": "srv", "version": "1.0.0", "transport": {"type": "stdio"}}
    npm = {"name": "io.example/npm", "description": "x", "version": "1.0.0", "packages": [package]}
    config = export([world("a"), remote("io.example/r"), npm], fmt)  # type: ignore[arg-type]
    jsonschema.validate(config, INSPECTOR_CONFIG)


def test_cli_count_matches_the_entries_written(tmp_path: Path) -> None:
    store = RegistryStore(f"sqlite:///{tmp_path / 'r.db'}")
    for doc in (world("weather"), world("weather", "io.example"), world("airline")):
        store.publish(doc)
    out = tmp_path / ".mcp.json"
    out.write_text(json.dumps({"mcpServers": {"mine": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}}))
    with serve_in_thread(create_app(store, "t"), free_port()) as base:  # the real command, over real HTTP
        result = CliRunner().invoke(registry_group, ["export", "--registry", base, "--format", "claude-code",
                                                     "-o", str(out)])
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())["mcpServers"]
    assert set(written) == {"mine", "io-mcpworld-weather", "io-example-weather", "airline"}  # theirs kept
    assert "wrote 3 server(s)" in result.output


def test_inspector_cli_lists_tools_through_the_exported_config(tmp_path: Path) -> None:
    """MCP Inspector itself (the npm package, from the npm cache only) starts the exported stdio entry."""
    if shutil.which("npx") is None:
        pytest.skip("npx (Node.js) is not installed")
    config = tmp_path / "inspector.json"
    config.write_text(json.dumps(export([world("airline")], "claude-desktop")))
    run = subprocess.run(["npx", "--offline", "--yes", INSPECTOR, "--cli", "--config", str(config), "--server",
                          "airline", "--method", "tools/list"], capture_output=True, text=True, timeout=180)
    if "ENOTCACHED" in run.stderr:
        pytest.skip(f"{INSPECTOR} is not in the npm cache (npm cache add {INSPECTOR} puts it there)")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    names = {t["name"] for t in json.loads(run.stdout)["tools"]}
    assert {"find_customer", "start_task", "check_task"} <= names  # --interactive: a person can play


def test_an_export_carries_a_custom_data_home_to_the_servers_it_launches(tmp_path: Path, monkeypatch) -> None:
    """Claude Desktop starts a stdio server with its own environment: a world installed under a custom
    MCPWORLD_HOME was not found there (issue 35)."""
    monkeypatch.setenv("MCPWORLD_HOME", str(tmp_path / "elsewhere"))
    entry = export([world("a")], "claude-desktop")["mcpServers"]["a"]
    assert entry["env"] == {"MCPWORLD_HOME": str(tmp_path / "elsewhere")}


def test_a_vscode_config_with_comments_and_trailing_commas_is_merged(tmp_path: Path) -> None:
    """VS Code's mcp.json is JSON with comments; merging into one was refused as "not JSON" (issue 35)."""
    store = RegistryStore(f"sqlite:///{tmp_path / 'r.db'}")
    store.publish(world("airline"))
    out = tmp_path / "mcp.json"
    out.write_text('{\n  // my own server\n  "servers": {\n    "mine": {"type": "http", "url": "http://x/mcp"}, '
                   '/* keep */\n  },\n  "inputs": [],\n}\n')
    with serve_in_thread(create_app(store, "t"), free_port()) as base:
        result = CliRunner().invoke(registry_group, ["export", "--registry", base, "--format", "vscode",
                                                     "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert set(json.loads(out.read_text())["servers"]) == {"mine", "airline"}
    assert "comments" in result.output  # said: JSON keeps none of them
    assert "// my own server" in (tmp_path / "mcp.json.bak").read_text()  # the original is kept beside it
