"""The one OpenAI-compatible Chat Completions client: policies, judges, world models and synthesis use it.

Works against `vllm serve`, SGLang, hosted providers, or the replay server in `mcpworld.core.llm_replay`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx


class LLMError(RuntimeError):
    """The model endpoint failed (timeout, HTTP error, unusable reply); the message says which."""


@dataclass
class Completion:
    message: dict[str, Any]
    usage: dict[str, int] = field(default_factory=dict)
    finish_reason: str | None = None


@dataclass
class ChatClient:
    """POST {base_url}/chat/completions with retries on timeouts, 429 and 5xx."""

    base_url: str = field(default_factory=lambda: os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"))
    model: str = field(default_factory=lambda: os.environ.get("MCPWORLD_MODEL", "default"))
    api_key: str | None = field(default_factory=lambda: os.environ.get("OPENAI_API_KEY"))
    timeout_s: float = 60.0
    retries: int = 2
    sampling: dict[str, Any] = field(default_factory=dict)
    _http: httpx.AsyncClient | None = field(default=None, init=False, repr=False)

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._http = httpx.AsyncClient(base_url=self.base_url.rstrip("/"), headers=headers, timeout=self.timeout_s)
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                       **sampling: Any) -> Completion:
        body: dict[str, Any] = {"model": self.model, "messages": messages, **self.sampling, **sampling}
        if tools:
            body["tools"] = tools
        last = "no attempt made"
        for attempt in range(self.retries + 1):
            try:
                response = await self._client().post("/chat/completions", json=body)
            except httpx.TimeoutException:
                last = f"timed out after {self.timeout_s:g}s"
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    return _parse(response)
                last = f"HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code not in (408, 429) and response.status_code < 500:
                    break
            if attempt < self.retries:
                await anyio.sleep(min(2.0, 0.2 * 2**attempt))
        raise LLMError(f"model endpoint {self.base_url} failed: {last}")


def _parse(response: httpx.Response) -> Completion:
    try:
        data = response.json()
        choice = data["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise LLMError(f"model endpoint returned no choices: {response.text[:300]}") from None
    return Completion(message=message, usage=data.get("usage") or {}, finish_reason=choice.get("finish_reason"))
