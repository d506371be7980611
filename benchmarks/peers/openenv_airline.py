"""The OpenEnv peer: the airline world's flights as an OpenEnv environment, served the way OpenEnv serves one.

Runs under the peer venv (`python -m benchmarks.peers openenv --setup`), never the project's: it imports only
openenv-core (and what it brings: pydantic, uvicorn) and the standard library.

    .bench/openenv-venv/bin/python -m benchmarks.peers.openenv_airline --data DB.json --port PORT

`DB.json` is the airline world's starting state for the benchmark's task, exported by `benchmarks.peers.openenv`
(schema and rows, never pasted here). Like `mcpworld`'s fork, every episode gets its own in-memory SQLite copy
of it: `reset` deserializes the template into a fresh connection, `step` runs `get_flight` (or `end`, which
closes the episode with `done`).

Configured as OpenEnv's own template and docs recommend for concurrent sessions: factory mode (the class, not an
instance, so each WebSocket session gets its own environment), `SUPPORTS_CONCURRENT_SESSIONS = True`,
`max_concurrent_envs` above the benchmark's top concurrency, no idle-session timeout, the plain FastAPI app (no
Gradio web UI), one uvicorn process (the comparison is per process, as the mcpworld rows are).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import uuid
from typing import Any

from openenv.core.env_server import Action, Environment, Observation, State, create_app

TEMPLATE: bytes = b""  # the serialized starting database, set once at start-up by `load_template`


def load_template(path: str) -> bytes:
    """Build the starting database from the exported schema and rows, once per process."""
    with open(path) as f:
        data = json.load(f)
    conn = sqlite3.connect(":memory:")
    for sql in data["schema"]:
        conn.execute(sql)
    for table, content in data["tables"].items():
        if content["rows"]:
            marks = ", ".join("?" * len(content["columns"]))
            conn.executemany(f'INSERT INTO "{table}" VALUES ({marks})', content["rows"])
    conn.commit()
    out = conn.serialize()
    conn.close()
    return out


class AirlineAction(Action):
    """One tool call: `get_flight` with a flight id, or `end` to close the episode."""

    tool: str
    flight_id: str = ""


class AirlineObservation(Observation):
    flight: dict[str, Any] | None = None
    error: str | None = None


class AirlineEnvironment(Environment):
    """Per session its own state; per episode its own SQLite copy of the airline world."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._conn: sqlite3.Connection | None = None
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> AirlineObservation:
        self.close()
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        conn.deserialize(TEMPLATE)
        conn.execute("PRAGMA foreign_keys=ON")
        conn.row_factory = sqlite3.Row
        self._conn = conn
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return AirlineObservation()

    def step(self, action: AirlineAction, timeout_s: float | None = None,  # type: ignore[override]
             **kwargs: Any) -> AirlineObservation:
        if self._conn is None:
            return AirlineObservation(error="no episode: send reset first")
        self._state.step_count += 1
        if action.tool == "end":
            self.close()
            return AirlineObservation(done=True, reward=0.0)
        if action.tool != "get_flight":
            return AirlineObservation(error=f"unknown tool {action.tool!r}; available: end, get_flight")
        row = self._conn.execute("SELECT * FROM flight WHERE id = ?", (action.flight_id,)).fetchone()
        if row is None:
            return AirlineObservation(error=f"no flight {action.flight_id!r}")
        flight = dict(row)
        flight["economy_left"] = flight["economy_seats"] - flight["economy_sold"]
        flight["business_left"] = flight["business_seats"] - flight["business_sold"]
        return AirlineObservation(flight=flight)

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="the exported starting state (JSON)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-concurrent-envs", type=int, default=2048)
    args = parser.parse_args(argv)
    global TEMPLATE
    TEMPLATE = load_template(args.data)
    import uvicorn

    app = create_app(AirlineEnvironment, AirlineAction, AirlineObservation, env_name="airline",
                     max_concurrent_envs=args.max_concurrent_envs)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
