"""A persistent embedding cache in ``pgcite.embedding_cache``.

Keyed by (collection, model id@version, sha256 of the exact text), committed batch by batch in its
own connection: an ingest killed half-way keeps what it embedded, and the next run embeds nothing
twice.

Why per collection: a cache shared by every collection answers "has anyone embedded this exact
text?" -- through the ingest report's ``cached`` count and through the ingest's speed -- so an
admin of one collection could test guessed texts against another. Scoped, the same text in two
collections is embedded twice (bench/reliability.py measures that cost); within one collection
re-ingests and resumed runs still embed nothing twice. The rows go with their collection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pgcite.embed._base import Embedder, Vectors, as_array, text_sha256
from pgcite.store._database import Database
from pgcite.store._text_cache import cached


@dataclass
class EmbedCounts:
    embedded: int = 0
    cached: int = 0


def embed_with_cache(
    db: Database,
    embedder: Embedder,
    texts: Sequence[str],
    *,
    scope: str,
    batch_size: int = 64,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[Vectors, EmbedCounts]:
    """Vectors for ``texts`` (in order), embedding only those ``scope``'s cache lacks (``scope``
    is the collection's name).

    ``on_progress(done, total)`` is called after each batch; ``total`` counts distinct texts.
    """
    key = embedder.spec.model_key
    shas = [text_sha256(text) for text in texts]
    found: dict[bytes, Vectors] = {}
    counts = EmbedCounts()
    with db.connect(autocommit=True) as conn:
        found.update((sha, as_array(vec)) for sha, vec in cached(
            conn, table="embedding_cache", value="embedding", model_column="model_key",
            scope=scope, model=key, shas=shas).items())
        missing = [i for i, sha in enumerate(shas) if sha not in found]
        # The same text twice in one run is embedded once.
        todo = list({shas[i]: i for i in missing}.values())
        # Longest first, so each batch pads to texts of about its own length (the order of
        # the cache rows is free; the result below is in the callers' order).
        todo.sort(key=lambda i: -len(texts[i]))
        counts.cached = len(texts) - len(missing)
        total = len(found) + len(todo)
        if on_progress:
            on_progress(len(found), total)
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            vectors = embedder.embed_documents([texts[i] for i in batch])
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO pgcite.embedding_cache"
                    " (collection, model_key, text_sha256, embedding)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    [(scope, key, shas[i], vec) for i, vec in zip(batch, vectors, strict=True)],
                )
            for i, vec in zip(batch, vectors, strict=True):
                found[shas[i]] = vec
            counts.embedded += len(batch)
            if on_progress:
                on_progress(len(found), total)
    dim = embedder.spec.dim
    if not texts:
        return np.zeros((0, dim), dtype=np.float32), counts
    return np.stack([found[sha] for sha in shas]), counts
