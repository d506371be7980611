"""Optional parts need their extra installed: say which one, instead of a `ModuleNotFoundError` traceback."""

from __future__ import annotations

import importlib.util


class MissingExtra(RuntimeError):
    """A command needs modules of an extra that is not installed; the message says what to install."""


def require(extra: str, *modules: str, why: str) -> None:
    """Raise MissingExtra naming `pip install 'mcpworld[<extra>]'` when any of `modules` cannot be imported."""
    missing = []
    for name in modules:
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):  # a parent missing, or a module set to None (tests)
            missing.append(name)
    if missing:
        hint = " (without a GPU, install torch from its CPU index first: docs/training.md)" if extra == "train" else ""
        raise MissingExtra(f"{why} needs {', '.join(missing)}: pip install 'mcpworld[{extra}]'{hint}")
