"""SWT and SWR as MCP servers: in memory through a real client, and mounted over Streamable HTTP the way
`mcpworld up` mounts them, with registry records of kind world-model."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from starlette.applications import Starlette

from mcpworld.core.llm_replay import ReplayLLM, serve
from mcpworld.core.serving import serve_in_thread
from mcpworld.core.testing import free_port
from mcpworld.core.tools import tool
from mcpworld.registry.records import local_stdio_args, record_kind, validate_record
from mcpworld.swe.builder import build_instances
from mcpworld.swe.instances import Instance, load_instances
from mcpworld.worldmodels.llm_pool import ModelPool
from mcpworld.worldmodels.servers import (
    ModelServer,
    SWRServer,
    SWTServer,
    WorldModelConfig,
    running_world_models,
    world_model_servers,
)
from mcpworld.worldmodels.swr import SWR, SWRScorer
from mcpworld.worldmodels.swt import SWT
from mcpworld.worldmodels.testing import SequencedReplay, swr_reply, swt_reply

pytestmark = pytest.mark.anyio
IID = "mcpworld__minicalc-1"


@pytest.fixture(scope="module")
def instances_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_instances(tmp_path_factory.mktemp("swe-built"))


@pytest.fixture
def instances(instances_file: Path) -> list[Instance]:
    return load_instances(instances_file)


async def test_swt_server_simulates_with_the_given_patch(instances: list[Instance]) -> None:
    gold = next(i for i in instances if i.instance_id == IID).patch
    llm = ReplayLLM({"```bash\npython -m pytest -q": [swt_reply("5 passed\n", "", 0)],
                     "```bash\npython broken.py": [{"role": "assistant", "content": "no idea"}]})
    with serve(llm, free_port()) as url:
        srv = SWTServer(SWT(ModelPool.from_urls(url, "swt", retries=0)), instances)
        try:
            async with Client(srv.server) as client:
                assert [t.name for t in (await client.list_tools()).tools] == ["simulate"]
                ok = await client.call_tool("simulate", {"instance_id": IID, "command": "python -m pytest -q",
                                                         "patch": gold})
                assert not ok.is_error
                assert ok.structured_content == {"stdout": "5 passed\n", "stderr": "", "exit_code": 0}
                assert ok.content[0].text == "5 passed\n[exit code: 0]"
                failed = await client.call_tool("simulate", {"instance_id": IID, "command": "python broken.py"})
                assert failed.is_error and "simulator failed" in failed.content[0].text
                unknown = await client.call_tool("simulate", {"instance_id": "nope", "command": "ls"})
                assert unknown.is_error and "unknown instance 'nope'" in unknown.content[0].text
                bad = await client.call_tool("simulate", {"instance_id": IID})
                assert bad.is_error and "invalid arguments for simulate: command: Field required" in bad.content[0].text
                junk = await client.call_tool("simulate", {"instance_id": IID, "command": "ls",
                                                           "patch": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-q\n+r\n"})
                assert junk.is_error and "does not apply" in junk.content[0].text
        finally:
            srv.close()
    prompt = llm.requests[0]["messages"][1]["content"]
    assert "+        return (items[middle - 1] + items[middle]) / 2" in prompt  # the patch is the workspace


async def test_swr_server_scores_patches(instances: list[Instance]) -> None:
    gold = next(i for i in instances if i.instance_id == IID).patch
    good = SequencedReplay({IID: [swr_reply(1), swr_reply(0)]})
    broken = SequencedReplay({IID: [{"role": "assistant", "content": "hmm"}]})
    with serve(good, free_port()) as url, serve(broken, free_port()) as url_broken:
        srv = SWRServer(SWRScorer.of(SWR(ModelPool.from_urls(url, "swr", retries=0)), instances))
        bad = SWRServer(SWRScorer.of(SWR(ModelPool.from_urls(url_broken, "swr", retries=0)), instances))
        try:
            async with Client(srv.server) as client, Client(bad.server) as bad_client:
                assert [t.name for t in (await client.list_tools()).tools] == ["score"]
                scored = await client.call_tool("score", {"instance_id": IID, "patch": gold, "k": 2})
                assert not scored.is_error and scored.structured_content["score"] == 0.5
                assert scored.structured_content["valid"] == 2 and scored.content[0].text.startswith("score 0.500")
                empty = await client.call_tool("score", {"instance_id": IID, "patch": ""})
                assert empty.structured_content["status"] == "empty_patch" and empty.structured_content["score"] == 0
                invalid = await bad_client.call_tool("score", {"instance_id": IID, "patch": gold})
                assert invalid.is_error and invalid.structured_content["status"] == "invalid"
                assert invalid.structured_content["score"] is None and invalid.structured_content["invalid"] == 3
        finally:
            srv.close()
            bad.close()
    assert len(good.requests) == 2


def test_world_model_servers_follow_the_environment(monkeypatch: pytest.MonkeyPatch, instances_file: Path) -> None:
    monkeypatch.delenv("MCPWORLD_SWT_URL", raising=False)
    monkeypatch.delenv("MCPWORLD_SWR_URL", raising=False)
    assert world_model_servers(WorldModelConfig.from_env()) == []
    monkeypatch.setenv("MCPWORLD_SWR_URL", "http://gpu1:8002/v1, http://gpu2:8002/v1")
    monkeypatch.setenv("MCPWORLD_SWE_INSTANCES", str(instances_file))
    only_swr = world_model_servers()
    assert [m.name for m in only_swr] == ["swr"]
    assert only_swr[0].server.name == "io.mcpworld/swr"
    config = WorldModelConfig.from_env(swt_url="http://127.0.0.1:8001/v1")
    assert len(config.pool("swr").endpoints) == 2  # type: ignore[union-attr]
    both = world_model_servers(config)
    assert [(m.name, m.path) for m in both] == [("swt", "/world-models/swt/mcp"), ("swr", "/world-models/swr/mcp")]
    for m in both + only_swr:
        record = validate_record(m.record("http://127.0.0.1:8765"))
        assert record_kind(record) == "world-model"
        assert record["remotes"][0]["url"] == f"http://127.0.0.1:8765/world-models/{m.name}/mcp"
        assert local_stdio_args(record) == ["serve", "world-model", m.name, "--stdio"]
        m.closer()


async def test_mounted_over_streamable_http(instances_file: Path) -> None:
    llm = SequencedReplay({IID: [swr_reply(1)]})
    with serve(llm, free_port()) as url:
        mounted = world_model_servers(WorldModelConfig(swr_url=url, instances_file=str(instances_file), k=1))
        routes: list[Any] = [r for m in mounted for r in m.routes("127.0.0.1")]

        @contextlib.asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[None]:
            async with running_world_models(mounted):
                yield

        with serve_in_thread(Starlette(routes=routes, lifespan=lifespan), free_port()) as base:
            gold = next(i for i in load_instances(instances_file) if i.instance_id == IID).patch
            async with Client(f"{base}/world-models/swr/mcp") as client:
                result = await client.call_tool("score", {"instance_id": IID, "patch": gold})
    assert not result.is_error and result.structured_content["score"] == 1.0
    assert len(llm.requests) == 1


@tool
def ratio(model: ModelServer, instance_id: str, parts: int) -> dict[str, float]:
    """How much of the instance's problem statement each of `parts` parts holds (a tool with a latent bug)."""
    return {"share": len(model.instance(instance_id).problem_statement) / parts}


class RatioServer(ModelServer):
    functions = [ratio]
    name, title, description = "ratio", "Ratio", "A world-model server with one buggy tool."


async def test_an_unexpected_failure_in_a_tool_is_a_tool_error(instances: list[Instance]) -> None:
    """A bug inside a world-model tool is an isError result that names the exception, never a JSON-RPC error;
    the server keeps serving, and argument and lookup errors stay plain."""
    srv = RatioServer(instances)
    async with Client(srv.server) as client:
        broken = await client.call_tool("ratio", {"instance_id": IID, "parts": 0})
        text = broken.content[0].text
        assert broken.is_error and text.startswith("tool 'ratio' failed unexpectedly: ZeroDivisionError: ")
        fine = await client.call_tool("ratio", {"instance_id": IID, "parts": 2})
        assert not fine.is_error and fine.structured_content["share"] > 0
        unknown = await client.call_tool("ratio", {"instance_id": "nope", "parts": 2})
        assert unknown.is_error and unknown.content[0].text.startswith("unknown instance 'nope'; known: ")
        big = await client.call_tool("ratio", {"instance_id": "x" * (2 * 1024 * 1024), "parts": 2})
        assert big.is_error and "arguments too large" in big.content[0].text
