"""An AWM import against AWM's own server (issue 33). The oracle is the scenario's generated FastAPI app served as
AWM serves it (FastApiMCP over streamable HTTP, in .venv/awm-oracle: AWM's lock, `.ci/run` makes it), started by
tests/synth/awm_oracle.py as a real process on a database built from the import's own initial data, and driven by
the MCP client over HTTP. mcpworld serves the same import (`served_as: "awm"`), and both must show the same tools
(names, descriptions, input schemas) and answer the same calls with the same result texts and error flags.

Documented differences (docs/synthesis.md, "What the agent sees"), asserted as such: mcpworld adds its submission
tools (`submit_answer`, `decline`), tool annotations (read-only or not) and its server's identity in each result's
`_meta`; nothing else.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcpworld.core.testing import stop
from mcpworld.worlds.loader import load_world
from mcpworld.worlds.runtime import WorldRuntime
from mcpworld.worlds.server import WorldServer

ROOT = Path(__file__).parents[2]
ORACLE = ROOT / ".venv" / "awm-oracle" / "bin" / "python"
pytestmark = pytest.mark.skipif(not ORACLE.is_file(), reason=(
    "AWM oracle environment .venv/awm-oracle is absent (.ci/run makes it: Python 3.12, pip install -r "
    "mcpworld/synth/importers/awm-lock.txt fastapi-mcp==0.4.0 mcp==1.26.0)"))

# Played in this order on both servers (each sees the writes before it): what the agent may send.
CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("a valid read", "list_pets", {}),
    ("a valid write", "create_appointment", {"pet_id": 2, "date": "2026-06-12"}),
    ("the write read back", "get_appointment", {"appointment_id": 13}),
    ("non-ASCII text in a result", "create_appointment", {"pet_id": 1, "date": "été 2026"}),
    ('"45" for an integer', "create_appointment", {"pet_id": "45", "date": "2026-06-13"}),
    ('"true" for a bool', "send_reminder", {"note": "hi", "urgent": "true"}),
    ("null on an optional field", "list_pets", {"owner_id": None}),
    ("an unknown extra argument", "cancel_appointment", {"appointment_id": 2, "reason": "moved away"}),
    ("the app's own 400", "cancel_appointment", {"appointment_id": 2}),
    ("a body-less tool called with {}", "send_reminder", {}),
    ("a body of optional fields", "send_reminder", {"urgent": True, "note": "Grüße"}),
    ("a CHECK constraint violation", "add_pet", {"owner_id": 1, "name": "Nemo", "species": "fish"}),
    ("a missing row", "get_appointment", {"appointment_id": 999}),
    ("reads after the writes", "list_pets", {"owner_id": 1}),
]


async def play(server: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """tools/list, then every call of CALLS, as plain dumps."""
    async with Client(server) as client:
        tools = [t.model_dump(exclude_none=True) for t in (await client.list_tools()).tools]
        results = [(await client.call_tool(name, args)).model_dump(exclude_none=True) for _, name, args in CALLS]
    return tools, results


def awm_server(package: Path, db: Path) -> tuple[subprocess.Popen[str], int]:
    """The oracle process on `db` (built from the package's DDL, indexes and sample rows), and its port."""
    manifest = json.loads((package / "scenario.json").read_text(encoding="utf-8"))
    conn = sqlite3.connect(db)
    for statement in [*manifest["ddl"], *manifest["indexes"], *manifest["inserts"]]:
        conn.execute(statement)
    conn.commit()
    conn.close()
    with (db.parent / "oracle.log").open("w") as log:  # the child keeps its own copy of the handle
        proc = subprocess.Popen([str(ORACLE), str(Path(__file__).with_name("awm_oracle.py")),
                                 str(package / "server.py"), str(db)], stdout=subprocess.PIPE, stderr=log, text=True,
                                cwd=db.parent)
    line = proc.stdout.readline() if proc.stdout else ""  # printed once its socket listens: the readiness condition
    if not line.strip().isdigit():
        stop(proc)
        raise AssertionError(f"the AWM oracle did not start: {(db.parent / 'oracle.log').read_text()[-3000:]}")
    return proc, int(line)


@pytest.fixture(scope="module")
def both(awm_faithful: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What AWM's server and mcpworld's show and answer for the same import and the same calls."""
    proc, port = awm_server(awm_faithful, tmp_path_factory.mktemp("awm-oracle") / "awm.db")
    try:
        theirs = anyio.run(play, f"http://127.0.0.1:{port}/mcp")
    finally:
        stop(proc)
    ours = anyio.run(play, WorldServer(WorldRuntime(load_world(awm_faithful))).server)
    return {"theirs": theirs, "ours": ours}


def test_tools_are_listed_as_awms_server_lists_them(both: dict[str, Any]) -> None:
    """Names, descriptions (FastApiMCP's, with its "### Responses:" section) and input schemas, byte for byte."""
    theirs = {t["name"]: t for t in both["theirs"][0]}
    ours = {t["name"]: t for t in both["ours"][0]}
    assert set(ours) - set(theirs) == {"submit_answer", "decline"} and set(theirs) <= set(ours)
    for name, tool in theirs.items():
        mine = dict(ours[name])
        assert set(mine.pop("annotations")) >= {"read_only_hint"}  # mcpworld's own addition, documented
        assert mine == tool, name
    listed = theirs["list_pets"]["description"]
    assert listed.startswith("List pets\n\nList the clinic's pets") and "\n\n### Responses:\n\n**200**: " in listed
    assert '"species": "Species"' in listed and "Content-Type: application/json" in listed
    assert theirs["send_reminder"]["input_schema"]["title"] == "send_reminderArguments"


@pytest.mark.parametrize("index", range(len(CALLS)), ids=[what for what, _, _ in CALLS])
def test_calls_answer_as_awms_server_answers(both: dict[str, Any], index: int) -> None:
    """The same content (FastApiMCP's indented JSON, or its error text) and error flag; no structured content on
    either side; mcpworld's result `_meta` names its server, and says nothing else."""
    theirs, ours = both["theirs"][1][index], dict(both["ours"][1][index])
    meta = ours.pop("meta")
    assert set(meta) == {"io.modelcontextprotocol/serverInfo"}
    assert ours == theirs
    assert "structured_content" not in theirs


def test_the_http_fast_path_writes_the_same_result() -> None:
    """A trainer's calls over mcpworld's HTTP transport skip the SDK's models (`value_wire`): same text, same lack of
    structured content."""
    from mcpworld.core.episode_server import value_result, value_wire, wire_result
    from mcpworld.synth.importers.awm import fastapi_mcp_text

    value = {"id": 1, "date": "été", "tags": [1, 2]}
    assert value_wire(value, fastapi_mcp_text) == wire_result(value_result(value, fastapi_mcp_text))
    text = value_wire(value, fastapi_mcp_text)["content"][0]["text"]
    assert text == '{\n  "id": 1,\n  "date": "été",\n  "tags": [\n    1,\n    2\n  ]\n}'
