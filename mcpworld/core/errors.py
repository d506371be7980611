"""What went wrong, in one line: the exception at the bottom of a task group's wrapping, named and told.

Why: anyio and the MCP SDK's transports wrap a refused connection in `ExceptionGroup`s ("unhandled errors in a
TaskGroup (1 sub-exception)"), which told a person nothing; every place that shows or classifies an error
unwraps it here.
"""

from __future__ import annotations


def innermost(exc: BaseException) -> BaseException:
    """The first leaf of `exc`'s exception groups (`exc` itself when it is not a group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def one_line(exc: BaseException) -> str:
    """`Type: message` of the innermost error, on one line; a group hidden in its cause is unwrapped too."""
    leaf = innermost(exc)
    text = " ".join(str(leaf).split())
    if isinstance(leaf.__cause__, BaseExceptionGroup):
        cause = innermost(leaf.__cause__)
        text = text.split(": ExceptionGroup")[0].split(" (unhandled errors")[0]
        text = f"{text}: {type(cause).__name__}: {' '.join(str(cause).split())}".strip(": ")
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__
