"""Candidate patches for distillation and fidelity: the gold fix, an empty patch, and a wrong one.

The wrong patch changes a file the fix touches without fixing anything, so it applies cleanly, is non-empty (SWR is
asked about it) and real grading marks it unresolved: a negative example with the same shape as a real attempt.
"""

from __future__ import annotations

from mcpworld.swe.instances import Instance, patch_files
from mcpworld.swe.workspace import WorkspacePool
from mcpworld.worldmodels.repo import base_commit, patched_checkout, workspace_patch

CANDIDATES = ("gold", "empty", "wrong")
WRONG_LINE = "\n# NOTE: an unrelated edit; the issue is not addressed here.\n"


def wrong_patch(instance: Instance, pool: WorkspacePool) -> str:
    """A non-empty patch that does not fix the issue: a comment appended to the first file the fix changes."""
    with patched_checkout(instance, "", pool) as ws:
        targets = [p for p in patch_files(instance.patch) if (ws.root / p).is_file()]
        if not targets:
            targets = sorted(str(p.relative_to(ws.root)) for p in ws.root.rglob("*.py")
                             if ".git" not in p.parts and "test" not in p.name)[:1]
        if not targets:
            targets = ["NOTES.md"]
        path = ws.root / targets[0]
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        path.write_text(text + WRONG_LINE, encoding="utf-8")
        return workspace_patch(ws.root, base_commit(ws.root, instance))


def candidate_patches(instance: Instance, pool: WorkspacePool,
                      names: tuple[str, ...] | list[str] = CANDIDATES) -> dict[str, str]:
    """name -> patch for the requested candidates (unknown names are an error)."""
    out: dict[str, str] = {}
    for name in names:
        if name == "gold":
            out[name] = instance.patch
        elif name == "empty":
            out[name] = ""
        elif name == "wrong":
            out[name] = wrong_patch(instance, pool)
        else:
            raise ValueError(f"unknown candidate {name!r}; choose from {', '.join(CANDIDATES)}")
    return out
