"""The episode loop: start, act, call tools through MCP, verify, close. Short enough to read in one sitting."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcpworld.agent.formats import Action, Format
from mcpworld.agent.policies import Policy, SetupError
from mcpworld.agent.step import UnknownTool, run_calls
from mcpworld.agent.trajectory import CallRecord, Step, Trajectory
from mcpworld.core.errors import innermost
from mcpworld.core.llm import LLMError
from mcpworld.core.models import TaskInfo, ToolCall
from mcpworld.core.paths import registry_token
from mcpworld.core.protocol import EpisodeControl
from mcpworld.core.termination import Termination

SYSTEM = "You are a helpful agent operating an application through its tools. Act on the user's request. " \
         "Answer a question with the submit_answer tool (the value asked for, typed); when a rule forbids the " \
         "request, write nothing and call the decline tool citing the rule's id. Finish with a short final " \
         "message to the user."


def system_prompt(format: Format, tools: list[types.Tool], rules: str = "") -> str:
    """The agent's system message: how to act, the world's policy (its rules), and the format's tool prompt."""
    policy = f"Policy (follow it even where a tool would allow an action):\n{rules}" if rules else ""
    return "\n\n".join(p for p in (SYSTEM, policy, format.system_prompt(tools)) if p)


@dataclass
class EpisodeConfig:
    max_turns: int = 20
    turn_timeout_s: float = 120.0
    episode_timeout_s: float = 600.0
    history_turns: int | None = None  # keep system + task + the last K turns; None keeps all
    penalize: bool = True  # format errors and unknown tools end the episode with -1 (infra errors never do)


class EpisodeEnd(Exception):
    """Ends an episode early for the agent's own reason (its format, an unknown tool, its turn timeout)."""

    def __init__(self, termination: Termination, error: str):
        super().__init__(error)
        self.termination, self.error = termination, error


def window(messages: list[dict[str, Any]], turns: int | None) -> list[dict[str, Any]]:
    """System + task + the last `turns` assistant turns with their tool results (AWM's history window)."""
    if turns is None:
        return messages
    starts = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and i >= 2]
    return messages[:2] + messages[starts[-turns]:] if len(starts) > turns else messages


def infra_reason(exc: BaseException) -> str:
    """Why our side lost an episode, in words: what `mcpworld run` reports and `Trajectory.infra_reason` reads.

    Everything that reaches here is not the agent's doing: its own mistakes (bad format, unknown tool, tool
    errors, its turn timeout) come back as results or `EpisodeEnd`, never as exceptions. HTTP errors are told
    apart by class name, so httpx, httpcore and the SDK's vendored httpx2 read the same.
    """
    exc = innermost(exc)  # the transport's task group wraps its error
    kinds = {c.__name__ for c in type(exc).__mro__}
    if isinstance(exc, ConnectionRefusedError) or kinds & {"ConnectError", "ConnectTimeout"}:
        return "server unreachable"  # mcpworld's ConnectError too: the registry or server could not be reached
    if isinstance(exc, MCPError):
        return {types.CONNECTION_CLOSED: "connection lost", types.REQUEST_TIMEOUT: "server timed out"}.get(
            exc.error.code, "server error")
    if isinstance(exc, TimeoutError) or "TimeoutException" in kinds:
        return "server timed out"
    if isinstance(exc, (ConnectionError, EOFError, anyio.ClosedResourceError, anyio.BrokenResourceError,
                        anyio.EndOfStream)) or kinds & {"TransportError", "NetworkError", "ProtocolError"}:
        return "connection lost"
    return "worker crash"


def infra_error_text(exc: BaseException) -> str:
    """`reason: Type: message`, the `error` of an infra_error trajectory."""
    reason = infra_reason(exc)
    exc = innermost(exc)
    return f"{reason}: {type(exc).__name__}: {exc}"


async def run_episode(ctl: EpisodeControl, server: str, task: TaskInfo, policy: Policy,
                      config: EpisodeConfig | None = None, sample: int = 0, seed: int = 0) -> Trajectory:
    """Play one task with `policy` on an open MCP connection and judge it. Never raises for episode failures.

    An episode our side lost ends as `infra_error` with no reward; the runner retries it on a fresh episode.
    """
    config = config or EpisodeConfig()
    traj = Trajectory(server=server, task=task.id, sample=sample, seed=seed, policy=policy.name,
                      model=policy.model, format=policy.format.name)
    began = time.perf_counter()
    answer: str | None = None
    closed = False
    try:
        with anyio.fail_after(config.episode_timeout_s):
            started = await ctl.start(task.id, seed)
            task = task.model_copy(update={"seed": seed})  # its data: a seed renames ids, names and dates
            traj.episode, traj.environment = started.episode, dict(started.environment)
            begin = getattr(policy, "begin", None)  # a privileged policy (the oracle) fetches what it may know
            if begin is not None:
                await begin(ctl, server, task)
            tools = await ctl.tools()
            names = {t.name for t in tools}
            system = system_prompt(policy.format, tools, started.policy)
            instruction = started.instruction or task.instruction  # the server's: with how to submit an answer
            traj.messages = [{"role": "system", "content": system}, {"role": "user", "content": instruction}]
            for turn in range(config.max_turns):
                answer = await _turn(ctl, traj, task, policy, tools, names, turn, config)
                if answer is not None:
                    break
            else:
                traj.termination = Termination.MAX_TURNS
            # the harness's own verdict, with its details (the token never reaches the policy)
            verified = await ctl.verify(traj.episode, answer, token=registry_token(None)[0])
            traj.verdict, closed = verified.verdict, verified.closed
            traj.reward = Termination(traj.termination).reward(traj.verdict.passed)
    except EpisodeEnd as end:
        traj.termination, traj.error = end.termination, end.error
        traj.reward = end.termination.reward(penalize=config.penalize)
    except TimeoutError:
        traj.termination = Termination.EPISODE_TIMEOUT
        traj.error = f"episode exceeded {config.episode_timeout_s:g}s"
    except LLMError as exc:
        traj.termination, traj.error = Termination.MODEL_ERROR, str(exc)
    except SetupError as exc:  # the run's setup, not the agent: no reward, and the run says what to fix
        traj.termination, traj.error, traj.verdict = Termination.SETUP_ERROR, str(exc), None
        traj.reward = traj.termination.reward()
    except Exception as exc:  # the server died, the connection broke, a request timed out: not the agent's doing
        traj.termination, traj.error, traj.verdict = Termination.INFRA_ERROR, infra_error_text(exc), None
        traj.reward = traj.termination.reward()
    finally:
        traj.duration_s = round(time.perf_counter() - began, 4)
        if traj.episode is not None and not closed:
            with anyio.move_on_after(5, shield=True):
                try:
                    await ctl.close(traj.episode)
                except Exception:
                    pass
    return traj


async def _turn(ctl: EpisodeControl, traj: Trajectory, task: TaskInfo, policy: Policy, tools: list[types.Tool],
                names: set[str], turn: int, config: EpisodeConfig) -> str | None:
    """One policy turn and its tool calls; returns the final answer when the policy gives one."""
    t0 = time.perf_counter()
    try:
        with anyio.fail_after(config.turn_timeout_s):
            action: Action = await policy.act(window(traj.messages, config.history_turns), tools, task)
    except TimeoutError:
        raise EpisodeEnd(Termination.TIMEOUT,
                         f"turn {turn}: the policy took longer than {config.turn_timeout_s:g}s") from None
    step = Step(turn=turn, policy_ms=round((time.perf_counter() - t0) * 1000, 2))
    traj.steps.append(step)
    traj.messages.append(action.message)
    for key, value in getattr(policy, "usage", {}).items():
        if isinstance(value, int):
            traj.usage[key] = traj.usage.get(key, 0) + value
    if action.truncated:  # the token cap cut the reply: whatever it parses as, it is not the agent's full turn
        raise EpisodeEnd(Termination.TRUNCATED, f"turn {turn}: the reply was cut off by its token cap")
    if action.error is not None:
        raise EpisodeEnd(Termination.FORMAT_ERROR, f"turn {turn}: {action.error}")
    if (local := policy.format.local_messages(action, tools)) is not None:  # answered by the format, no server call
        traj.messages += local
        return None
    if not action.calls:
        return action.final or ""

    def record(call: ToolCall, result: types.CallToolResult, latency_ms: float) -> None:
        step.calls.append(CallRecord(name=call.name, arguments=call.arguments, is_error=bool(result.is_error),
                                     latency_ms=latency_ms))

    try:
        results = await run_calls(ctl, traj.episode, action.calls, names, record)  # type: ignore[arg-type]
    except UnknownTool as unknown:
        raise EpisodeEnd(Termination.UNKNOWN_TOOL, f"turn {turn}: unknown tool {unknown.name!r}") from None
    traj.messages += policy.format.result_messages(action, results)
    return None
