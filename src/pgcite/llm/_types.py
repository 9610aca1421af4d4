"""What every language model client offers: one chat turn in, text out, or an :class:`LLMError`."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pgcite._errors import PgciteError


class LLMError(PgciteError):
    """A model could not produce text: timeout, HTTP error, garbage, missing package."""


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: a system and a user message in, the assistant's text out.

    Implementations bound their own time (``timeout_s``) and raise :class:`LLMError` on any
    failure, never another exception type, so a caller can always fall back. One that answers a
    single call at a time may say so with a ``max_concurrency`` attribute (callers that fan out,
    like the ingest's situating calls, then send no more than that at once).
    """

    name: str
    timeout_s: float | None

    def chat(self, system: str, user: str, *, max_tokens: int = 256) -> str: ...
