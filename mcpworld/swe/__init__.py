"""The SWE sandbox: SWE-bench instances served as MCP episodes with editor, shell, search, LSP and grading.

Public entry points: `server.SWEServer` / `server.build_swe_server` (mount it; `mcpworld.app.up.swe_record`
registers it),
`grading.grade` (grade one patch offline), `load_instances` and `builder.builtin_instances` (what to serve),
`backends.make_backend` (where commands run, by name), `cli` (`mcpworld swe`, `python -m mcpworld.swe`).
"""

from __future__ import annotations

from mcpworld.swe.instances import Instance, InstanceError, load_instances

__all__ = ["Instance", "InstanceError", "load_instances"]
