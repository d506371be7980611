"""Errors end up in the UI, never as a traceback: one-line messages, and a safety net for workers."""

from __future__ import annotations

from mcp.shared.exceptions import MCPError
from textual.worker import Worker, WorkerState

from mcpworld.core.errors import innermost
from mcpworld.registry.connect import ConnectError


class UserError(Exception):
    """An error whose message is already written for the person reading it (shown without its type)."""


def error_text(exc: BaseException) -> str:
    """A one-line message for the UI: never a traceback, and the real cause rather than 'a TaskGroup failed'."""
    exc = innermost(exc)
    text = str(exc).strip()
    if isinstance(exc, ConnectError) and isinstance(exc.__cause__, BaseExceptionGroup):
        cause = innermost(exc.__cause__)
        return text.split(": ExceptionGroup")[0] + f": {type(cause).__name__}: {cause}".rstrip(": ")
    if isinstance(exc, MCPError | ConnectError | UserError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ReportsWorkerErrors:
    """Mixin for screens and widgets: a worker that fails is reported with `notify`, and the app keeps running.

    Workers here are started with `exit_on_error=False`; most catch their own errors and say more, this is
    only the net under them.
    """

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.notify(error_text(event.worker.error), title="Error", severity="error",  # type: ignore[attr-defined]
                        timeout=8)
