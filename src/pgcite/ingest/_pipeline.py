"""Ingest: load → chunk → embed (cached) → store as a new snapshot, all or nothing.

Crash safety comes from the order of work: embeddings are committed to the cache batch by batch
(so a killed run loses no embedding work), and everything users can see — versions, chunks, the
snapshot, its BM25 postings and the active pointer — is written in ONE transaction at the end.
A run killed at any moment leaves the collection exactly as it was; re-running resumes from the
cache (and a snapshot committed but not yet activated is found again, not duplicated).

A staged ingest (``stage=True``) builds no snapshot: it commits versions, chunks and a segment
per batch of documents, for one later build of everything staged (store._staged), so many
processes can feed one collection at once; a kill loses only the batch in flight.

Activation here is unconditional; the gate (a collection with a golden set) is applied by the
caller -- ``Collection.ingest`` builds inactive, evaluates, and activates only if it passes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg
from pydantic import BaseModel, Field

from pgcite._errors import ConfigError, LoadError, TimeBudgetExceeded
from pgcite._types import Document
from pgcite.config import Settings
from pgcite.embed._base import Embedder, EmbedderSpec
from pgcite.embed._registry import embedder_for, load_embedder
from pgcite.index import MergeReport
from pgcite.ingest import _ocr
from pgcite.ingest._catalogue import Catalogue
from pgcite.ingest._chunking import embedding_text as embedding_text  # re-exported
from pgcite.ingest._entities import missing as entities_missing
from pgcite.ingest._flow import StoreVersions, write_documents
from pgcite.ingest._flow import embed_texts as embed_texts  # re-exported
from pgcite.ingest._loaders import FieldMapping, Overrides, iter_documents
from pgcite.ingest._page_images import page_images
from pgcite.ingest._provenance import FieldChange, Stored, changes, record, settle, stored_documents
from pgcite.ingest._stages import StageClock, StageTime
from pgcite.llm import ChatModel
from pgcite.store._collections import (
    CollectionInfo,
    CollectionSettings,
    ensure_vector_index,
    get_collection,
)
from pgcite.store._database import Database
from pgcite.store._entities import (
    alias_keys,
    derive_initial_aliases,
    read_alias_file,
    save_user_aliases,
)
from pgcite.store._page_images import store_page_images
from pgcite.store._snapshots import (
    activate_snapshot,
    active_snapshot,
    build_snapshot,
    find_versions,
    lock_activations,
    lock_versions,
    plan_snapshot,
    record_provenance,
)
from pgcite.store._staged import stage_versions
from pgcite.store._statistics import after_build

CHUNKER_VERSION = "1"
STAGE_BATCH = 256  # documents per staging transaction: what a killed worker can lose at most


class Failure(BaseModel):
    path: str
    reason: str
    # LoadError.kind: unreadable, missing_dependency (an extra or program to install),
    # too_large (a scan over an OCR limit: HTTP 413)
    kind: str = "unreadable"


class LowConfidencePage(BaseModel):
    """A page read by OCR whose text needs a human look: ingested, but flagged."""

    path: str
    page: int
    confidence: float | None  # mean word confidence 0-100; None: no word recognised
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
    undated: int = 0  # documents with a passage no source dated: a cutoff query never sees it
    # documents no source gave an author: an answer names no writer for them, and a question
    # naming the writer ("What did Pepys think of …") reads that name as evidence, not as whose
    # words are asked about (retrieve/_answerability.py, metadata_words)
    unattributed: int = 0
    situated: int = 0  # chunks given an LLM situating sentence (contextual = "llm")
    situate_fallbacks: int = 0  # chunks whose sentence call failed: embedded with the header
    entities: int = 0  # (chunk, entity) pairs recognised in the new chunks
    entities_cached: int = 0  # new chunks whose entities came from the entity cache
    entity_model: str | None = None  # the NER pipeline that read them; None: none available
    aliases: int = 0  # user aliases stored from --aliases
    failed: list[Failure] = Field(default_factory=list)
    ocr_pages: int = 0  # pages read by OCR (images, PDF pages without a text layer)
    low_confidence: list[LowConfidencePage] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)  # e.g. catalogue rows naming no file
    # Each date, title, author or corpus of a live document this ingest changes, old -> new
    changes: list[FieldChange] = Field(default_factory=list)
    staged: int = 0  # versions staged for a later build (stage=True): no snapshot is made
    snapshot_id: int | None = None
    activated: bool = False
    gate: str | None = None  # the activation gate's outcome, when the collection has one
    merged: MergeReport | None = None  # the keyword index's merges after the build
    seconds: float = 0.0
    # where the time went: wall and CPU seconds per stage (ingest/_stages.py)
    stages: dict[str, StageTime] = Field(default_factory=dict)


def chunk_budget(settings: CollectionSettings, spec: EmbedderSpec) -> int:
    """The chunk token budget: the collection's, never above the model's max length (minus the
    two special tokens every sequence carries)."""
    return min(settings.chunk_tokens, spec.max_tokens - 2)


def content_hash(doc: Document, info: CollectionInfo, spec: EmbedderSpec) -> str:
    """A version key: the source content plus everything that shapes its chunks and vectors.

    It needs only the model's recorded spec, so unchanged documents are recognised without
    loading the model at all.
    """
    payload = {
        "doc": doc.model_dump(mode="json"),
        "chunker": CHUNKER_VERSION,
        "budget": chunk_budget(info.settings, spec),
        "model": spec.model_key,
        "ts": info.ts_config,
    }
    if info.settings.contextual != "off":  # absent when off: hashes from before the setting hold
        payload["contextual"] = info.settings.contextual
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


def other_embedder(
    db: Database, info: CollectionInfo, embedder_id: str, settings: Settings, *, replace: bool
) -> Embedder:
    """A build with another model than the collection's: it must replace every document (one
    snapshot never mixes models), and the model gets its own partial HNSW index first."""
    embedder = load_embedder(embedder_id, settings)
    if embedder.spec.model_key != info.embedder.model_key:
        if not replace:
            raise ConfigError(
                f"a build with {embedder.spec.model_key} must hold every document "
                f"(the collection records {info.embedder.model_key})",
                hint="add --replace with every source, or give no PATH to re-embed the "
                "active snapshot",
            )
        with db.transaction() as conn:
            ensure_vector_index(conn, info.schema_name, embedder.spec, info.settings.halfvec)
    return embedder


def _load(
    paths: Sequence[Path], mapping: FieldMapping | None, overrides: Overrides | None,
    report: IngestReport, catalogue: Path | None, dates_from_names: bool,
    dates_from_timestamps: bool, entries: bool, ocr_lang: str,
    ocr_limits: _ocr.OcrLimits | None = None,
    deadline: _Deadline | None = None,
) -> list[Document]:
    docs: dict[str, Document] = {}
    cat = Catalogue.read(catalogue) if catalogue is not None else None
    for item in iter_documents(paths, mapping=mapping, overrides=overrides, catalogue=cat,
                               dates_from_names=dates_from_names,
                               dates_from_timestamps=dates_from_timestamps, entries=entries,
                               ocr_lang=ocr_lang,
                               ocr_limits=ocr_limits):
        if deadline is not None:
            deadline.check()  # after each file read (a file's own OCR has its own limits)
        if isinstance(item, LoadError):
            report.failed.append(Failure(path=item.path, reason=item.reason, kind=item.kind))
        elif item.document_id in docs:
            report.failed.append(Failure(
                path=item.source, reason=f"duplicate document id {item.document_id!r}"))
        else:
            docs[item.document_id] = item
            _note_ocr(item, report)
    if cat is not None:
        report.warnings += [f"catalogue {cat.path}: no file matches {key!r}"
                            for key in cat.unmatched()]
    return list(docs.values())


class _Deadline:
    """An ingest's time budget (``time_budget_s``): checked between files and before storing;
    past it the ingest stops and stores nothing."""

    def __init__(self, budget_s: float) -> None:
        self.budget_s, self.at = budget_s, time.monotonic() + budget_s

    def check(self) -> None:
        if time.monotonic() > self.at:
            raise TimeBudgetExceeded(
                f"the ingest needs more than its budget of {self.budget_s:g} s; nothing was "
                "stored", hint="ingest fewer or smaller files at a time")


def _ocr_limits(settings: Settings, deadline: _Deadline | None) -> _ocr.OcrLimits:
    """The settings' OCR limits; under a time budget, a scan's OCR also stops at the ingest's
    deadline (else one scan could run its own ``ocr_max_seconds`` past an upload's budget)."""
    limits = _ocr.OcrLimits.from_settings(settings)
    return limits if deadline is None else dataclasses.replace(limits, until=deadline.at)


def _note_ocr(doc: Document, report: IngestReport) -> None:
    """Count the document's OCR-read pages and flag the ones read poorly or not at all."""
    report.ocr_pages += sum(page.error is None for page in doc.ocr_pages)
    for page in doc.ocr_pages:
        if not page.low:
            continue
        blank = "blank page (no ink: not sent to OCR)" if page.blank else None
        reason = ((page.error or blank or "no text recognised") if page.confidence is None
                  else f"mean OCR confidence {page.confidence:g} < {_ocr.LOW_CONFIDENCE:g}")
        report.low_confidence.append(LowConfidencePage(
            path=doc.source, page=page.page, confidence=page.confidence, reason=reason))


def _settle(db: Database, info: CollectionInfo,
            docs: list[Document]) -> tuple[list[Document], dict[str, Stored]]:
    """Documents of the live snapshot keep what the user gave them before, and what this run
    does not say (ingest/_provenance.py); returns them and what their live versions say."""
    with db.connect() as conn:
        current = active_snapshot(conn, info)
        if current is None or not docs:
            return docs, {}
        stored = stored_documents(conn, info, current.snapshot_id,
                                  [doc.document_id for doc in docs])
    return [settle(doc, stored[doc.document_id]) if doc.document_id in stored else doc
            for doc in docs], stored


def is_undated(doc: Document) -> bool:
    """A document with a passage that no source dated (a cutoff filter leaves it out)."""
    return any(unit.date_start is None for unit in doc.units)


def ingest(
    db: Database,
    collection: str,
    paths: Sequence[Path],
    *,
    mapping: FieldMapping | None = None,
    overrides: Overrides | None = None,
    catalogue: Path | None = None,
    dates_from_names: bool = False,
    dates_from_timestamps: bool = False,
    entries: bool = False,
    corpus_version: str | None = None,
    replace: bool = False,
    activate: bool = True,
    progress: bool = True,
    settings: Settings | None = None,
    embedder_id: str | None = None,
    chat: ChatModel | None = None,
    aliases: Path | None = None,
    stage: bool = False,
    stage_batch: int = STAGE_BATCH,
    time_budget_s: float | None = None,
) -> IngestReport:
    """Ingest ``paths`` into a new snapshot of ``collection``, or with ``stage`` only store them
    for a later build (:func:`_stage`).

    By default the new snapshot is the active one plus these documents (a changed document
    replaces its old version); with ``replace`` it holds only these documents. If nothing would
    change, no snapshot is made. With ``activate`` the snapshot goes live in the same transaction.
    ``embedder_id`` builds with another model than the collection's (needs ``replace``); the
    collection's recorded model changes only when that snapshot is activated. ``chat`` writes
    the situating sentences of a ``contextual = "llm"`` collection. ``catalogue`` is a sidecar
    CSV/JSONL of per-file dates and attributes; ``dates_from_names`` dates files whose names
    start with a date, ``dates_from_timestamps`` by when they were made; with ``entries`` a
    .txt/.md journal is read as its dated entries (docs/ingest.md,
    "Dates"). What the user gave a live document before stays (docs/ingest.md, "Re-ingest");
    ``report.changes`` lists each field this ingest changes. ``aliases`` is a YAML/CSV list of canonical
    names and their other spellings, kept by the collection (docs/ingest.md, "Entities").
    ``time_budget_s``: past it (checked after each file is read and before storing) the ingest
    raises TimeBudgetExceeded and stores nothing (an upload's budget).
    """
    started = time.monotonic()
    deadline = _Deadline(time_budget_s) if time_budget_s is not None else None
    if stage and (replace or embedder_id is not None):
        raise ConfigError("a staged ingest adds to the active snapshot with the collection's "
                          "model: --replace and --embedder need a plain ingest or build")
    settings = settings or Settings()
    with db.connect() as conn:
        info = get_collection(conn, collection)
    # The collection's own model is loaded only when something needs chunking (its tokenizer)
    # or embedding, and then must be exactly the recorded version.
    embedder = (None if embedder_id is None
                else other_embedder(db, info, embedder_id, settings, replace=replace))
    spec = info.embedder if embedder is None else embedder.spec
    report = IngestReport(collection=collection)
    clock = StageClock(db)
    user_aliases = alias_keys(read_alias_file(aliases)) if aliases is not None else {}
    if user_aliases and info.settings.entities == "auto" and (
            why := entities_missing(info.ts_config)):
        report.warnings.append(f"{why}: the aliases are kept, but no passage's entities are read")
    with clock("load"):
        loaded = _load(paths, mapping, overrides, report, catalogue, dates_from_names,
                       dates_from_timestamps, entries, _ocr.tesseract_language(info.ts_config),
                       _ocr_limits(settings, deadline), deadline)
        docs, stored = _settle(db, info, loaded)
        report.documents = len(docs)
        report.undated = sum(is_undated(doc) for doc in docs)
        report.unattributed = sum(not doc.author for doc in docs)
        hashes = {doc.document_id: content_hash(doc, info, spec) for doc in docs}
        with db.connect() as conn:
            existing = find_versions(conn, info, list(hashes.items()))
        fresh = [d for d in docs if (d.document_id, hashes[d.document_id]) not in existing]
        report.unchanged = len(docs) - len(fresh)
        report.changes = [change for doc in fresh if doc.document_id in stored
                          for change in changes(doc, stored[doc.document_id])]
        # an unchanged version records where its values come from now (a catalogue may give
        # what the file gave, an old version recorded none): the next run keeps what the user
        # gave
        sources = {existing[(d.document_id, hashes[d.document_id])]: record(d) for d in docs
                   if (d.document_id, hashes[d.document_id]) in existing
                   and d.document_id in stored and stored[d.document_id].sources != d.provenance}

    if embedder is None and fresh:
        embedder = embedder_for(info.embedder, settings)
    if stage:
        existing_by_doc = {doc_id: pk for (doc_id, _), pk in existing.items()}
        _stage(db, info, embedder, fresh, existing_by_doc, hashes, spec, report, settings,
               corpus_version=corpus_version, chat=chat, progress=progress,
               user_aliases=user_aliases, batch=stage_batch, clock=clock)
        return _finish(report, clock, started)

    # The one transaction opens before chunking: each group of chunks is stored (its HNSW and
    # GIN entries written by the server) while the next ones are embedded, and none of it is
    # visible to anyone until the commit below, so the ingest stays all or nothing.
    with db.transaction() as conn:
        conn.execute("SET LOCAL synchronous_commit = on")
        new_pks: dict[str, int] = {}
        write_documents(db, embedder, fresh, info, chunk_budget(info.settings, spec), report,
                        settings, chat=chat, progress=progress, clock=clock, sink=StoreVersions(
                            conn, info, hashes, spec, corpus_version, report, clock, new_pks))
        lock_versions(conn, info, existing.values())  # gc may have run since find_versions
        if deadline is not None:
            deadline.check()  # nothing is committed; what was embedded stays in the cache
        record_provenance(conn, info, sources)
        for doc in docs:  # scans stored before page images were kept get them now
            if (pk := existing.get((doc.document_id, hashes[doc.document_id]))) is not None:
                store_page_images(conn, info, pk, page_images(doc.ocr_pages))
        _store_aliases(conn, info, user_aliases, bool(new_pks), report)
        wanted = {**{doc_id: pk for (doc_id, _), pk in existing.items()}, **new_pks}
        if activate:
            lock_activations(conn, info)  # build on what is active when this one commits
        current = active_snapshot(conn, info)
        plan = plan_snapshot(conn, info, wanted.values(), spec=spec, replace_all=replace,
                             content_id=None if current is None else current.snapshot_id)
        if (replace and not wanted) or (not replace and not wanted and current is None) \
                or plan.unchanged:
            return _finish(report, clock, started)  # nothing would change: no new snapshot
        with clock("snapshot", conn):  # its keyword index entries, activation
            report.snapshot_id = build_snapshot(
                conn, info, plan, spec=spec, corpus_version=corpus_version,
                note=f"ingest of {', '.join(str(p) for p in paths)[:200]}",
            )
            if activate:
                activate_snapshot(conn, info, report.snapshot_id, spec=spec)
                report.activated = True
        committing = time.perf_counter()
    clock.add("commit", wall=time.perf_counter() - committing, cpu=0.0)
    # after the commit (the build's transaction stays short): statistics, the index's merges
    with clock("statistics"):
        report.merged = after_build(clock.timing("statistics", db.transaction), info,
                                    report.snapshot_id, chunks_added=report.chunks_added,
                                    settings=settings)
    return _finish(report, clock, started)


def _finish(report: IngestReport, clock: StageClock, started: float) -> IngestReport:
    report.seconds = round(time.monotonic() - started, 3)
    report.stages = clock.report()
    return report


def _stage(
    db: Database, info: CollectionInfo, embedder: Embedder | None, fresh: list[Document],
    existing: dict[str, int], hashes: dict[str, str], spec: EmbedderSpec, report: IngestReport,
    settings: Settings, *, corpus_version: str | None, chat: ChatModel | None, progress: bool,
    user_aliases: dict[str, str], batch: int, clock: StageClock,
) -> None:
    """Store the documents for a later build (store._staged), ``batch`` at a time, each batch in
    its own transaction: its versions, chunks, vectors and a segment with their postings. No
    snapshot is made, so nothing here is visible to search, and no lock other workers wait on
    long is taken. Versions stored already (unchanged documents, or a killed run's committed
    batches) are staged again without being stored twice; a kill loses the batch in flight."""
    with db.transaction() as conn:
        if user_aliases:
            save_user_aliases(conn, info, user_aliases)
            report.aliases = len(user_aliases)
        if existing:
            stage_versions(conn, info, existing, written=())
            report.staged += len(existing)
    budget = chunk_budget(info.settings, spec)
    for start in range(0, len(fresh), max(1, batch)):
        with db.transaction() as conn:
            conn.execute("SET LOCAL synchronous_commit = on")
            written: dict[str, int] = {}
            write_documents(db, embedder, fresh[start: start + batch], info, budget, report,
                            settings, chat=chat, progress=progress, clock=clock,
                            sink=StoreVersions(conn, info, hashes, spec, corpus_version, report,
                                               clock, written))
            stage_versions(conn, info, written, written=list(written.values()))
            report.staged += len(written)


def _store_aliases(conn: psycopg.Connection, info: CollectionInfo, user: dict[str, str], changed: bool,
                   report: IngestReport) -> None:
    """The user's aliases, then the initials derived from every name the collection holds."""
    if user:
        save_user_aliases(conn, info, user)
        report.aliases = len(user)
    if user or changed:
        derive_initial_aliases(conn, info)
