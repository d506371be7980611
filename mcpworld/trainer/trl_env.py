"""TRL adapter: `GRPOTrainer(environment_factory=mcpworld_environment(server))`, one MCP episode per rollout.

TRL (>= 1.x) makes one environment instance per rollout, calls its `reset(**row)` with the dataset row's
columns, exposes its public methods as the model's tools, and scores the rollout with `get_reward()`. Here the
methods are the world's MCP tools, written from their JSON Schemas as typed functions with docstrings (what
TRL reads to show them to the model), the row names the task (`task`, optionally `seed`), and the reward is
the one reward table's for the episode's state: `get_reward` verifies it (TRL gives the environment no final
answer text, so it is verified on the state the calls left, as `max_turns` is). An episode lost to an
infrastructure error scores None, which TRL leaves out of that reward. TRL calls tools synchronously; each
episode is an `EpisodeTask` on one event loop thread shared by every instance, so it keeps its connection in
one task for its whole life.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import mcp_types as types

from mcpworld.agent.loop import infra_error_text
from mcpworld.agent.trajectory import Termination
from mcpworld.core.models import ToolCall
from mcpworld.core.protocol import EpisodeControl
from mcpworld.registry.connect import connect
from mcpworld.trainer.episode_task import EpisodeTask

T = TypeVar("T")
JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
                              "object": dict}
_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def run_sync(coro: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
    """Run `coro` on the adapter's event loop thread (started once) and wait for it."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="mcpworld-trl", daemon=True).start()
    return asyncio.run_coroutine_threadsafe(coro, _loop).result(timeout)


class MCPWorldEnvironment:
    """One rollout's episode. Subclassed per world by `mcpworld_environment`, which adds the tool methods."""

    server: str = ""
    registry: str | None = None

    def __init__(self) -> None:
        self.episode: EpisodeTask | None = None
        self.error: str | None = None

    def reset(self, **row: Any) -> str | None:
        """Start the row's task (`task`, optional `seed`) on a fresh episode; the previous one is closed."""
        self._close()
        self.error = None
        task = row.get("task")
        if not isinstance(task, str):
            raise ValueError(f"the dataset row needs a `task` column naming the task; got columns {sorted(row)}")
        self.episode = EpisodeTask(self.server, task, int(row.get("seed") or 0), self.registry)
        try:
            run_sync(self.episode.open())
        except Exception as exc:  # scored None by get_reward: not the model's doing
            self.error = infra_error_text(getattr(exc, "cause", exc))
        return None

    def get_reward(self) -> float | None:
        """The reward table's score for the state the episode is in (verified now); None when it was lost."""
        if self.error is not None or self.episode is None:
            return None
        try:
            verdict = run_sync(self.episode.verify(None))
        except Exception as exc:
            self.error = infra_error_text(getattr(exc, "cause", exc))
            return None
        return Termination.MAX_TURNS.reward(verdict.passed)

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self.error is not None or self.episode is None:
            return f"error: the environment is unavailable ({self.error})"
        try:
            [(text, is_error)] = run_sync(self.episode.call([ToolCall(name=name, arguments=arguments)]))
        except Exception as exc:
            self.error = infra_error_text(getattr(exc, "cause", exc))
            return f"error: the environment is unavailable ({self.error})"
        return f"error: {text}" if is_error else text

    def _close(self) -> None:
        if self.episode is not None:
            episode, self.episode = self.episode, None
            run_sync(episode.close(timeout=5), timeout=15)

    def __del__(self) -> None:
        try:
            self._close()
        except Exception:  # interpreter shutdown: the loop may be gone
            pass


def tool_method(tool: types.Tool) -> Callable[..., str]:
    """`tool` as a typed method with a Google-style docstring: what TRL (transformers' get_json_schema) reads."""
    schema = tool.input_schema or {}
    props: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    lines = []
    for name, prop in props.items():
        kind = prop.get("type") if isinstance(prop.get("type"), str) else None
        annotation = JSON_TYPES.get(kind or "string", str)
        annotations[name] = annotation
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                        **({} if name in required else {"default": None})))
        lines.append(f"    {name}: {(prop.get('description') or name).strip() or name}")

    def method(self: MCPWorldEnvironment, **arguments: Any) -> str:
        return self._call(tool.name, {k: v for k, v in arguments.items() if v is not None})

    method.__name__ = method.__qualname__ = tool.name
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = annotations
    description = (tool.description or tool.name).strip()
    method.__doc__ = description + ("\n\nArgs:\n" + "\n".join(lines) if lines else "") + \
        "\n\nReturns:\n    The tool's result.\n"
    return method


def mcpworld_environment(server: str, registry: str | None = None,
                         tools: list[types.Tool] | None = None) -> type[MCPWorldEnvironment]:
    """An environment class for `server` (registered name or MCP URL) whose methods are its tools: pass it as
    TRL's `environment_factory`."""
    if tools is None:
        async def listing() -> list[types.Tool]:
            async with connect(server, registry=registry) as client:
                return await EpisodeControl(client).tools()

        tools = run_sync(listing())
    reserved = {"reset", "get_reward"} | set(dir(MCPWorldEnvironment))
    clash = sorted(t.name for t in tools if t.name in reserved or t.name.startswith("_"))
    if clash:
        raise ValueError(f"tools named {', '.join(clash)} clash with the environment's own methods")
    members: dict[str, Any] = {t.name: tool_method(t) for t in tools}
    members.update(server=server, registry=registry)
    name = "MCPWorld_" + "".join(c if c.isalnum() else "_" for c in server.rsplit("/", 1)[-1])
    return type(name, (MCPWorldEnvironment,), members)
