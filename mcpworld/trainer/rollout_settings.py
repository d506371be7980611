"""What every trainer adapter reads the same way: the episode label of a dataset row, the rollout settings from
the environment, and the rollout log. Shared by the OpenRLHF bridge and the verl agent loop (neither imports
the other's trainer), so a setting means one thing whichever trainer runs.

Settings (environment variables, read per rollout):
- MCPWORLD_MAX_TURNS: tool-call turns before the episode is verified as it stands (default 16)
- MCPWORLD_HISTORY_TURNS: AWM's history window (OpenRLHF bridge only; unset: the whole conversation)
- MCPWORLD_MAX_REPLY_TOKENS: cap on each reply; one cut off there ends the episode as `truncated` (reward 0)
- MCPWORLD_ROLLOUT_LOG: a JSONL file that gets one line per finished rollout (reward, termination, logs)
- MCPWORLD_INFRA_RETRIES: rollouts replayed after an infrastructure error (default 3)
- MCPWORLD_INFRA_BACKOFF_S: seconds before the first replay, doubled each time, at most 30 (default 2)
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from mcpworld.core.retry import Backoff


def parse_label(label: Any) -> dict[str, Any]:
    """The label is JSON (or a mapping): {"server": "io.mcpworld/airline", "task": "cancel-within-24h", "seed": 0},
    optionally "registry" and "timeout"."""
    data = json.loads(label) if isinstance(label, str) else dict(label)
    if not isinstance(data.get("server"), str) or not isinstance(data.get("task"), str):
        raise ValueError(f"label needs 'server' and 'task': {label!r}")
    return data


def _count_setting(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise ValueError(f"{name}={raw!r}: give a whole number (or leave it unset)")
    return int(raw)


def history_turns() -> int | None:
    """MCPWORLD_HISTORY_TURNS: the turns of history each turn sees (None: all of them)."""
    return _count_setting("MCPWORLD_HISTORY_TURNS")


def reply_cap() -> int | None:
    """MCPWORLD_MAX_REPLY_TOKENS: the most tokens one reply may have (None: what is left of the budget)."""
    return _count_setting("MCPWORLD_MAX_REPLY_TOKENS")


def max_turns() -> int:
    """MCPWORLD_MAX_TURNS: tool-call turns before the episode is verified as it stands."""
    count = _count_setting("MCPWORLD_MAX_TURNS")
    return 16 if count is None else count


def infra_retries() -> int:
    """MCPWORLD_INFRA_RETRIES: how many times a rollout lost to an infrastructure error is played again."""
    count = _count_setting("MCPWORLD_INFRA_RETRIES")
    return 3 if count is None else count


def infra_backoff() -> Backoff:
    """The wait before each replay: MCPWORLD_INFRA_BACKOFF_S before the first, doubling, at most 30."""
    return Backoff(float(os.environ.get("MCPWORLD_INFRA_BACKOFF_S", "2")), 30.0)


def log_rollout(result: dict[str, Any], environment: dict[str, str] | None = None) -> dict[str, Any]:
    """Append the rollout's outcome (`reward`, `termination`, `extra_logs`) and the `environment` build that judged
    it to MCPWORLD_ROLLOUT_LOG (JSONL, one write per line), when set: the reward curve of a run, whatever the
    trainer's own logger is."""
    path = os.environ.get("MCPWORLD_ROLLOUT_LOG")
    if path:
        logs = {k: float(v) for k, v in (result.get("extra_logs") or {}).items()}
        line = json.dumps({"time": round(time.time(), 3), "reward": float(result["reward"]),
                           "termination": result.get("termination"), **logs,
                           "environment": environment or {}}) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    return result

