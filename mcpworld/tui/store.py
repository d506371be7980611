"""What the TUI remembers between runs, under the mcpworld data directory (`$MCPWORLD_HOME/tui/`).

- `servers.json`: servers saved by hand (a name and an MCP URL), listed beside the registry's;
- `history.jsonl`: every tool call made from the console (server, tool, arguments, outcome), newest last.

Plain sync file I/O: the screens call these from thread workers, never on the event loop.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcpworld.core.paths import home
from mcpworld.tui.errors import UserError

MAX_RESULT_CHARS = 20_000  # a call's result is kept whole up to this size, else only its summary
HISTORY_SHOWN = 200


class StoreError(UserError, ValueError):
    """A saved server is invalid, or a TUI file cannot be read; the message says what to fix."""


def tui_dir() -> Path:
    path = home() / "tui"
    path.mkdir(parents=True, exist_ok=True)
    return path


# -- saved servers ---------------------------------------------------------------------------------------

@dataclass
class SavedServer:
    name: str
    url: str

    def record(self) -> dict[str, Any]:
        """A server.json record `connect()` accepts: one Streamable HTTP remote, no mcpworld facts."""
        return {"name": self.name, "description": f"saved in the TUI: {self.url}",
                "remotes": [{"type": "streamable-http", "url": self.url}]}


def _servers_file() -> Path:
    return tui_dir() / "servers.json"


def load_saved() -> list[SavedServer]:
    path = _servers_file()
    if not path.is_file():
        return []
    try:
        items = json.loads(path.read_text())
        return [SavedServer(str(i["name"]), str(i["url"])) for i in items]
    except (ValueError, KeyError, TypeError):
        raise StoreError(f"{path} is not a list of {{name, url}} objects: fix it or delete it") from None


def check_server(name: str, url: str, saved: list[SavedServer]) -> SavedServer:
    """The server to save, or StoreError saying what is wrong with the name or URL."""
    name, url = name.strip(), url.strip()
    if not name:
        raise StoreError("give the server a name (it is how the list shows it)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise StoreError(f"{url!r} is not an MCP URL: type one like http://127.0.0.1:8000/mcp")
    if any(s.name == name for s in saved):
        raise StoreError(f"a saved server is already named {name!r}: pick another name or delete that one (x)")
    return SavedServer(name, url)


def add_saved(name: str, url: str) -> list[SavedServer]:
    """Validate and append a server; the file is rewritten whole (atomically), or not at all."""
    saved = load_saved()
    saved.append(check_server(name, url, saved))
    _write_servers(saved)
    return saved


def remove_saved(name: str) -> list[SavedServer]:
    saved = [s for s in load_saved() if s.name != name]
    _write_servers(saved)
    return saved


def _write_servers(saved: list[SavedServer]) -> None:
    path = _servers_file()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([asdict(s) for s in saved], indent=2) + "\n")
    tmp.replace(path)


# -- call history ----------------------------------------------------------------------------------------

@dataclass
class CallRecord:
    """One console call: enough to show it, copy it, and run it again."""

    server: str
    tool: str
    arguments: dict[str, Any]
    ok: bool
    latency_ms: float
    result: Any = None
    at: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _history_file() -> Path:
    return tui_dir() / "history.jsonl"


def append_history(record: CallRecord) -> None:
    data = record.to_json()
    if len(json.dumps(data["result"], default=str)) > MAX_RESULT_CHARS:
        data["result"] = {"truncated": f"the result was over {MAX_RESULT_CHARS} characters"}
    with _history_file().open("a") as out:
        out.write(json.dumps(data, default=str) + "\n")


def load_history(server: str, limit: int = HISTORY_SHOWN) -> list[CallRecord]:
    """The last `limit` calls made to `server`, oldest first (lines that do not parse are skipped)."""
    path = _history_file()
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            data = json.loads(line)
            if data.get("server") == server:
                records.append(CallRecord(**data))
        except (ValueError, TypeError):
            continue
    return records[-limit:]
