"""Ingest: load → chunk → embed (cached) → store as a new snapshot, all or nothing.

Crash safety comes from the order of work: embeddings are committed to the cache batch by batch
(so a killed run loses no embedding work), and everything users can see — versions, chunks, the
snapshot, its BM25 postings and the active pointer — is written in ONE transaction at the end.
A run killed at any moment leaves the collection exactly as it was; re-running resumes from the
cache.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from pgcite._errors import LoadError
from pgcite._progress import progress_bar
from pgcite.config import Settings
from pgcite.embed._base import Embedder
from pgcite.embed._cache import embed_with_cache
from pgcite.embed._registry import embedder_for
from pgcite.ingest._chunking import chunk_document
from pgcite.ingest._loaders import FieldMapping, Overrides, iter_documents
from pgcite.ingest._types import ChunkDraft, Document
from pgcite.store._collections import CollectionInfo, get_collection
from pgcite.store._database import Database
from pgcite.store._snapshots import (
    activate_snapshot,
    active_snapshot,
    build_snapshot,
    find_versions,
    insert_version,
    member_versions,
)

CHUNKER_VERSION = "1"


class Failure(BaseModel):
    path: str
    reason: str


class IngestReport(BaseModel):
    """The summary printed at the end of an ingest."""

    collection: str
    documents: int = 0
    new_versions: int = 0
    unchanged: int = 0
    chunks_added: int = 0
    embedded: int = 0
    cached: int = 0
    skipped: int = 0
    failed: list[Failure] = Field(default_factory=list)
    snapshot_id: int | None = None
    activated: bool = False
    seconds: float = 0.0


def chunk_budget(info: CollectionInfo, embedder: Embedder) -> int:
    """The chunk token budget: the collection's, never above the model's max length (minus the
    two special tokens every sequence carries)."""
    return min(info.settings.chunk_tokens, embedder.spec.max_tokens - 2)


def content_hash(doc: Document, info: CollectionInfo, embedder: Embedder) -> str:
    """A version key: the source content plus everything that shapes its chunks and vectors."""
    payload = {
        "doc": doc.model_dump(mode="json"),
        "chunker": CHUNKER_VERSION,
        "budget": chunk_budget(info, embedder),
        "model": embedder.spec.model_key,
        "ts": info.ts_config,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


def embedding_text(chunk: ChunkDraft) -> str:
    return f"{chunk.title}\n{chunk.body}" if chunk.title else chunk.body


def _load(
    paths: Sequence[Path], mapping: FieldMapping | None, overrides: Overrides | None,
    report: IngestReport,
) -> list[Document]:
    docs: dict[str, Document] = {}
    for item in iter_documents(paths, mapping=mapping, overrides=overrides):
        if isinstance(item, LoadError):
            report.failed.append(Failure(path=item.path, reason=item.reason))
        elif item.document_id in docs:
            report.failed.append(Failure(
                path=item.source, reason=f"duplicate document id {item.document_id!r}"))
        else:
            docs[item.document_id] = item
    return list(docs.values())


def ingest(
    db: Database,
    collection: str,
    paths: Sequence[Path],
    *,
    mapping: FieldMapping | None = None,
    overrides: Overrides | None = None,
    corpus_version: str | None = None,
    replace: bool = False,
    activate: bool = True,
    progress: bool = True,
    settings: Settings | None = None,
) -> IngestReport:
    """Ingest ``paths`` into a new snapshot of ``collection``.

    By default the new snapshot is the active one plus these documents (a changed document
    replaces its old version); with ``replace`` it holds only these documents. If nothing would
    change, no snapshot is made. With ``activate`` the snapshot goes live in the same transaction.
    """
    started = time.monotonic()
    settings = settings or Settings()
    with db.connect() as conn:
        info = get_collection(conn, collection)
    embedder = embedder_for(info.embedder, settings)
    report = IngestReport(collection=collection)
    docs = _load(paths, mapping, overrides, report)
    report.documents = len(docs)
    hashes = {doc.document_id: content_hash(doc, info, embedder) for doc in docs}
    with db.connect() as conn:
        existing = find_versions(conn, info, list(hashes.items()))
    fresh = [d for d in docs if (d.document_id, hashes[d.document_id]) not in existing]
    report.unchanged = len(docs) - len(fresh)

    budget = chunk_budget(info, embedder)
    chunked: list[tuple[Document, list[ChunkDraft]]] = []
    for doc in fresh:
        chunks = chunk_document(doc, count_tokens=embedder.count_tokens, max_tokens=budget)
        if chunks:
            chunked.append((doc, chunks))
        else:
            report.skipped += 1  # nothing but whitespace
    texts = [embedding_text(c) for _, chunks in chunked for c in chunks]

    with progress_bar(progress) as bar:
        task = bar.add_task(f"embedding ({embedder.spec.id})", total=len(texts))
        vectors, counts = embed_with_cache(
            db, embedder, texts, batch_size=settings.embed_batch_size,
            on_progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    report.embedded, report.cached = counts.embedded, counts.cached

    with db.transaction() as conn:
        conn.execute("SET LOCAL synchronous_commit = on")
        new_pks: dict[str, int] = {}
        offset = 0
        for doc, chunks in chunked:
            new_pks[doc.document_id] = insert_version(
                conn, info, document_id=doc.document_id, content_hash=hashes[doc.document_id],
                source=doc.source, chunks=chunks, vectors=vectors[offset: offset + len(chunks)],
                spec=embedder.spec, corpus_version=corpus_version,
            )
            offset += len(chunks)
        report.new_versions = len(new_pks)
        report.chunks_added = offset
        wanted = {**{doc_id: pk for (doc_id, _), pk in existing.items()}, **new_pks}
        current = active_snapshot(conn, info)
        live = {} if current is None else member_versions(conn, info, current.snapshot_id)
        members = dict(wanted) if replace else {**live, **wanted}
        if not members or set(members.values()) == set(live.values()):
            report.seconds = round(time.monotonic() - started, 3)
            return report  # nothing would change: no new snapshot
        report.snapshot_id = build_snapshot(
            conn, info, members.values(), spec=embedder.spec, corpus_version=corpus_version,
            note=f"ingest of {', '.join(str(p) for p in paths)[:200]}",
        )
        if activate:
            activate_snapshot(conn, info, report.snapshot_id)
            report.activated = True
    report.seconds = round(time.monotonic() - started, 3)
    return report
