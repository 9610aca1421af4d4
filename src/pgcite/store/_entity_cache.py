"""A persistent cache of what an entity model found in each chunk text, in ``pgcite.entity_cache``.

Keyed by (collection, model package@version, sha256 of the exact text read), like the embedding
cache (store/_embedding_cache.py) and for the same reasons: a re-ingest that makes new versions
of documents whose text barely changed (a renamed file, a re-dated one) reads only the changed
chunks with the model, and a killed ingest keeps what it read (rows are committed per call, in
their own connection). Per collection, so that it tells nobody whether another collection
holds a text. What is stored is the model's output as it is (label and text of every entity);
the caller filters labels and normalises names when it reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from psycopg.types.json import Jsonb

from pgcite.embed._base import text_sha256
from pgcite.store._database import Database
from pgcite.store._text_cache import cached

# (label, text) of each entity a model found in one text, in order
Found = list[tuple[str, str]]

def read_with_cache(
    db: Database, model: str, read: Callable[[list[str]], list[Found]],
    texts: Sequence[str], *, scope: str,
) -> tuple[list[Found], int]:
    """What ``model`` finds in each of ``texts`` (in order), running ``read`` only on the texts
    ``scope``'s cache lacks (each distinct text once); returns it and how many texts ``read``
    ran on. ``scope`` is the collection's name."""
    shas = [text_sha256(text) for text in texts]
    found: dict[bytes, Found] = {}
    with db.connect(autocommit=True) as conn:
        found.update((sha, [(str(label), str(text)) for label, text in value])
                     for sha, value in cached(conn, table="entity_cache", value="found",
                                              model_column="model", scope=scope, model=model,
                                              shas=shas).items())
        todo = list({sha: i for i, sha in enumerate(shas) if sha not in found}.values())
        if todo:
            fresh = read([texts[i] for i in todo])
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO pgcite.entity_cache (collection, model, text_sha256, found)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    [(scope, model, shas[i], Jsonb(f)) for i, f in zip(todo, fresh, strict=True)])
            found.update((shas[i], f) for i, f in zip(todo, fresh, strict=True))
    return [found[sha] for sha in shas], len(todo)
