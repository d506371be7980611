"""The OpenEnv peer: the airline world's flights as an OpenEnv environment, served the way OpenEnv serves one.

Runs under the peer venv (`python -m benchmarks.peers openenv --setup`), never the project's. Two environments,
both behind the same OpenEnv stack, chosen with `--env`:

    .bench/openenv-venv/bin/python -m benchmarks.peers.openenv_airline --env raw --data DB.json --port PORT
    .bench/openenv-venv/bin/python -m benchmarks.peers.openenv_airline --env runtime --port PORT

`raw` (imports only openenv and the standard library): `DB.json` is the airline world's starting state for the
benchmark's task, exported by `benchmarks.peers.openenv` (schema and rows, never pasted here). Like mcpworld's
fork, every episode gets its own in-memory SQLite copy: `reset` deserializes the template into a fresh
connection, `step get_flight` is one raw `sqlite3` query, `end` closes the episode with `done`.

`runtime` (imports mcpworld, installed into the peer venv by `--setup`): the same code the mcpworld world server
runs, so the two serving stacks are compared on equal environment code. `reset` is `WorldRuntime.fork(task,
seed)`, `step get_flight` is `WorldRuntime.call(episode, "get_flight", ...)` (the world's SQLModel tool through
the ORM, in its own transaction) and returns its value, `end` is `WorldRuntime.verify` then close, as our
`io.mcpworld/episode/verify` with `close` does; the verdict's score is the reward.

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
from typing import TYPE_CHECKING, Any

from openenv.core.env_server import Action, Environment, Observation, State, create_app

if TYPE_CHECKING:
    from mcpworld.worlds.runtime import Episode, WorldRuntime

TEMPLATE: bytes = b""  # the serialized starting database, set once at start-up by `load_template` (raw)
RUNTIME: WorldRuntime | None = None  # the airline world, loaded once at start-up by `load_world_runtime` (runtime)
TASK = "cancel-within-24h"  # the task every runtime episode forks (benchmarks.loadgen's)


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


def load_world_runtime(task: str) -> WorldRuntime:
    """The airline world's runtime with `task`'s template built, once per process (as our server warms it)."""
    from mcpworld.worlds.host import load_runtime

    runtime = load_runtime("airline")
    runtime.template(runtime.tasks[task])
    return runtime


class AirlineEnvironment(Environment):
    """raw: per session its own state; per episode its own SQLite copy of the airline world, read with sqlite3."""

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


class RuntimeAirlineEnvironment(Environment):
    """runtime: per episode a fork of mcpworld's WorldRuntime; each step the world's own tool, as our server runs it."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._episode: Episode | None = None
        self._state = State(episode_id=None, step_count=0)

    @staticmethod
    def _runtime() -> WorldRuntime:
        if RUNTIME is None:
            raise RuntimeError("the world runtime is loaded by main(); start this module as a program")
        return RUNTIME

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> AirlineObservation:
        self.close()
        self._episode = self._runtime().fork(TASK, seed or 0)
        self._state = State(episode_id=episode_id or self._episode.id, step_count=0)
        return AirlineObservation()

    def step(self, action: AirlineAction, timeout_s: float | None = None,  # type: ignore[override]
             **kwargs: Any) -> AirlineObservation:
        if self._episode is None:
            return AirlineObservation(error="no episode: send reset first")
        self._state.step_count += 1
        runtime = self._runtime()
        if action.tool == "end":
            verdict = runtime.verify(self._episode, None)
            self.close()
            return AirlineObservation(done=True, reward=verdict.score)
        result = runtime.call(self._episode, action.tool, {"flight_id": action.flight_id})
        if result.error is not None:
            return AirlineObservation(error=result.error)
        return AirlineObservation(flight=result.value)

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        if self._episode is not None:
            self._episode.close()
            self._episode = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env", choices=["raw", "runtime"], default="raw",
                        help="raw: one sqlite3 query per get_flight; runtime: mcpworld's WorldRuntime (module doc)")
    parser.add_argument("--data", help="raw: the exported starting state (JSON)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-concurrent-envs", type=int, default=2048)
    args = parser.parse_args(argv)
    global TEMPLATE, RUNTIME
    if args.env == "raw":
        if not args.data:
            parser.error("--env raw needs --data DB.json (written by benchmarks.peers.openenv.export_airline)")
        TEMPLATE = load_template(args.data)
        env: type[Environment] = AirlineEnvironment
    else:
        RUNTIME = load_world_runtime(TASK)
        env = RuntimeAirlineEnvironment
    import uvicorn

    app = create_app(env, AirlineAction, AirlineObservation, env_name="airline",
                     max_concurrent_envs=args.max_concurrent_envs)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
