"""Driver for τ²-bench as an oracle (tests/synth/test_tau2.py): runs inside τ²'s own Python >= 3.12 environment.

Reads JSON on stdin: {"domain": ..., "cases": [{"task": id, "calls": [[name, args(, requestor)], ...], "answer":
text, "opening": the user's answer to the greeting (optional), "simulation": bool}]}. A call's requestor is
"assistant" unless it says "user" (telecom: the user's own tools, recorded as a user message's tool call); a call
named `message_user` is a conversation turn instead: the agent's message ({"message"}), the user's own tool calls
({"calls": [[name, args], ...]}, telecom), then the user's reply ({"reply"}), as τ²'s orchestrator records them.
Writes JSON on stdout: per case, every tool result text (and error flag) from τ²'s environment, its DB hash (and,
for telecom, both databases' dumps; with "simulation", the run as τ² writes it in a results file), and the reward
and breakdown of τ²'s own `evaluate_simulation` over that trajectory (the answer as the agent's last message,
terminated by an agent stop). Only τ²'s public API is used; nothing of τ² is copied.

Telecom's `break_vpn` degrades τ²'s class-wide default VPN details, which would leak into every later case of
the process: each case starts from a fresh default, as a fresh process would.
"""

import json
import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from loguru import logger  # noqa: E402

logger.remove()

from tau2.data_model.message import AssistantMessage, ToolCall, UserMessage  # noqa: E402
from tau2.data_model.simulation import SimulationRun, TerminationReason  # noqa: E402
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation  # noqa: E402
from tau2.registry import registry  # noqa: E402


def fresh_process_defaults(domain):
    if domain == "telecom":
        from tau2.domains.telecom.user_data_model import PerformanceLevel
        from tau2.domains.telecom.user_tools import TelecomUserTools

        TelecomUserTools.default_vpn_details.server_performance = PerformanceLevel.EXCELLENT


def dumps(db):
    return json.loads(json.dumps(db.model_dump(), default=str))


def play(domain, task, calls, answer, simulation=False, opening=None):
    fresh_process_defaults(domain)
    env = registry.get_env_constructor(domain)()
    state = task.initial_state
    env.set_state(state.initialization_data if state else None, state.initialization_actions if state else None, [])
    messages = [AssistantMessage(role="assistant", content="Hi! How can I help you today?")]
    if opening:  # the user's answer to the greeting
        messages.append(UserMessage(role="user", content=opening))
    results = []
    for i, (name, arguments, *side) in enumerate(calls):
        if name == "message_user":  # the agent's message; the user's own calls ("calls"); the user's reply
            messages.append(AssistantMessage(role="assistant", content=arguments["message"]))
            for j, (user_call, user_arguments) in enumerate(arguments.get("calls") or []):
                call = ToolCall(id=f"u{i}_{j}", name=user_call, arguments=user_arguments, requestor="user")
                messages.append(UserMessage(role="user", tool_calls=[call]))
                messages.append(env.get_response(call))
                env.sync_tools()
            messages.append(UserMessage(role="user", content=arguments.get("reply") or "ok"))
            results.append([None, False])
            continue
        requestor = side[0] if side else "assistant"
        call = ToolCall(id=f"c{i}", name=name, arguments=arguments, requestor=requestor)
        message = UserMessage if requestor == "user" else AssistantMessage
        messages.append(message(role=requestor, tool_calls=[call]))
        reply = env.get_response(call)
        env.sync_tools()
        messages.append(reply)
        results.append([reply.content, bool(reply.error)])
    if answer:
        messages.append(AssistantMessage(role="assistant", content=answer))
    sim = SimulationRun(id="x", task_id=task.id, start_time="", end_time="", duration=0.0,
                        termination_reason=TerminationReason.AGENT_STOP, messages=messages)
    dump = {"agent": dumps(env.tools.db), "user": dumps(env.user_tools.db)} if domain == "telecom" else None
    fresh_process_defaults(domain)
    info = evaluate_simulation(sim, task, EvaluationType.ALL, solo_mode=False, domain=domain)
    breakdown = {str(getattr(k, "value", k)): v for k, v in (info.reward_breakdown or {}).items()}
    out = {"results": results, "db_hash": env.get_db_hash(), "reward": info.reward, "breakdown": breakdown,
           "dump": dump}
    if simulation:  # the run as τ² writes it into a results file (`Results.simulations`)
        out["simulation"] = json.loads(sim.model_dump_json())
    return out


def cache_databases(domain):
    """Read the domain's database file once: τ² re-reads the 7 MB file for each environment (four per case). Each
    environment still gets its own freshly validated models, from a fresh parse of the same text."""
    import importlib

    from tau2.utils import io_utils

    module = importlib.import_module(f"tau2.domains.{domain}.environment")
    texts = {}
    original = io_utils.load_file

    def load_file(path, **kwargs):
        path = str(path)
        if not path.endswith(".json"):
            return original(path, **kwargs)
        if path not in texts:
            with open(path, encoding="utf-8") as f:
                texts[path] = f.read()
        return json.loads(texts[path])

    for mod in {io_utils, module, importlib.import_module("tau2.environment.db")}:
        if hasattr(mod, "load_file"):
            mod.load_file = load_file


def main():
    request = json.load(sys.stdin)
    domain = request["domain"]
    cache_databases(domain)
    tasks = {t.id: t for t in registry.get_tasks_loader(domain)("base")}
    out = [play(domain, tasks[c["task"]], c["calls"], c.get("answer"), c.get("simulation", False), c.get("opening"))
           for c in request["cases"]]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
