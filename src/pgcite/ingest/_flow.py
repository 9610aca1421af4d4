"""The write path of an ingest: chunk → embed → entities → store, overlapped so that both cores
stay busy.

Three threads share a plain ingest, a group of :data:`GROUP_BATCHES` embedding batches at a
time, in document order: this thread chunks documents and, once it has handed a group over,
reads that group's entities (spaCy, through the entity cache); one worker embeds the group
(through the embedding cache; the onnx embedder runs one text per core); one writer stores the
groups, in order, into the caller's transaction (versions, chunks and their entities; the
server writes their HNSW and GIN entries meanwhile, in its own process). So while group n is
stored, group n+1 is embedded and group n+2 chunked, where before everything was stored only
after the last chunk was embedded, on one core with the other idle. A failure anywhere stops
the flow and raises, and nothing is visible before the caller commits.

A ``contextual = "llm"`` collection situates every chunk first (the model calls run
concurrently), then embeds, reads entities and stores, one step after the other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import psycopg

from pgcite._errors import ConfigError
from pgcite._progress import progress_bar
from pgcite._types import ChunkDraft, Contextual, Document
from pgcite.config import Settings
from pgcite.embed._base import Embedder, EmbedderSpec, Vectors
from pgcite.ingest._chunking import chunk_document, embedding_text
from pgcite.ingest._entities import Recognizer, mentions, recognizer_for
from pgcite.ingest._page_images import page_images
from pgcite.ingest._provenance import record
from pgcite.ingest._stages import StageClock
from pgcite.llm import ChatModel
from pgcite.store._collections import CollectionInfo
from pgcite.store._database import Database
from pgcite.store._embedding_cache import EmbedCounts, embed_with_cache
from pgcite.store._entities import Mention, insert_entities
from pgcite.store._entity_cache import read_with_cache
from pgcite.store._page_images import store_page_images
from pgcite.store._snapshots import NewVersion, insert_versions

if TYPE_CHECKING:
    from pgcite.ingest._pipeline import IngestReport

Chunked = list[tuple[Document, list[ChunkDraft]]]
GROUP_BATCHES = 8  # embedding batches per group: small enough to overlap, few hand-overs
ENTITY_STEP = 512  # chunks per entity read when they are read after the embedding (llm)


class Sink(Protocol):
    """Takes each group of chunked documents with its vectors and entities, in order."""

    def __call__(self, chunked: Chunked, vectors: Vectors,
                 mentions: list[list[Mention]]) -> None: ...


class StoreVersions:
    """A sink that stores each group's documents as new versions (chunks, vectors, entities)
    in ``conn``'s transaction, recording document_id -> version_pk in ``written`` and counting
    them in ``report``."""

    def __init__(self, conn: psycopg.Connection, info: CollectionInfo, hashes: dict[str, str],
                 spec: EmbedderSpec, corpus_version: str | None, report: IngestReport,
                 clock: StageClock, written: dict[str, int]) -> None:
        self.conn, self.info, self.hashes, self.spec = conn, info, hashes, spec
        self.corpus_version, self.report, self.clock = corpus_version, report, clock
        self.written = written

    def __call__(self, chunked: Chunked, vectors: Vectors,
                 mentions: list[list[Mention]]) -> None:
        versions: list[NewVersion] = []
        found: list[dict[int, list[Mention]]] = []
        offset = 0
        for doc, chunks in chunked:
            end = offset + len(chunks)
            versions.append(NewVersion(
                document_id=doc.document_id, content_hash=self.hashes[doc.document_id],
                source=doc.source, chunks=chunks, vectors=vectors[offset:end],
                provenance=record(doc)))
            found.append({c.ordinal: m for c, m in zip(chunks, mentions[offset:end],
                                                        strict=True) if m})
            offset = end
        with self.clock("store", self.conn):
            pks = insert_versions(self.conn, self.info, versions, spec=self.spec,
                                  corpus_version=self.corpus_version)
            insert_entities(self.conn, self.info, dict(zip(pks, found, strict=True)),
                            self.report.entity_model)
            for (doc, _), pk in zip(chunked, pks, strict=True):  # a scan's pages, with it
                store_page_images(self.conn, self.info, pk, page_images(doc.ocr_pages))
        self.written.update((v.document_id, pk) for v, pk in zip(versions, pks, strict=True))
        self.report.new_versions += len(versions)
        self.report.chunks_added += offset


def write_documents(
    db: Database, embedder: Embedder | None, fresh: list[Document], info: CollectionInfo,
    budget: int, report: IngestReport, settings: Settings, *, chat: ChatModel | None,
    progress: bool, clock: StageClock, sink: Sink,
) -> None:
    """Chunk the fresh documents (``budget`` tokens at most), embed their chunks and read their
    entities (both through their caches), and hand them to ``sink`` group by group, in order
    (see the module)."""
    if embedder is None or not fresh:
        return
    contextual = info.settings.contextual
    recognizer = entity_reader(info)
    if contextual != "llm":
        _overlapped(db, embedder, fresh, budget, contextual, report, settings, progress,
                    recognizer, clock, sink)
        return
    with clock("chunk"):
        chunked = _chunk_all(fresh, embedder, budget, contextual, report)
    if not chunked:
        return
    chunked = _situate(chunked, chat, embedder, report, settings, progress)
    chunks = [c for _, group in chunked for c in group]
    with clock("embed"):
        vectors = embed_texts(db, embedder, [embedding_text(c, contextual) for c in chunks],
                              report, label="embedding", progress=progress,
                              batch_size=settings.embed_batch_size)
    found: list[list[Mention]] = []
    with progress_bar(progress and recognizer is not None) as bar:
        task = bar.add_task(f"entities ({recognizer.name if recognizer else '-'})",
                            total=len(chunks))
        for start in range(0, len(chunks), ENTITY_STEP):
            found += read_entities(db, recognizer, [c.body for c in chunks[
                start: start + ENTITY_STEP]], report, clock)
            bar.update(task, completed=len(found))
    sink(chunked, vectors, found)


def embed_texts(
    db: Database, embedder: Embedder, texts: Sequence[str], report: IngestReport, *,
    label: str, progress: bool, batch_size: int,
) -> Vectors:
    """Embed through the cache with a progress bar; counts go into ``report``."""
    if not texts:
        return np.zeros((0, embedder.spec.dim), dtype=np.float32)
    with progress_bar(progress) as bar:
        task = bar.add_task(f"{label} ({embedder.spec.id})", total=len(texts))
        vectors, counts = embed_with_cache(
            db, embedder, texts, scope=report.collection, batch_size=batch_size,
            on_progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    report.embedded += counts.embedded
    report.cached += counts.cached
    return vectors


def entity_reader(info: CollectionInfo) -> Recognizer | None:
    """The collection's entity pipeline, or None (entities off, or none for its language: the
    ``entities`` extra not installed)."""
    return recognizer_for(info.ts_config) if info.settings.entities == "auto" else None


def read_entities(db: Database, recognizer: Recognizer | None, bodies: list[str],
                  report: IngestReport, clock: StageClock) -> list[list[Mention]]:
    """The entities of each chunk body, through the collection's entity cache (all empty
    without a pipeline); counts go into ``report``."""
    if recognizer is None:
        return [[] for _ in bodies]
    with clock("entities"):
        found, read = read_with_cache(db, recognizer.name, recognizer.found, bodies,
                                      scope=report.collection)
        out = [mentions(f) for f in found]
    report.entity_model = recognizer.name  # only once a chunk was read: None says no run
    report.entities += sum(len(m) for m in out)
    report.entities_cached += len(bodies) - read
    return out


def _overlapped(
    db: Database, embedder: Embedder, fresh: list[Document], budget: int,
    contextual: Contextual, report: IngestReport, settings: Settings, progress: bool,
    recognizer: Recognizer | None, clock: StageClock, sink: Sink,
) -> None:
    """Chunking and entities here, embedding on one worker, storing on one writer (the
    module's docstring). The embedding's CPU is that of the worker and the embedder's threads:
    this process's CPU over the flow less what the other stages measured on their threads."""
    group_size = settings.embed_batch_size * GROUP_BATCHES
    embedded: list[Future[tuple[Vectors, EmbedCounts]]] = []
    stored: list[Future[None]] = []
    cpu, others = time.process_time(), clock.cpu_s("chunk", "entities", "store")
    with progress_bar(progress) as bar, \
            ThreadPoolExecutor(1, thread_name_prefix="pgcite-embed") as worker, \
            ThreadPoolExecutor(1, thread_name_prefix="pgcite-store") as writer:
        task = bar.add_task(f"embedding ({embedder.spec.id})", total=0)
        ents = (None if recognizer is None
                else bar.add_task(f"entities ({recognizer.name})", total=0))
        done = bar.add_task("storing", total=0)
        submitted = 0
        failed = threading.Event()  # set by the first embedding or store that raises

        def note_failure(future: Future[Any]) -> None:
            if not future.cancelled() and future.exception() is not None:
                failed.set()

        def embed(texts: list[str], base: int) -> tuple[Vectors, EmbedCounts]:
            started = time.perf_counter()
            out = embed_with_cache(
                db, embedder, texts, scope=report.collection,
                batch_size=settings.embed_batch_size,
                on_progress=lambda n, _total: bar.update(task, completed=base + n))
            clock.add("embed", wall=time.perf_counter() - started, cpu=0.0)
            return out

        def store(group: Chunked, vectors: Future[tuple[Vectors, EmbedCounts]],
                  found: list[list[Mention]], size: int) -> None:
            if failed.is_set():
                return  # the ingest fails: store nothing more (the error is raised below)
            group_vectors, counts = vectors.result()
            report.embedded += counts.embedded
            report.cached += counts.cached
            sink(group, group_vectors, found)
            bar.advance(done, size)

        def hand_over(group: Chunked) -> None:
            nonlocal submitted
            chunks = [c for _, part in group for c in part]
            base, submitted = submitted, submitted + len(chunks)
            for t in (task, done) + ((ents,) if ents is not None else ()):
                bar.update(t, total=submitted)
            vectors = worker.submit(embed, [embedding_text(c, contextual) for c in chunks], base)
            vectors.add_done_callback(note_failure)
            embedded.append(vectors)
            found = read_entities(db, recognizer, [c.body for c in chunks], report, clock)
            if ents is not None:
                bar.update(ents, completed=submitted)
            stored.append(writer.submit(store, group, vectors, found, len(chunks)))
            stored[-1].add_done_callback(note_failure)

        try:
            pending: Chunked = []
            size = 0
            for doc in fresh:
                if failed.is_set():
                    break  # the embedder or the writer failed: stop, raise it below
                with clock("chunk"):
                    chunks = _chunk_one(doc, embedder, budget, contextual, report)
                if chunks:
                    pending.append((doc, chunks))
                    size += len(chunks)
                if size >= group_size:
                    hand_over(pending)
                    pending, size = [], 0
            if pending and not failed.is_set():
                hand_over(pending)
            for vectors, group in zip(embedded, stored, strict=True):
                vectors.result()  # every group's: a store skipped after a failure raises none
                group.result()
        except BaseException:
            for futures in (embedded, stored):  # what has not started never will
                _cancel(futures)
            raise
    rest = time.process_time() - cpu - (clock.cpu_s("chunk", "entities", "store") - others)
    clock.add("embed", wall=0.0, cpu=max(0.0, rest))


def _cancel(futures: Sequence[Future[Any]]) -> None:
    for future in futures:
        future.cancel()


def _chunk_one(doc: Document, embedder: Embedder, budget: int, contextual: Contextual,
               report: IngestReport) -> list[ChunkDraft]:
    chunks = chunk_document(doc, count_tokens=embedder.count_tokens, max_tokens=budget,
                            contextual=contextual)
    if not chunks:
        report.skipped += 1  # nothing but whitespace
    return chunks


def _chunk_all(fresh: list[Document], embedder: Embedder, budget: int, contextual: Contextual,
               report: IngestReport) -> Chunked:
    return [(doc, chunks) for doc in fresh
            if (chunks := _chunk_one(doc, embedder, budget, contextual, report))]


def _situate(chunked: Chunked, chat: ChatModel | None, embedder: Embedder, report: IngestReport,
             settings: Settings, progress: bool) -> Chunked:
    """Every fresh chunk with its LLM situating sentence (contextual = "llm")."""
    from pgcite.ingest._situate import situate_documents

    if chat is None:
        raise ConfigError("contextual = llm needs a chat model to write situating sentences",
                          hint="set PGCITE_LLM (and PGCITE_LLM_BASE_URL / _MODEL), or pgcite "
                          "collection set NAME --contextual header")
    with progress_bar(progress) as bar:
        task = bar.add_task("situating", total=sum(len(c) for _, c in chunked))
        situated = situate_documents(chat, chunked, count_tokens=embedder.count_tokens,
                                     timeout_s=settings.llm_timeout_s,
                                     workers=_situate_workers(chat, settings),
                                     advance=lambda: bar.advance(task, 1))
    out: Chunked = []
    for (doc, chunks), (drafts, failed) in zip(chunked, situated, strict=True):
        report.situated += len(chunks) - failed
        report.situate_fallbacks += failed
        out.append((doc, drafts))
    return out


def _situate_workers(chat: ChatModel, settings: Settings) -> int:
    """How many situating calls may be in flight at once: PGCITE_LLM_CONCURRENCY, or fewer if
    the model says it serves fewer (in-process llama.cpp: one)."""
    limit = getattr(chat, "max_concurrency", None)
    return settings.llm_concurrency if limit is None else max(1, min(limit, settings.llm_concurrency))
