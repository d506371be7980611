"""TRL adapter: `GRPOTrainer(environment_factory=mcpworld_environment(server))`, one MCP episode per rollout.

TRL (>= 1.16) makes one environment instance per rollout (and reuses instances across batches), calls its
`reset(**row)` with the dataset row's columns, exposes its public methods as the model's tools, and scores the
rollout with `get_reward()`. Here the methods are the world's MCP tools, written from their JSON Schemas as
typed functions with docstrings (what TRL reads to show them to the model), the row names the task (`task`,
optionally `seed`), and the reward is the one reward table's for the episode's state: `get_reward` verifies it
(TRL gives the environment no final answer text, so it is verified on the state the calls left, as
`max_turns` is).

TRL calls all of these synchronously from its trainer thread. Each call is one request run through
`shared_client.run_sync` on the process's one background loop, where every environment of the trainer plays
its episode over the same `SharedClient` (one pooled connection per server: no handshake per rollout; the
last environment done with a batch closes it, the next batch reconnects once).

Infrastructure errors (server unreachable or dead, connection lost, our timeout) are not the model's doing:
the episode is lost, its tools answer "the environment is unavailable" and `get_reward` returns None, which
TRL counts as unscorable (no reward, advantage 0). Nothing here raises into the trainer but a bad dataset row
(`BadRow`: no `task` column, or a task the server does not have).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcpworld.agent.loop import infra_error_text
from mcpworld.agent.step import tool_text
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.termination import Termination
from mcpworld.trainer.shared_client import SharedClient, background_loop, run_sync

JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
                              "object": dict}
CLOSE_S = 5.0  # the most a clean-up waits on a server that may be dying


class BadRow(ValueError):
    """A dataset row the environment cannot play: the user's data to fix, so it stops training (never a reward)."""


class MCPWorldEnvironment:
    """One rollout's episode. Subclassed per world by `mcpworld_environment`, which adds the tool methods."""

    server: str = ""
    registry: str | None = None
    timeout: float = 60.0  # each request's limit (the server's answer); past it the episode is lost

    def __init__(self) -> None:
        self.shared: SharedClient | None = None
        self.ctl: EpisodeControl | None = None
        self.episode: str | None = None  # the server's episode id while it is open
        self.error: str | None = None  # why the episode was lost (an infrastructure error), when it was
        self.reward: float | None = None  # the verdict's reward, once `get_reward` has verified

    def reset(self, **row: Any) -> str | None:
        """Start the row's task (`task`, optional `seed`) on a fresh episode; the previous one is closed."""
        task = row.get("task")
        if not isinstance(task, str):
            raise BadRow(f"the dataset row needs a `task` column naming the task; got columns {sorted(row)}")
        self._close()
        self.error, self.reward = None, None
        self._request(self._open(task, int(row.get("seed") or 0)))
        return None

    def get_reward(self) -> float | None:
        """The reward table's score for the state the episode is in (verified now, which closes it); None when
        the episode was lost to an infrastructure error."""
        if self.reward is None and self.ctl is not None and self.episode is not None and self.error is None:
            verified = self._request(self.ctl.verify(self.episode, None, close=True))
            if verified is not None:
                if verified.closed:
                    self.episode = None
                self.reward = Termination.MAX_TURNS.reward(verified.verdict.passed)
                self._close()  # done with the shared client: the last environment out closes it
        return None if self.error is not None else self.reward

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self.ctl is None or self.episode is None or self.error is not None:
            return f"error: the environment is unavailable ({self.error or 'no open episode: reset first'})"
        result = self._request(self.ctl.call(self.episode, name, arguments))
        if result is None:
            return f"error: the environment is unavailable ({self.error})"
        text = tool_text(result)
        return f"error: {text}" if result.is_error else text

    def _request(self, coro: Any) -> Any:
        """`coro`'s result on the shared loop, or None with the episode lost (`error`) on an infra error."""
        try:
            return run_sync(coro, self.timeout + CLOSE_S)
        except BadRow:
            self._close()
            raise
        except Exception as exc:  # the world died, the connection broke, no answer: not the model's doing
            self.error = infra_error_text(exc)
            self._close()
            return None

    async def _open(self, task: str, seed: int) -> None:
        self.shared = SharedClient.acquire((self.server, self.registry, self.timeout))
        self.ctl = await self.shared.control()
        try:
            self.episode = (await self.ctl.start(task, seed)).episode
        except MCPError as exc:
            if exc.error.code != types.INVALID_PARAMS:
                raise
            raise BadRow(f"the dataset row's task {task!r} cannot be started on {self.server}: "
                         f"{exc.error.message}") from None

    async def _aclose(self) -> None:
        """End the episode if still open (bounded) and let go of the shared client; never raises."""
        episode, self.episode, shared, self.shared, ctl = self.episode, None, self.shared, None, self.ctl
        try:
            if episode is not None and ctl is not None:
                async with asyncio.timeout(CLOSE_S):
                    await ctl.close(episode)
        except Exception:  # the server may be gone: the episode dies with it
            pass
        finally:
            if shared is not None:
                await shared.release()

    def _close(self) -> None:
        if self.episode is not None or self.shared is not None:
            try:
                run_sync(self._aclose(), 2 * CLOSE_S)
            except Exception:  # bounded above; a loop that is gone has nothing left to close
                pass

    def __del__(self) -> None:
        if self.episode is not None or self.shared is not None:  # never block a finalizer: start it and go
            try:
                asyncio.run_coroutine_threadsafe(self._aclose(), background_loop())
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


def mcpworld_environment(server: str, registry: str | None = None, tools: list[types.Tool] | None = None,
                         timeout: float = 60.0) -> type[MCPWorldEnvironment]:
    """An environment class for `server` (registered name or MCP URL) whose methods are its tools: pass it as
    TRL's `environment_factory`. `timeout` bounds each request; an unreachable server raises here, before
    training starts (listing its tools is how the class is made)."""
    if tools is None:
        async def listing() -> list[types.Tool]:
            shared = SharedClient.acquire((server, registry, timeout))
            try:
                return await (await shared.control()).tools()
            finally:
                await shared.release()

        tools = run_sync(listing(), timeout + CLOSE_S)
    reserved = {"reset", "get_reward"} | set(dir(MCPWorldEnvironment()))  # with the instance's attributes
    clash = sorted(t.name for t in tools if t.name in reserved or t.name.startswith("_"))
    if clash:
        raise ValueError(f"tools named {', '.join(clash)} clash with the environment's own methods")
    members: dict[str, Any] = {t.name: tool_method(t) for t in tools}
    members.update(server=server, registry=registry, timeout=timeout)
    name = "MCPWorld_" + "".join(c if c.isalnum() else "_" for c in server.rsplit("/", 1)[-1])
    return type(name, (MCPWorldEnvironment,), members)
