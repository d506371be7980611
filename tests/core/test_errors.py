"""One-line errors (`mcpworld/core/errors.py`): what a person reads when a connection is refused is the refusal,
never "ExceptionGroup: unhandled errors in a TaskGroup" (issue 35)."""

from __future__ import annotations

import anyio
import pytest

from mcpworld.core.errors import innermost, one_line
from mcpworld.core.testing import free_port
from mcpworld.registry.health import check_record
from mcpworld.registry.records import local_record


def test_innermost_unwraps_nested_groups() -> None:
    leaf = ConnectionRefusedError(111, "Connection refused")
    wrapped = ExceptionGroup("outer", [ExceptionGroup("inner", [leaf]), ValueError("second")])
    assert innermost(wrapped) is leaf
    assert one_line(wrapped) == "ConnectionRefusedError: [Errno 111] Connection refused"
    assert one_line(ValueError("two\n  lines")) == "ValueError: two lines"
    assert one_line(KeyError()) == "KeyError"


def test_a_group_hidden_in_a_cause_is_told_too() -> None:
    try:
        try:
            raise ExceptionGroup("unhandled errors in a TaskGroup", [OSError("All connection attempts failed")])
        except ExceptionGroup as group:
            raise RuntimeError(f"cannot reach x: {type(group).__name__}: {group}") from group
    except RuntimeError as exc:
        text = one_line(exc)
    assert text == "RuntimeError: cannot reach x: OSError: All connection attempts failed"


@pytest.mark.parametrize("url", ["http://127.0.0.1:{port}/mcp"])
def test_a_health_check_of_a_refused_server_says_why_in_plain_words(url: str) -> None:
    result = anyio.run(check_record, local_record("down", "d", "world", url=url.format(port=free_port())))
    assert result["status"] == "down"
    assert "ExceptionGroup" not in result["error"] and "TaskGroup" not in result["error"], result["error"]
    assert "All connection attempts failed" in result["error"] or "refused" in result["error"], result["error"]
