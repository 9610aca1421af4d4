"""HyDE: the LLM writes a short hypothetical passage that would answer the question, and the
passage — not the question — is embedded for the vector leg (the keyword leg keeps the question's
own words). Both the passage and its vector are cached, so a repeated question costs nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

import numpy as np

from pgcite.embed._base import Embedder
from pgcite.llm import ChatModel, LLMError, call_bounded

K = TypeVar("K")
V = TypeVar("V")

HYDE_SYSTEM = (
    "Write one short passage (2-4 sentences) that could appear in a document answering the "
    "question. Write it as the document would, with the words such a source would use. "
    "No preamble, no list, no question back."
)
MIN_CHARS = 20


class LRU(Generic[K, V]):
    """A small thread-safe least-recently-used cache."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            if key not in self._data:
                return None
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)


_PASSAGES: LRU[tuple[str, str], str] = LRU()
_VECTORS: LRU[tuple[str, str], np.ndarray] = LRU()


def hypothetical_passage(chat: ChatModel, question: str, *, timeout_s: float) -> str:
    """The LLM's passage for ``question`` (cached per model); LLMError if none in time."""
    key = (_model_id(chat), question)
    cached = _PASSAGES.get(key)
    if cached is not None:
        return cached
    text = call_bounded(lambda: chat.chat(HYDE_SYSTEM, f"Question: {question}", max_tokens=160),
                        timeout_s, "hyde")
    text = " ".join(text.split())
    if len(text) < MIN_CHARS:
        raise LLMError(f"hyde: the passage is too short to embed ({len(text)} characters)")
    _PASSAGES.put(key, text)
    return text


def hyde_vector(chat: ChatModel, embedder: Embedder, question: str, *,
                timeout_s: float) -> tuple[np.ndarray, str]:
    """The embedding of the hypothetical passage (as a document, the way passages are
    embedded), and the passage itself for the trace."""
    passage = hypothetical_passage(chat, question, timeout_s=timeout_s)
    key = (embedder.spec.model_key, passage)
    vector = _VECTORS.get(key)
    if vector is None:
        vector = np.asarray(embedder.embed_documents([passage])[0], dtype=np.float32)
        _VECTORS.put(key, vector)
    return vector, passage


def _model_id(chat: ChatModel) -> str:
    return f"{chat.name}:{getattr(chat, 'model', '')}:{getattr(chat, 'model_path', '')}"
