"""Embedding servers: OpenAI-compatible ``/v1/embeddings``, Hugging Face TEI ``/embed``, Ollama
``/api/embed``. For users who run their own embedding service."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from pgcite._errors import EmbedderError
from pgcite.embed._base import EmbedderSpec, Vectors, normalize

Flavour = Literal["openai", "tei", "ollama"]

if TYPE_CHECKING:  # imported where a request is made: a command without one does without it
    import httpx


class HttpEmbedder:
    """Calls an embedding server. The dimension is probed once; tokens are estimated (chars/4)
    because the server's tokenizer is not at hand, with a conservative ``max_tokens``."""

    def __init__(
        self,
        flavour: Flavour,
        model: str,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_tokens: int = 512,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )
        self._flavour = flavour
        self._model = model
        dim = self._call(["dimension probe"]).shape[1]
        self.spec = EmbedderSpec(
            id=f"{flavour}:{model}", version="remote", dim=dim, max_tokens=max_tokens,
            note=f"embedding server at {base_url}",
        )

    def _request(self, texts: list[str]) -> tuple[str, dict[str, Any]]:
        if self._flavour == "openai":
            return "/v1/embeddings", {"model": self._model, "input": texts}
        if self._flavour == "tei":
            return "/embed", {"inputs": texts, "truncate": True}
        return "/api/embed", {"model": self._model, "input": texts}

    @staticmethod
    def _parse(flavour: Flavour, body: Any) -> list[list[float]]:
        if flavour == "openai":
            rows = sorted(body["data"], key=lambda item: item["index"])
            return [row["embedding"] for row in rows]
        if flavour == "tei":
            return list(body)
        return list(body["embeddings"])

    def _call(self, texts: list[str]) -> Vectors:
        import httpx

        path, payload = self._request(texts)
        try:
            response = self._client.post(path, json=payload)
            response.raise_for_status()
            rows = self._parse(self._flavour, response.json())
        except httpx.HTTPError as exc:
            raise EmbedderError(
                f"embedding server {self._client.base_url} failed: {exc}",
                hint="check PGCITE_EMBED_URL and that the server is up",
            ) from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbedderError(
                f"embedding server {self._client.base_url} answered in an unexpected shape",
                hint=f"is it really a {self._flavour} embedding endpoint?",
            ) from exc
        if len(rows) != len(texts):
            raise EmbedderError("embedding server returned a different number of vectors")
        return normalize(np.asarray(rows, dtype=np.float32))

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.spec.dim), dtype=np.float32)
        return self._call(list(texts))

    def embed_query(self, text: str) -> Vectors:
        vector: Vectors = self._call([text])[0]
        return vector

    def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1
