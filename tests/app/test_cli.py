"""Every subcommand's `--help` (and a typo) answers without importing the heavy parts: the MCP SDK, SQLModel,
torch, Textual (it took 2-6 s, issue 35). Checked by what gets imported, not by a clock: each `--help` runs in a
fresh interpreter that then lists the modules it loaded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("mcp", "mcp_types", "sqlmodel", "sqlalchemy", "torch", "textual", "transformers", "httpx", "fastapi")
PROBE = """
import json, sys
from mcpworld.app.cli import main
try:
    main(args=sys.argv[1:], prog_name="mcpworld")
except SystemExit:
    pass
print("\\n" + json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def _subcommands() -> list[list[str]]:
    from mcpworld.app.cli import main

    out: list[list[str]] = []
    for name, (reference, _) in main.lazy.items():  # type: ignore[attr-defined]
        out.append([name])
        module, _, attr = reference.partition(":")
        command = getattr(__import__(module, fromlist=[attr]), attr)
        out += [[name, sub] for sub in getattr(command, "commands", {})]
    serve = main.commands["serve"]  # type: ignore[attr-defined]
    return out + [["serve", sub] for sub in serve.lazy]


@pytest.mark.parametrize("args", [*_subcommands(), ["wrld"]],
                         ids=lambda a: " ".join(a))
def test_help_answers_without_the_heavy_imports(args: list[str]) -> None:
    run = subprocess.run([sys.executable, "-c", PROBE, *args, *([] if args == ["wrld"] else ["--help"])],
                         capture_output=True, text=True, timeout=120)
    loaded = set(json.loads(run.stdout.strip().splitlines()[-1]))
    assert not loaded & set(HEAVY), f"`mcpworld {' '.join(args)} --help` imported {sorted(loaded & set(HEAVY))}"


def test_run_offers_exactly_the_policies_and_formats_there_are() -> None:
    from mcpworld.agent.cli import FORMAT_CHOICES, POLICY_CHOICES
    from mcpworld.agent.formats import FORMATS
    from mcpworld.agent.policies import POLICIES

    assert POLICY_CHOICES == tuple(POLICIES) and FORMAT_CHOICES == tuple(FORMATS)
