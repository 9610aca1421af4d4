"""Re-embed the active snapshot with another model, into a new, inactive snapshot.

The stored chunks are re-embedded exactly as they are -- same citation ids, bodies, dates and
locators -- so a model switch changes which passages rank where, never what a citation points to.
Each document gets a new version (its content hash is the old one plus the model key), so the
old snapshot keeps serving, untouched, until the new one is activated; the collection's recorded
embedder changes only then. Crash safety is the ingest's: embeddings are cached batch by batch and
everything else is written in one transaction, so a killed run resumes from the cache.

A later ``pgcite ingest`` of unchanged sources under the new model re-chunks them for its token
budget once (its versions are keyed by the source, which is not stored); pass the sources to
``pgcite snapshot build COLLECTION PATH --replace --embedder ID`` to switch that way instead.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import psycopg
from psycopg import sql

from pgcite._errors import ConfigError, EmbedderError, PgciteError
from pgcite._types import ChunkDraft, Contextual
from pgcite.config import Settings
from pgcite.embed._base import Embedder, Vectors
from pgcite.embed._registry import load_embedder
from pgcite.ingest._chunking import embedding_text
from pgcite.ingest._pipeline import IngestReport, embed_texts
from pgcite.store._collections import CollectionInfo, ensure_vector_index, get_collection
from pgcite.store._database import Database
from pgcite.store._snapshots import (
    SnapshotInfo,
    active_snapshot,
    build_snapshot,
    find_versions,
    insert_version,
    lock_versions,
    plan_snapshot,
)

_DRAFT_FIELDS = (
    "id", "document_id", "ordinal", "body", "title", "locator", "date_start", "date_end",
    "author", "corpus", "source", "citation", "metadata", "context",
)


class _StoredDocument:
    """One member version of the active snapshot: its chunks, as stored."""

    def __init__(self, content_hash: str, source: str, corpus_version: str | None,
                 provenance: dict[str, Any] | None) -> None:
        self.content_hash = content_hash
        self.source = source
        self.corpus_version = corpus_version
        self.provenance = provenance  # what the user gave it stays with the new version
        self.chunks: list[ChunkDraft] = []


def reembed(
    db: Database,
    collection: str,
    embedder_id: str,
    *,
    progress: bool = True,
    settings: Settings | None = None,
) -> IngestReport:
    """Build a new inactive snapshot: the active one's chunks, embedded with ``embedder_id``."""
    started = time.monotonic()
    settings = settings or Settings()
    with db.connect() as conn:
        info = get_collection(conn, collection)
        current = _require_active(conn, info)
        embedder = load_embedder(embedder_id, settings)
        if embedder.spec.model_key == current.embed_model:
            raise ConfigError(f"snapshot {current.snapshot_id} of {collection!r} is embedded "
                              f"with {embedder.spec.model_key} already")
        docs = _stored_documents(conn, info, current.snapshot_id)
    contextual = info.settings.contextual  # the same text an ingest would embed
    _check_fits(embedder, docs, contextual)
    with db.transaction() as conn:  # before any chunk of this model exists: an empty build
        ensure_vector_index(conn, info.schema_name, embedder.spec, info.settings.halfvec)
    report = IngestReport(collection=collection, documents=len(docs))
    texts = [embedding_text(c, contextual) for doc in docs.values() for c in doc.chunks]
    vectors = embed_texts(db, embedder, texts, report, label="re-embedding", progress=progress,
                          batch_size=settings.embed_batch_size)
    with db.transaction() as conn:
        pks = _store(conn, info, docs, vectors, embedder, report, contextual)
        plan = plan_snapshot(conn, info, pks, spec=embedder.spec, content_id=None,
                             replace_all=True)
        report.snapshot_id = build_snapshot(
            conn, info, plan, spec=embedder.spec, corpus_version=current.corpus_version,
            note=f"re-embed of snapshot {current.snapshot_id} with {embedder.spec.model_key}",
        )
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _require_active(conn: psycopg.Connection, info: CollectionInfo) -> SnapshotInfo:
    current = active_snapshot(conn, info)
    if current is None:
        raise PgciteError(f"collection {info.name!r} has no active snapshot to re-embed",
                          hint="give the sources: pgcite snapshot build NAME PATH --embedder ID")
    return current


def version_hash(old_hash: str, model_key: str, contextual: Contextual = "off") -> str:
    """The re-embedded version's key: a re-run finds it, another model (or another contextual
    setting) gets another one."""
    mode = "" if contextual == "off" else f"|{contextual}"
    return hashlib.sha256(f"{old_hash}|reembed|{model_key}{mode}".encode()).hexdigest()


def _stored_documents(
    conn: psycopg.Connection, info: CollectionInfo, snapshot_id: int
) -> dict[str, _StoredDocument]:
    query = sql.SQL(
        "SELECT v.document_id, v.content_hash, v.source, v.provenance, c.corpus_version,"
        " {fields}"
        " FROM {s}.snapshot_members m JOIN {s}.versions v USING (version_pk)"
        " JOIN {s}.chunks c USING (version_pk)"
        " WHERE m.snapshot_id = %s ORDER BY v.document_id, c.ordinal"
    ).format(s=info.schema_id,
             fields=sql.SQL(", ").join(sql.Identifier("c", f) for f in _DRAFT_FIELDS))
    docs: dict[str, _StoredDocument] = {}
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        for row in cur.execute(query, (snapshot_id,)):
            doc = docs.get(row["document_id"])
            if doc is None:
                doc = docs[row["document_id"]] = _StoredDocument(
                    row["content_hash"], row["source"] or "", row["corpus_version"],
                    row["provenance"])
            doc.chunks.append(ChunkDraft(**{f: row[f] for f in _DRAFT_FIELDS}))
    return docs


def _check_fits(
    embedder: Embedder, docs: dict[str, _StoredDocument], contextual: Contextual
) -> None:
    """The chunks were cut for the old model's budget; the new model must see them whole."""
    limit = embedder.spec.max_tokens - 2  # the two special tokens every sequence carries
    for doc in docs.values():
        for chunk in doc.chunks:
            tokens = embedder.count_tokens(embedding_text(chunk, contextual))
            if tokens > limit:
                raise EmbedderError(
                    f"chunk {chunk.id} has {tokens} tokens for {embedder.spec.id}, "
                    f"which reads at most {limit}: re-embedding would truncate it",
                    hint="re-chunk from the sources instead: pgcite snapshot build "
                    "COLLECTION PATH --replace --embedder " + embedder.spec.id,
                )


def _store(
    conn: psycopg.Connection,
    info: CollectionInfo,
    docs: dict[str, _StoredDocument],
    vectors: Vectors,
    embedder: Embedder,
    report: IngestReport,
    contextual: Contextual,
) -> list[int]:
    """New versions (or the ones a killed earlier run committed) for every document."""
    key = embedder.spec.model_key
    hashes = {doc_id: version_hash(doc.content_hash, key, contextual)
              for doc_id, doc in docs.items()}
    existing = find_versions(conn, info, list(hashes.items()))
    lock_versions(conn, info, existing.values())
    pks: list[int] = []
    offset = 0
    for doc_id, doc in docs.items():
        n = len(doc.chunks)
        pk = existing.get((doc_id, hashes[doc_id]))
        if pk is None:
            pk = insert_version(
                conn, info, document_id=doc_id, content_hash=hashes[doc_id], source=doc.source,
                chunks=doc.chunks, vectors=vectors[offset: offset + n],
                spec=embedder.spec, corpus_version=doc.corpus_version,
                provenance=doc.provenance,
            )
            report.new_versions += 1
            report.chunks_added += n
        else:
            report.unchanged += 1
        pks.append(pk)
        offset += n
    return pks
