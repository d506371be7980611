"""The patch a SWE trajectory submitted, read back from its `submit` tool call and result.

The SWE server's submit result reads "Submitted. The patch to be graded:\\n\\n<patch>" (or says the patch is
empty); any message format (native tool messages, <tool_response> blocks) carries that text verbatim.
"""

from __future__ import annotations

from typing import Any

from mcpworld.agent.trajectory import Trajectory

PATCH_MARKER = "The patch to be graded:\n\n"
EMPTY_MARKER = "Submitted an empty patch"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return ""


def submitted(t: Trajectory) -> bool:
    """Whether the episode called submit successfully."""
    return any(c.name == "submit" and not c.is_error for s in t.steps for c in s.calls)


def submitted_patch(t: Trajectory) -> str | None:
    """The last submitted patch ("" when empty), or None when the agent never submitted."""
    if not submitted(t):
        return None
    for message in reversed(t.messages):
        if message.get("role") not in ("tool", "user"):
            continue
        text = _text(message.get("content"))
        at, empty = text.rfind(PATCH_MARKER), text.rfind(EMPTY_MARKER)
        if at == -1 and empty == -1:
            continue
        if empty > at:
            return ""
        patch = text[at + len(PATCH_MARKER):]
        end = patch.find("\n</tool_response>")
        return patch[:end] if end != -1 else patch
    evidence = t.verdict.evidence if t.verdict else {}
    if evidence.get("patch_source") == "submit" and isinstance(evidence.get("patch"), str):
        return evidence["patch"]
    return None
