"""Streamed chat completions: text pieces as the model writes them, under the same bounds as
a whole reply (a deadline on the whole response, 1 MiB in total, :class:`LLMError` on failure).

OpenAI-compatible servers stream server-sent events (``"stream": true``); a model without a
streaming client yields its whole reply as one piece, so every :class:`ChatModel` can stream.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pgcite.llm._http import MAX_RESPONSE_BYTES, OpenAIChat
from pgcite.llm._types import ChatModel, LLMError

if TYPE_CHECKING:  # imported where a request is made: a command without one does without it
    import httpx


def chat_stream(chat: ChatModel, system: str, user: str, *, max_tokens: int = 256
                ) -> Iterator[str]:
    """``chat``'s reply in pieces (one piece for models that cannot stream)."""
    if isinstance(chat, OpenAIChat):
        yield from _openai(chat, system, user, max_tokens)
    else:
        yield chat.chat(system, user, max_tokens=max_tokens)


def _openai(chat: OpenAIChat, system: str, user: str, max_tokens: int) -> Iterator[str]:
    import httpx

    headers = {"Authorization": f"Bearer {chat.api_key}"} if chat.api_key else {}
    body = {"model": chat.model, "temperature": 0, "max_tokens": max_tokens, "stream": True,
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": user}]}
    timeout = chat.timeout_s or 0.0
    deadline = time.monotonic() + timeout
    try:
        with chat._http.stream("POST", chat.base_url + "/chat/completions", json=body,
                               headers=headers) as resp:
            if resp.status_code >= 400:
                snippet = resp.read()[:200].decode("utf-8", "replace")
                raise LLMError(f"openai: HTTP {resp.status_code}: {snippet}")
            yield from _events(resp, deadline, timeout)
    except httpx.TimeoutException:
        raise LLMError(f"openai: no answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise LLMError(f"openai: {type(exc).__name__}: {exc}",
                       hint=f"is the server at {chat.base_url} up?") from None


def _events(resp: httpx.Response, deadline: float, timeout: float) -> Iterator[str]:
    size, streamed, other = 0, False, []
    for line in resp.iter_lines():
        size += len(line) + 1
        if size > MAX_RESPONSE_BYTES:
            raise LLMError("openai: response larger than 1 MiB")
        if time.monotonic() > deadline:
            raise LLMError(f"openai: no answer within {timeout:g} s")
        if not line.startswith("data:"):
            other.append(line)  # comments, event names, blank separators, or a whole reply
            continue
        streamed = True
        data = line[5:].strip()
        if data == "[DONE]":
            return
        piece = _delta(data)
        if piece:
            yield piece
    if not streamed:  # a server that ignored "stream": its reply is one ordinary completion
        yield _whole("\n".join(other))


def _whole(text: str) -> str:
    try:
        content = json.loads(text)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise LLMError("openai: the streamed response has neither events nor a completion") \
            from None
    if not isinstance(content, str):
        raise LLMError("openai: unexpected response shape: message.content is not text")
    return content


def _delta(data: str) -> str:
    try:
        event: Any = json.loads(data)
        content = event["choices"][0].get("delta", {}).get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise LLMError("openai: unexpected stream event (no choices[0].delta)") from None
    if content is not None and not isinstance(content, str):
        raise LLMError("openai: unexpected stream event: delta.content is not text")
    return content or ""
