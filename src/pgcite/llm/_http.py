"""Chat models behind HTTP: any OpenAI-compatible server (OpenAI, vLLM, Ollama's /v1, the
llama.cpp server) and Anthropic's Messages API.

Every call has a deadline: ``timeout_s`` bounds each network step (connect, each read) AND the
whole response (read as a stream, so a server that trickles bytes is cut off too), and responses
over 1 MiB are refused. Any failure raises :class:`LLMError`.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from pgcite.llm._types import LLMError

if TYPE_CHECKING:  # imported where a request is made: a command without one does without it
    import httpx

MAX_RESPONSE_BYTES = 1 << 20


class HttpJsonClient:
    """Shared HTTP plumbing: one pooled client, a total deadline, a size cap, JSON or LLMError.

    ``transport`` lets tests see the exact requests (``httpx.MockTransport``).
    """

    name = "http"

    def __init__(self, base_url: str, timeout_s: float,
                 transport: httpx.BaseTransport | None = None, *,
                 name: str | None = None) -> None:
        if name is not None:
            self.name = name  # the prefix of every error message
        if not base_url.startswith(("http://", "https://")):
            raise LLMError(f"{self.name}: base URL must start with http:// or https://")
        self.base_url = base_url.rstrip("/")
        self.timeout_s: float | None = timeout_s
        import httpx

        self._http = httpx.Client(timeout=httpx.Timeout(timeout_s), transport=transport)

    def post_json(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
        import httpx

        timeout = self.timeout_s or 0.0
        deadline = time.monotonic() + timeout
        try:
            with self._http.stream("POST", self.base_url + path, json=body,
                                   headers=headers) as resp:
                data = self._read(resp, deadline)
        except httpx.TimeoutException:
            raise LLMError(f"{self.name}: no answer within {timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise LLMError(f"{self.name}: {type(exc).__name__}: {exc}",
                           hint=f"is the server at {self.base_url} up?") from None
        if resp.status_code >= 400:
            snippet = data[:200].decode("utf-8", "replace")
            raise LLMError(f"{self.name}: HTTP {resp.status_code}: {snippet}")
        try:
            return json.loads(data)
        except ValueError:
            raise LLMError(f"{self.name}: the response is not JSON") from None

    def _read(self, resp: httpx.Response, deadline: float) -> bytes:
        chunks: list[bytes] = []
        size = 0
        for chunk in resp.iter_bytes():
            size += len(chunk)
            if size > MAX_RESPONSE_BYTES:
                raise LLMError(f"{self.name}: response larger than 1 MiB")
            if time.monotonic() > deadline:
                raise LLMError(f"{self.name}: no answer within {self.timeout_s:g} s")
            chunks.append(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self._http.close()


def text_at(value: Any, where: str) -> str:
    """``value`` if it is text; a clear LLMError naming ``where`` in the response otherwise."""
    if not isinstance(value, str):
        raise LLMError(f"unexpected response shape: {where} is not text")
    return value


class OpenAIChat(HttpJsonClient):
    """``POST {base_url}/chat/completions``: OpenAI, vLLM, Ollama (/v1), llama.cpp server."""

    name = "openai"

    def __init__(self, *, base_url: str, model: str, api_key: str | None = None,
                 timeout_s: float = 30.0, transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(base_url, timeout_s, transport)
        self.model, self.api_key = model, api_key

    def chat(self, system: str, user: str, *, max_tokens: int = 256) -> str:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        data = self.post_json("/chat/completions", {
            "model": self.model, "temperature": 0, "max_tokens": max_tokens,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": user}],
        }, headers)
        try:
            return text_at(data["choices"][0]["message"]["content"],
                           "choices[0].message.content")
        except (KeyError, IndexError, TypeError):
            raise LLMError("openai: unexpected response shape (no choices[0].message)") \
                from None


class AnthropicChat(HttpJsonClient):
    """``POST {base_url}/v1/messages`` (Anthropic Messages API)."""

    name = "anthropic"
    API_VERSION = "2023-06-01"

    def __init__(self, *, model: str, api_key: str | None,
                 base_url: str = "https://api.anthropic.com", timeout_s: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(base_url, timeout_s, transport)
        self.model, self.api_key = model, api_key

    def chat(self, system: str, user: str, *, max_tokens: int = 256) -> str:
        headers = {"anthropic-version": self.API_VERSION}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        data = self.post_json("/v1/messages", {
            "model": self.model, "max_tokens": max_tokens, "temperature": 0,
            "system": system, "messages": [{"role": "user", "content": user}],
        }, headers)
        try:
            blocks = data["content"]
            texts = [text_at(b["text"], "content[].text") for b in blocks
                     if b.get("type") == "text"]
        except (KeyError, TypeError, AttributeError):
            raise LLMError("anthropic: unexpected response shape (no content blocks)") from None
        if not texts:
            raise LLMError("anthropic: the response has no text block")
        return "".join(texts)
