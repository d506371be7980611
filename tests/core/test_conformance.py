"""The official MCP conformance suite (npm `@modelcontextprotocol/conformance`) against real mcpworld servers.

Runs `conformance server --url …` for both protocol versions (2025-11-25 with sessions, 2026-07-28 sessionless)
against a world endpoint of `mcpworld serve worlds` (the `worlds_url` fixture) and the SWE endpoint of
`mcpworld serve swe`: every mcpworld server is hosted on the one Streamable HTTP path
(`mcpworld.core.episode_server.mount`), so both must pass. The suite is installed once into a cache folder
(`$MCPWORLD_CONFORMANCE_DIR`, default `~/.cache/mcpworld/conformance/<version>`), with Node 22 from npm when the
system's is older; the tests skip, saying why, when npm is absent or the package cannot be fetched.

Many scenarios exercise the suite's own reference server (tools named `test_image_content`, prompts named
`test_simple_prompt`, resources under `test://`, sampling/elicitation round trips, logging and
subscriptions, which mcpworld servers do not offer). Those are the suite's expected-failures baseline below, each
with its reason; every other check must pass, and a baselined one that starts passing fails the run (the
CLI's stale-baseline rule), so the list stays honest.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from mcpworld.core.testing import free_port, mcpworld_cmd, wait_http

VERSION = "0.2.0-alpha.12"  # the first line of releases with 2026-07-28 scenarios (0.1.x stops at 2025-11-25)
CACHE = Path(os.environ.get("MCPWORLD_CONFORMANCE_DIR")
             or Path.home() / ".cache" / "mcpworld" / "conformance" / VERSION)

# Scenarios that need the suite's reference server's fixtures or capabilities mcpworld servers do not offer.
FIXTURES = {
    "completion-complete": "completes a reference-server prompt argument; mcpworld servers offer no completions",
    "tools-call-image": "calls the reference tool test_image_content",
    "tools-call-audio": "calls the reference tool test_audio_content",
    "tools-call-embedded-resource": "calls the reference tool test_embedded_resource",
    "tools-call-mixed-content": "calls the reference tool test_multiple_content_types",
    "tools-call-with-progress": "calls the reference tool test_tool_with_progress",
    "resources-read-text": "reads test://static-text",
    "resources-read-binary": "reads test://static-binary",
    "resources-templates-read": "reads test://template/123/data",
    "prompts-get-simple": "gets the reference prompt test_simple_prompt",
    "prompts-get-with-args": "gets the reference prompt test_prompt_with_arguments",
    "prompts-get-embedded-resource": "gets the reference prompt test_prompt_with_embedded_resource",
    "prompts-get-with-image": "gets the reference prompt test_prompt_with_image",
}
LEGACY_FIXTURES = {
    "logging-set-level": "logging (deprecated at 2026-07-28) is not a capability mcpworld servers declare",
    "tools-call-with-logging": "calls the reference tool test_tool_with_logging",
    "tools-call-sampling": "calls the reference tool test_sampling (sampling round trip)",
    "tools-call-elicitation": "calls the reference tool test_elicitation",
    "elicitation-sep1034-defaults": "calls the reference tool test_elicitation_sep1034_defaults",
    "elicitation-sep1330-enums": "calls the reference tool test_elicitation_sep1330_enums",
    "resources-subscribe": "subscriptions are not a capability mcpworld servers declare",
    "resources-unsubscribe": "subscriptions are not a capability mcpworld servers declare",
}
_DIAGNOSTIC = "needs the suite's diagnostic tool test_missing_capability"
STATELESS_FIXTURES = {  # per check: the rest of server-stateless's 20+ checks must pass
    "server-stateless:sep-2575-server-rejects-undeclared-capability": _DIAGNOSTIC,
    "server-stateless:sep-2575-missing-capability-http-400": _DIAGNOSTIC,
}
# 2026-07-28 scenarios outside the CLI's default ("active") suite, run one by one.
MODERN_EXTRA = ["server-stateless", "caching", "http-header-validation", "sep-2164-resource-not-found"]


def _serve(*args: str, home: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """`mcpworld <args> --port P` as a real process with its own MCPWORLD_HOME, once /healthz answers."""
    port = free_port()
    proc = subprocess.Popen(mcpworld_cmd(*args, "--port", str(port)),
                            env={**os.environ, "MCPWORLD_HOME": str(home), **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + "/healthz", proc)
    except BaseException:
        proc.kill()
        raise
    return proc, base


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=20)


def _node_major(node: str) -> int:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    match = re.match(r"v(\d+)", out.strip())
    return int(match.group(1)) if match else 0


@pytest.fixture(scope="session")
def conformance() -> list[str]:
    """The command that runs the suite's CLI, installing it into the cache folder on first use."""
    entry = CACHE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    local_node = CACHE / "node_modules" / "node" / "bin" / "node"
    system_node = shutil.which("node")
    if not entry.exists() or not (local_node.exists() or (system_node and _node_major(system_node) >= 22)):
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: cannot fetch @modelcontextprotocol/conformance")
        CACHE.mkdir(parents=True, exist_ok=True)
        packages = [f"@modelcontextprotocol/conformance@{VERSION}"]
        if not system_node or _node_major(system_node) < 22:
            packages.append("node@22")  # the suite needs Node >= 22 (fs.globSync)
        try:
            done = subprocess.run([npm, "install", "--prefix", str(CACHE), "--no-audit", "--no-fund", *packages],
                                  capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            pytest.skip("npm install of @modelcontextprotocol/conformance timed out")
        if done.returncode != 0 or not entry.exists():
            pytest.skip(f"could not fetch @modelcontextprotocol/conformance@{VERSION}: {done.stderr[-500:]}")
    node = str(local_node) if local_node.exists() else system_node
    assert node is not None
    return [node, str(entry)]


def _run(cli: list[str], url: str, spec: str, out: Path, baseline: dict[str, str],
         scenario: str | None = None) -> tuple[int, list[dict], str]:
    """One CLI run with its baseline; returns its exit code, every check it recorded, and its output."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [*cli, "server", "--url", url, "--spec-version", spec, "-o", str(out / "results")]
    if baseline:
        baseline_file = out / "baseline.yml"
        baseline_file.write_text("server:\n" + "".join(f"  - {name}  # {why}\n" for name, why in baseline.items()))
        cmd += ["--expected-failures", str(baseline_file)]
    if scenario:
        cmd += ["--scenario", scenario]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=out)
    checks = []
    for path in sorted((out / "results").glob("*/checks.json")):
        scenario_name = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", path.parent.name)
        checks += [{**c, "scenario": scenario_name} for c in json.loads(path.read_text())]
    return done.returncode, checks, re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)


def _unexpected(checks: list[dict], baseline: dict[str, str]) -> list[str]:
    return [f"{c['scenario']}:{c['id']}: {c.get('errorMessage') or c.get('description')}" for c in checks
            if c.get("status") == "FAILURE" and c["scenario"] not in baseline
            and f"{c['scenario']}:{c['id']}" not in baseline]


@pytest.fixture(scope="module")
def swe_base(conformance: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mcpworld serve swe` (the shipped instances) as a real process; its base URL. Started only when the suite
    is there (it asks for `conformance` first, which skips otherwise)."""
    proc, base = _serve("serve", "swe", "--warm", "0", home=tmp_path_factory.mktemp("swe-conformance-home"))
    yield base
    _stop(proc)


@pytest.fixture(params=["world", "swe"])
def endpoint(request: pytest.FixtureRequest) -> str:
    """The MCP endpoint under test: a world's (`/worlds/airline/mcp`) or the SWE sandbox's (`/swe/mcp`)."""
    if request.param == "world":
        return f"{request.getfixturevalue('worlds_url')}/worlds/airline/mcp"
    return f"{request.getfixturevalue('swe_base')}/swe/mcp"


def test_conformance_2025_11_25(conformance: list[str], endpoint: str, tmp_path: Path) -> None:
    baseline = {**FIXTURES, **LEGACY_FIXTURES}
    rc, checks, output = _run(conformance, endpoint, "2025-11-25", tmp_path, baseline)
    assert not _unexpected(checks, baseline), output[-4000:]
    assert rc == 0, output[-4000:]  # also: no baselined scenario started passing
    passed = {c["scenario"] for c in checks if c.get("status") == "SUCCESS"}
    assert {"server-initialize", "server-session-lifecycle", "ping", "tools-list", "resources-list",
            "prompts-list", "dns-rebinding-protection"} <= passed


def test_conformance_2026_07_28(conformance: list[str], endpoint: str, tmp_path: Path) -> None:
    rc, checks, output = _run(conformance, endpoint, "2026-07-28", tmp_path / "active", FIXTURES)
    assert not _unexpected(checks, FIXTURES), output[-4000:]
    assert rc == 0, output[-4000:]
    for scenario in MODERN_EXTRA:
        baseline = {k: v for k, v in STATELESS_FIXTURES.items() if k.startswith(scenario + ":")}
        rc, more, output = _run(conformance, endpoint, "2026-07-28", tmp_path / scenario, baseline, scenario)
        assert more, f"{scenario} recorded no checks: {output[-2000:]}"
        assert not _unexpected(more, baseline), output[-4000:]
        assert rc == 0, output[-4000:]
        checks += more
    by_id = {c["id"]: c["status"] for c in checks}
    assert by_id["sep-2549-resources-templates-list-caching-hints"] == "SUCCESS"  # resources/templates/list
    assert by_id["sep-2575-server-implements-discover"] == "SUCCESS"  # server/discover
    assert by_id["sep-2164-data-uri"] == "SUCCESS"  # a missing resource's error names its uri
    assert sum(c["scenario"] == "server-stateless" and c["status"] == "SUCCESS" for c in checks) >= 20


# -- without the suite: the methods every endpoint must answer on each version it speaks ----------------------

@pytest.fixture(scope="module")
def every_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Every kind of MCP endpoint mcpworld serves, each on its real process: `up` (registry, a world, SWE, SWT; the
    SWT model URL is never called by the methods tested) and `serve world-model swr`."""
    model_url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: these methods never reach the model
    up, up_base = _serve("up", "--only", "airline", home=tmp_path_factory.mktemp("up-home"),
                         env={"MCPWORLD_SWT_URL": model_url, "MCPWORLD_SWR_URL": ""})
    try:
        swr, swr_base = _serve("serve", "world-model", "swr", "--url", model_url,
                               home=tmp_path_factory.mktemp("swr-home"))
    except BaseException:
        _stop(up)
        raise
    yield {"registry": f"{up_base}/registry/mcp", "world": f"{up_base}/worlds/airline/mcp",
           "swe": f"{up_base}/swe/mcp", "swt": f"{up_base}/world-models/swt/mcp",
           "swr": f"{swr_base}/world-models/swr/mcp"}
    _stop(swr)
    _stop(up)


@pytest.mark.anyio
@pytest.mark.parametrize("which", ["registry", "world", "swe", "swt", "swr"])
async def test_every_endpoint_answers_ping_discover_and_templates_on_both_versions(
        every_endpoint: dict[str, str], which: str) -> None:
    """2025-11-25 (a session): `ping` and `resources/templates/list`; 2026-07-28 (sessionless): `server/discover`
    (which replaced ping) and `resources/templates/list`; and on both, the server's own tools."""
    url = every_endpoint[which]
    with anyio.fail_after(60):
        async with Client(url, mode="legacy") as legacy:
            assert legacy.protocol_version == "2025-11-25"
            await legacy.session.send_ping()  # (the Client's own wrapper warns: 2026-07-28 removed ping)
            legacy_templates = (await legacy.list_resource_templates()).resource_templates
            legacy_tools = {t.name for t in (await legacy.list_tools()).tools}
        async with Client(url) as modern:
            assert modern.protocol_version == "2026-07-28"
            discovered = await modern.session.discover()
            assert "2026-07-28" in discovered.supported_versions and discovered.capabilities.tools is not None
            modern_templates = (await modern.list_resource_templates()).resource_templates
            modern_tools = {t.name for t in (await modern.list_tools()).tools}
    assert legacy_templates == modern_templates
    assert bool(legacy_templates) == (which == "world")  # a world's table template; the others have no resources
    assert legacy_tools == modern_tools and {"registry": "search_servers", "world": "get_flight", "swe": "bash",
                                             "swt": "simulate", "swr": "score"}[which] in legacy_tools
