"""Immutable snapshots: a set of document versions, embedded with one model, with frozen BM25
statistics. Queries see exactly one snapshot (the active one); activation is one UPDATE."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict

from pgcite._errors import PgciteError
from pgcite.embed._base import EmbedderSpec, Vectors
from pgcite.ingest._types import ChunkDraft
from pgcite.store._collections import CollectionInfo

BM25_K1 = 1.2
BM25_B = 0.75

_CHUNK_COLUMNS = (
    "version_pk", "id", "document_id", "ordinal", "corpus", "date_start", "date_end", "author",
    "source", "locator", "citation", "title", "body", "metadata", "embedding", "embed_model",
    "corpus_version", "content_hash",
)


class SnapshotInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    snapshot_id: int
    state: str
    embed_model: str
    embed_dim: int
    ts_config: str
    corpus_version: str | None
    created_at: dt.datetime
    n_documents: int | None
    n_chunks: int | None
    metadata_fields: dict[str, list[str]] | None
    evaluation: dict[str, Any] | None
    note: str | None
    active: bool = False


_SNAPSHOT_SELECT = (
    "SELECT s.snapshot_id, s.state, s.embed_model, s.embed_dim, s.ts_config, s.corpus_version,"
    " s.created_at, s.n_documents, s.n_chunks, s.metadata_fields, s.evaluation, s.note,"
    " coalesce(a.snapshot_id = s.snapshot_id, false)"
    " FROM {s}.snapshots s LEFT JOIN {s}.active a ON true"
)


def _to_snapshot(row: Sequence[Any]) -> SnapshotInfo:
    keys = list(SnapshotInfo.model_fields)
    return SnapshotInfo(**dict(zip(keys, row, strict=True)))


def list_snapshots(conn: psycopg.Connection, info: CollectionInfo) -> list[SnapshotInfo]:
    query = sql.SQL(_SNAPSHOT_SELECT + " ORDER BY s.snapshot_id").format(s=info.schema_id)
    return [_to_snapshot(row) for row in conn.execute(query)]


def active_snapshot(conn: psycopg.Connection, info: CollectionInfo) -> SnapshotInfo | None:
    query = sql.SQL(_SNAPSHOT_SELECT + " WHERE a.snapshot_id = s.snapshot_id").format(
        s=info.schema_id
    )
    row = conn.execute(query).fetchone()
    return _to_snapshot(row) if row else None


def find_versions(
    conn: psycopg.Connection, info: CollectionInfo, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], int]:
    """Existing version ids for (document_id, content_hash) pairs."""
    if not keys:
        return {}
    rows = conn.execute(
        sql.SQL(
            "SELECT v.document_id, v.content_hash, v.version_pk FROM {s}.versions v"
            " JOIN unnest(%s::text[], %s::text[]) AS k(document_id, content_hash)"
            " USING (document_id, content_hash)"
        ).format(s=info.schema_id),
        ([k[0] for k in keys], [k[1] for k in keys]),
    ).fetchall()
    return {(doc, digest): pk for doc, digest, pk in rows}


def insert_version(
    conn: psycopg.Connection,
    info: CollectionInfo,
    *,
    document_id: str,
    content_hash: str,
    source: str,
    chunks: Sequence[ChunkDraft],
    vectors: Vectors,
    spec: EmbedderSpec,
    corpus_version: str | None,
) -> int:
    """Store one document version and its chunks; returns its version_pk."""
    row = conn.execute(
        sql.SQL(
            "INSERT INTO {s}.versions (document_id, content_hash, source, n_chunks)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT (document_id, content_hash) DO UPDATE"
            " SET n_chunks = EXCLUDED.n_chunks RETURNING version_pk, xmax = 0"
        ).format(s=info.schema_id),
        (document_id, content_hash, source, len(chunks)),
    ).fetchone()
    assert row is not None
    version_pk, inserted = row
    if not inserted:  # a concurrent ingest stored the same version first
        return int(version_pk)
    copy_sql = sql.SQL("COPY {s}.chunks ({cols}) FROM STDIN").format(
        s=info.schema_id, cols=sql.SQL(", ").join(map(sql.Identifier, _CHUNK_COLUMNS))
    )
    with conn.cursor() as cur, cur.copy(copy_sql) as copy:
        for chunk, vector in zip(chunks, vectors, strict=True):
            copy.write_row((
                version_pk, chunk.id, chunk.document_id, chunk.ordinal, chunk.corpus,
                chunk.date_start, chunk.date_end, chunk.author, chunk.source, chunk.locator,
                chunk.citation, chunk.title, chunk.body, Jsonb(chunk.metadata),
                _vector_text(vector), spec.model_key, corpus_version, content_hash,
            ))
    return int(version_pk)


def _vector_text(vector: Vectors) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in np.asarray(vector, dtype=np.float32)) + "]"


def member_versions(conn: psycopg.Connection, info: CollectionInfo, snapshot_id: int) -> dict[
        str, int]:
    """document_id -> version_pk of a snapshot's members."""
    rows = conn.execute(
        sql.SQL(
            "SELECT v.document_id, v.version_pk FROM {s}.snapshot_members m"
            " JOIN {s}.versions v USING (version_pk) WHERE m.snapshot_id = %s"
        ).format(s=info.schema_id),
        (snapshot_id,),
    ).fetchall()
    return {doc: pk for doc, pk in rows}


def build_snapshot(
    conn: psycopg.Connection,
    info: CollectionInfo,
    version_pks: Iterable[int],
    *,
    spec: EmbedderSpec,
    corpus_version: str | None = None,
    note: str | None = None,
) -> int:
    """Create a ready snapshot over these versions, with BM25 postings and statistics."""
    row = conn.execute(
        sql.SQL(
            "INSERT INTO {s}.snapshots (embed_model, embed_dim, ts_config, corpus_version, note,"
            " bm25_k1, bm25_b) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING snapshot_id"
        ).format(s=info.schema_id),
        (spec.model_key, spec.dim, info.ts_config, corpus_version, note, BM25_K1, BM25_B),
    ).fetchone()
    assert row is not None
    snapshot_id = int(row[0])
    conn.execute(
        sql.SQL(
            "INSERT INTO {s}.snapshot_members (snapshot_id, version_pk)"
            " SELECT %s, unnest(%s::bigint[])"
        ).format(s=info.schema_id),
        (snapshot_id, sorted(set(version_pks))),
    )
    _check_single_model(conn, info, snapshot_id, spec)
    conn.execute(_POSTINGS_SQL.format(s=info.schema_id), {
        "sid": snapshot_id, "k1": BM25_K1, "b": BM25_B})
    conn.execute(_FINALIZE_SQL.format(s=info.schema_id), {"sid": snapshot_id})
    return snapshot_id


def _check_single_model(
    conn: psycopg.Connection, info: CollectionInfo, snapshot_id: int, spec: EmbedderSpec
) -> None:
    other = conn.execute(
        sql.SQL(
            "SELECT DISTINCT c.embed_model FROM {s}.chunks c JOIN {s}.snapshot_members m"
            " USING (version_pk) WHERE m.snapshot_id = %s AND c.embed_model <> %s"
        ).format(s=info.schema_id),
        (snapshot_id, spec.model_key),
    ).fetchall()
    if other:
        raise PgciteError(
            f"snapshot would mix embedding models ({spec.model_key} and {other[0][0]})",
            hint="re-embed every document with one model (a full rebuild)",
        )


# BM25 (Robertson/Lucene idf, k1/b saturation and length normalisation) precomputed per snapshot.
# Term frequencies and lengths come from the same tsvector the GIN index uses, so the keyword
# leg sees exactly PostgreSQL's analyser (stemming, stop words) for the collection's language.
_POSTINGS_SQL = sql.SQL("""
WITH members AS (
    SELECT c.chunk_pk, c.tsv FROM {s}.chunks c
    JOIN {s}.snapshot_members m USING (version_pk) WHERE m.snapshot_id = %(sid)s
), tf AS (
    SELECT m.chunk_pk, t.lexeme AS term, cardinality(t.positions)::float8 AS tf
    FROM members m, unnest(m.tsv) AS t
), dl AS (
    SELECT chunk_pk, sum(tf) AS dl FROM tf GROUP BY chunk_pk
), stats AS (
    SELECT (SELECT count(*) FROM members)::float8 AS n, coalesce(avg(dl), 1) AS avgdl FROM dl
), df AS (
    SELECT term, count(*)::float8 AS df FROM tf GROUP BY term
), weighted AS (
    SELECT tf.term, tf.chunk_pk,
           (ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5))
            * tf.tf * (%(k1)s + 1)
            / (tf.tf + %(k1)s * (1 - %(b)s + %(b)s * dl.dl / stats.avgdl)))::real AS weight
    FROM tf JOIN dl USING (chunk_pk) JOIN df USING (term) CROSS JOIN stats
)
INSERT INTO {s}.postings (snapshot_id, term, chunk_pks, weights)
SELECT %(sid)s, term,
       array_agg(chunk_pk ORDER BY weight DESC, chunk_pk),
       array_agg(weight ORDER BY weight DESC, chunk_pk)
FROM weighted GROUP BY term
""")

_FINALIZE_SQL = sql.SQL("""
WITH members AS (
    SELECT c.* FROM {s}.chunks c
    JOIN {s}.snapshot_members m USING (version_pk) WHERE m.snapshot_id = %(sid)s
), fields AS (
    SELECT coalesce(jsonb_object_agg(key, types), '{{}}'::jsonb) AS f FROM (
        SELECT e.key, jsonb_agg(DISTINCT jsonb_typeof(e.value)) AS types
        FROM members, jsonb_each(members.metadata) AS e GROUP BY e.key) k
)
UPDATE {s}.snapshots SET
    state = 'ready',
    finalized_at = now(),
    n_documents = (SELECT count(DISTINCT document_id) FROM members),
    n_chunks = (SELECT count(*) FROM members),
    avg_length = (SELECT avg(length(tsv)) FROM members),
    metadata_fields = (SELECT f FROM fields)
WHERE snapshot_id = %(sid)s
""")


def activate_snapshot(
    conn: psycopg.Connection,
    info: CollectionInfo,
    snapshot_id: int,
    *,
    forced: bool = False,
    detail: dict[str, Any] | None = None,
) -> int | None:
    """Make ``snapshot_id`` the active one (in the caller's transaction); returns the previous."""
    state = conn.execute(
        sql.SQL("SELECT state FROM {s}.snapshots WHERE snapshot_id = %s").format(s=info.schema_id),
        (snapshot_id,),
    ).fetchone()
    if state is None or state[0] != "ready":
        raise PgciteError(
            f"snapshot {snapshot_id} of {info.name!r} is not ready to activate"
            + (f" (state: {state[0]})" if state else " (no such snapshot)"),
            hint="see `pgcite snapshot list`",
        )
    # Lock the pointer row so two activations serialise.
    previous = conn.execute(
        sql.SQL("SELECT snapshot_id FROM {s}.active FOR UPDATE").format(s=info.schema_id)
    ).fetchone()
    previous_id = previous[0] if previous else None
    conn.execute(
        sql.SQL(
            "INSERT INTO {s}.active (singleton, snapshot_id, previous_id) VALUES (true, %s, %s)"
            " ON CONFLICT (singleton) DO UPDATE SET snapshot_id = EXCLUDED.snapshot_id,"
            " previous_id = EXCLUDED.previous_id, activated_at = now()"
        ).format(s=info.schema_id),
        (snapshot_id, previous_id),
    )
    conn.execute(
        sql.SQL(
            "INSERT INTO {s}.activations (snapshot_id, previous_id, forced, detail)"
            " VALUES (%s, %s, %s, %s)"
        ).format(s=info.schema_id),
        (snapshot_id, previous_id, forced, Jsonb(detail or {})),
    )
    conn.execute("SELECT pg_notify('pgcite_active', %s)", (f"{info.name}:{snapshot_id}",))
    return previous_id
