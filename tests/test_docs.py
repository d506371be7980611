"""The docs' examples run: the complete world in docs/worlds.md validates and plays."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from mcpworld.core.testing import mcpworld_cmd

DOCS = Path(__file__).resolve().parents[1] / "docs"


def example(doc: str, label: str) -> str:
    text = (DOCS / doc).read_text()
    match = re.search(rf"<!-- example: {label} -->\s*```python\n(.*?)```", text, re.S)
    assert match, f"{doc} has no example labelled {label}"
    return match.group(1)


def test_worlds_md_example_validates_and_plays(isolated_home: Path) -> None:
    pkg = isolated_home / "worlds" / "pantry"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(example("worlds.md", "world"))
    result = subprocess.run(mcpworld_cmd("world", "validate", "pantry"), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "ok  pantry: 2 tools, 4 tasks" in result.stdout
    audited = subprocess.run(mcpworld_cmd("world", "audit", "pantry", "--quiet"), capture_output=True, text=True,
                             timeout=300)
    assert audited.returncode == 0, audited.stdout + audited.stderr
    listed = subprocess.run(mcpworld_cmd("world", "list", "--json"), capture_output=True, text=True, timeout=120)
    assert '"name": "pantry"' in listed.stdout
