"""τ²'s NL_ASSERTION component: an LLM judges whether the conversation meets each of the task's natural-language
assertions; the component is 1 when every judged assertion is met, else 0 (as τ²'s evaluator scores it).

The judge is any OpenAI-compatible endpoint the server is given (`MCPWORLD_JUDGE_MODEL`, `MCPWORLD_JUDGE_BASE_URL`,
else `OPENAI_BASE_URL`); it sees the conversation as τ² renders one (`role: content` lines: the greeting, the
user's and the agent's messages, the agent's calls and their results) and the assertions, and answers
`{"results": [{"expectedOutcome", "reasoning", "metExpectation"}]}`, the shape τ²'s judge answers in. The
instructions are the project's own wording. A judge that fails, or answers in another shape, is the server's
failure (LLMError): the episode is not judged.
"""

from __future__ import annotations

import json
import os
from typing import Any

from mcpworld.core.llm import ChatClient, LLMError

JUDGE_INSTRUCTIONS = """You grade a customer-service conversation against a list of expected outcomes.
The conversation is between an agent (role "assistant") and a customer (role "user"); lines with role "tool"
are what the agent's tool calls returned. Decide for each expected outcome on its own whether the agent met it.
Reply with a JSON object only, in this form:
{"results": [{"expectedOutcome": "<the outcome, repeated from the list>", "reasoning": "<one or two sentences>",
"metExpectation": true or false}]}"""


def judge_client() -> ChatClient | None:
    """The judge model from the environment, or None when `MCPWORLD_JUDGE_MODEL` is unset."""
    model = os.environ.get("MCPWORLD_JUDGE_MODEL")
    if not model:
        return None
    base = os.environ.get("MCPWORLD_JUDGE_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
    return ChatClient(model=model, **({"base_url": base} if base else {}), sampling={"temperature": 0.0})


def transcript(opening: list[dict[str, str]], log: list[tuple[str, dict[str, Any], Any]],
               answer: str | None) -> str:
    """The episode as `role: content` lines: the conversation's opening, then each call in order (a message to the
    user and the user's reply; any other call and its result), then the agent's last message."""
    lines = [f"{m['role']}: {m['content']}" for m in opening]
    for name, arguments, result in log:
        if name == "message_user":
            lines.append(f"assistant: {arguments.get('message', '')}")
            if result.error is None:
                lines.append(f"user: {result.value.get('user', '')}")
            continue
        lines.append(f"assistant: calls {name}({json.dumps(arguments, ensure_ascii=False, sort_keys=True)})")
        lines.append(f"tool: {result.error if result.error is not None else result.value}")
    if answer:
        lines.append(f"assistant: {answer}")
    return "\n".join(lines)


async def judge(client: ChatClient, conversation: str, assertions: list[str]) -> list[dict[str, Any]]:
    """The judge's result per assertion: `{"expectedOutcome", "reasoning", "metExpectation"}`."""
    user = f"conversation:\n{conversation}\n\nexpectedOutcomes:\n{json.dumps(assertions, ensure_ascii=False)}"
    reply = await client.complete([{"role": "system", "content": JUDGE_INSTRUCTIONS},
                                   {"role": "user", "content": user}])
    try:
        results = json.loads(str(reply.message.get("content") or ""))["results"]
        if not isinstance(results, list) or not all(isinstance(r.get("metExpectation"), bool) for r in results):
            raise TypeError
    except (ValueError, KeyError, TypeError, AttributeError):
        raise LLMError(f"the judge model answered in another shape: {str(reply.message.get('content'))[:200]}")
    return results


def nl_reward(results: list[dict[str, Any]]) -> float:
    """1.0 when every judged assertion is met, else 0.0 (τ²: over the results the judge returned)."""
    return 1.0 if all(r["metExpectation"] for r in results) else 0.0
