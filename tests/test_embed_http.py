"""The embedding-server clients speak each protocol's shape (httpx test transports, no network)."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from pgcite import EmbedderError
from pgcite.embed._http import HttpEmbedder


def _server(flavour: str, seen: list[tuple[str, dict[str, object]]]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((request.url.path, body))
        texts = body.get("input") or body.get("inputs")
        assert isinstance(texts, list)
        vectors = [[float(len(t)), 1.0, 0.0] for t in texts]
        if flavour == "openai":
            data = [{"index": i, "embedding": v} for i, v in reversed(list(enumerate(vectors)))]
            return httpx.Response(200, json={"data": data})
        if flavour == "tei":
            return httpx.Response(200, json=vectors)
        return httpx.Response(200, json={"embeddings": vectors})

    return httpx.MockTransport(handler)


@pytest.mark.parametrize(("flavour", "path"), [
    ("openai", "/v1/embeddings"), ("tei", "/embed"), ("ollama", "/api/embed")])
def test_each_flavour(flavour: str, path: str) -> None:
    seen: list[tuple[str, dict[str, object]]] = []
    emb = HttpEmbedder(flavour, "m", "http://embed.test", transport=_server(flavour, seen))  # type: ignore[arg-type]
    assert emb.spec.id == f"{flavour}:m" and emb.spec.dim == 3
    vectors = emb.embed_documents(["a", "bbb"])
    assert all(p == path for p, _ in seen)
    # unit length, in input order even when the server answers out of order
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert vectors[0][0] < vectors[1][0]
    assert emb.embed_query("cc").shape == (3,)


def test_server_errors_are_clear() -> None:
    broken = httpx.MockTransport(lambda request: httpx.Response(500, text="boom"))
    with pytest.raises(EmbedderError, match="failed"):
        HttpEmbedder("openai", "m", "http://embed.test", transport=broken)
    garbage = httpx.MockTransport(lambda request: httpx.Response(200, json={"nope": 1}))
    with pytest.raises(EmbedderError, match="unexpected shape"):
        HttpEmbedder("ollama", "m", "http://embed.test", transport=garbage)
