"""A real local OpenAI-compatible HTTP server that replays recorded completions.

It stands in for a model where none can run (tests, offline demos): each conversation is matched to a
script by a substring of its first user message, and gets that script's replies in order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from mcpworld.core.serving import serve_in_thread

Reply = dict[str, Any]  # an assistant message (+ "finish_reason"), or {"status": 500} / {"sleep": 5} / {"raw": "..."}


class ReplayLLM:
    """Scripts keyed by a substring of the conversation's first user message."""

    def __init__(self, scripts: dict[str, list[Reply]], drops_tools: bool = False):
        self.scripts = scripts
        self.drops_tools = drops_tools  # like llama-cpp-python's default chat handler: `tools` never reach the prompt
        self.requests: list[dict[str, Any]] = []

    def _script(self, messages: list[dict[str, Any]]) -> tuple[str, list[Reply]] | None:
        first_user = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
        for key, replies in self.scripts.items():
            if key in first_user:
                return key, replies
        return None

    def reply_for(self, messages: list[dict[str, Any]]) -> Reply | None:
        found = self._script(messages)
        if found is None:
            return None
        _, replies = found
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        return replies[turn] if turn < len(replies) else {"role": "assistant", "content": "Done."}

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        reply = self.reply_for(body.get("messages") or [])
        if reply is None:
            return JSONResponse({"error": {"message": "no script matches this conversation"}}, status_code=404)
        if "sleep" in reply:
            await anyio.sleep(float(reply["sleep"]))
        if "status" in reply:
            return JSONResponse({"error": {"message": "scripted failure"}}, status_code=int(reply["status"]))
        if "raw" in reply:
            return PlainTextResponse(reply["raw"])
        message = {"role": "assistant", "content": reply.get("content")}
        if reply.get("tool_calls"):
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function",
                 "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
                for i, c in enumerate(reply["tool_calls"])
            ]
        return JSONResponse({
            "id": "replay", "object": "chat.completion", "model": body.get("model", "replay"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": reply.get("finish_reason")
                         or ("tool_calls" if reply.get("tool_calls") else "stop")}],
            "usage": {"prompt_tokens": sum(len(str(m.get("content") or "")) // 4 for m in body["messages"])
                      + (0 if self.drops_tools else len(json.dumps(body.get("tools") or [])) // 4),
                      "completion_tokens": len(str(reply.get("content") or "")) // 4 + 1, "total_tokens": 0},
        })

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])


@contextmanager
def serve(llm: ReplayLLM, port: int) -> Iterator[str]:
    """Run the replay server on 127.0.0.1:port in a background thread; yields its /v1 base URL."""
    with serve_in_thread(llm.app(), port) as base:
        yield f"{base}/v1"


