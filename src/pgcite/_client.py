"""The Python API: ``pgcite.connect()`` → :class:`Client` → :class:`Collection`."""

from __future__ import annotations

import atexit
import datetime as dt
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from pgcite._errors import CollectionNotFound, EmbedderError, PgciteError
from pgcite._models import chat_model_from, reranker_from
from pgcite.answer._types import Answer, Generator
from pgcite.config import Settings
from pgcite.embed._registry import DEFAULT_EMBEDDER, embedder_for_key, load_embedder
from pgcite.ingest._loaders import FieldMapping, Overrides
from pgcite.ingest._pipeline import IngestReport, ingest
from pgcite.llm import ChatModel
from pgcite.retrieve._filters import Filters, MetadataPredicate, merge_filters
from pgcite.retrieve._hits import SearchResult
from pgcite.retrieve._pipeline import StageModels, Stages, staged_search
from pgcite.retrieve._rerank import Reranker
from pgcite.retrieve._search import Ordering, SearchOptions, run_search
from pgcite.store._active import ActivePointerCache
from pgcite.store._collections import (
    CollectionInfo,
    CollectionSettings,
    collection_stats,
    create_collection,
    drop_collection,
    get_collection,
    list_collections,
)
from pgcite.store._database import Database
from pgcite.store._snapshots import SnapshotInfo, active_snapshot, list_snapshots

if TYPE_CHECKING:
    from pgcite._lifecycle import ActivationResult  # imports this module
    from pgcite.answer._selfcheck import ExternalSearch, SelfCheckOptions


def _configure(conn: psycopg.Connection) -> None:
    register_vector(conn)
    conn.autocommit = True


def _weak_close(client: Client) -> Callable[[], None]:
    """A function closing ``client`` if it still exists (a weak reference: registering it at
    exit must not keep a dropped client alive)."""
    ref = weakref.ref(client)

    def close() -> None:
        alive = ref()
        if alive is not None:
            alive.close()

    return close


class Client:
    """A connection to a pgcite database (embedded by default)."""

    def __init__(self, settings: Settings | None = None, *, llm: ChatModel | None = None,
                 reranker: Reranker | None = None) -> None:
        self.settings = settings or Settings()
        self.db = Database.open(self.settings)
        # Closed at exit if not before, and before the embedded server's own exit handler stops
        # it (atexit runs last-registered first): an open pool would otherwise outlive the
        # server, its workers reconnecting, and be collected at teardown, where its __del__
        # fails ("Exception ignored in: ConnectionPool.__del__").
        self._close_at_exit = _weak_close(self)
        atexit.register(self._close_at_exit)
        self._pool: ConnectionPool | None = None
        self._pool_lock = threading.Lock()
        self._pool_generation = 0
        self._active: ActivePointerCache[SnapshotInfo | None] | None = None
        # Models for the optional stages: given here, or built on first use from PGCITE_LLM*
        # / PGCITE_RERANKER* settings (None when not configured: those stages are skipped).
        self._llm, self._llm_ready = llm, llm is not None
        self._reranker, self._reranker_ready = reranker, reranker is not None
        self._models_lock = threading.RLock()  # reranker() may build the LLM through llm()

    def llm(self) -> ChatModel | None:
        """The chat model for HyDE, decomposition, routing, grading (None if not configured)."""
        with self._models_lock:
            if not self._llm_ready:
                self._llm, self._llm_ready = chat_model_from(self.settings), True
            return self._llm

    def reranker(self) -> Reranker | None:
        """The reranker (None if not configured)."""
        with self._models_lock:
            if not self._reranker_ready:
                # the LLM reranker shares the client's one chat model (a local model loads once)
                self._reranker = reranker_from(self.settings, self.llm())
                self._reranker_ready = True
            return self._reranker

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection (autocommit; use ``conn.transaction()`` for more)."""
        self.db.check_alive()  # a dead embedded server: DatabaseError now, not a pool timeout
        with self._pool_lock:
            pool = self._pool
            if pool is None or self._pool_generation != self.db.generation:
                # the first use, or the embedded server was restarted: its connections are dead
                stale = pool
                self._pool = pool = ConnectionPool(
                    self.db.url, min_size=1, max_size=8, configure=_configure, open=True,
                    kwargs={"autocommit": True}, check=ConnectionPool.check_connection,
                )
                self._pool_generation = self.db.generation
                if stale is not None:
                    stale.close(timeout=0)
        with pool.connection() as conn:
            yield conn

    def active_pointers(self) -> ActivePointerCache[SnapshotInfo | None]:
        """This process's cache of active snapshots, kept current by LISTEN/NOTIFY."""
        if self._active is None:
            url = self.db.url
            self._active = ActivePointerCache(lambda: psycopg.connect(
                url, autocommit=True, application_name="pgcite-active-listener"))
        return self._active

    def close(self) -> None:
        atexit.unregister(self._close_at_exit)
        if self._active is not None:
            self._active.close()
            self._active = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def collections(self) -> list[CollectionInfo]:
        with self.connection() as conn:
            return list_collections(conn)

    def create_collection(
        self,
        name: str,
        *,
        language: str = "english",
        embedder: str = DEFAULT_EMBEDDER,
        settings: CollectionSettings | None = None,
    ) -> Collection:
        spec = load_embedder(embedder, self.settings).spec
        with self.db.transaction() as conn:
            create_collection(conn, name, language=language, embedder=spec, settings=settings)
        return self.collection(name)

    def drop_collection(self, name: str, *, missing_ok: bool = False) -> None:
        try:
            with self.db.transaction() as conn:
                drop_collection(conn, name)
                # cached pointers of a same-named collection created later must not survive
                conn.execute("SELECT pg_notify('pgcite_active', %s)", (f"{name}:",))
        except CollectionNotFound:
            if not missing_ok:
                raise
        self.active_pointers().invalidate(name)

    def collection(self, name: str) -> Collection:
        with self.connection() as conn:
            info = get_collection(conn, name)
        return Collection(self, info)


class Collection:
    """One collection: ingest into it, search it."""

    def __init__(self, client: Client, info: CollectionInfo) -> None:
        self.client = client
        self.info = info

    @property
    def name(self) -> str:
        return self.info.name

    def stats(self) -> dict[str, Any]:
        with self.client.connection() as conn:
            return collection_stats(conn, self.info)

    def activate(
        self, snapshot_id: int, *, golden: str | Path | None = None, force: bool = False
    ) -> ActivationResult:
        """Make a snapshot live through the evaluation gate (when the collection has a golden
        set); raises ``GateRefused`` naming the failing figures. See docs/snapshots.md."""
        from pgcite._lifecycle import activate

        return activate(self, snapshot_id, golden_path=Path(golden) if golden else None,
                        force=force)

    def rollback(self) -> ActivationResult:
        """Back to the previously active snapshot (no gate: it passed when it was live)."""
        from pgcite._lifecycle import rollback

        return rollback(self)

    def snapshots(self) -> list[SnapshotInfo]:
        with self.client.connection() as conn:
            return list_snapshots(conn, self.info)

    def active_snapshot(self) -> SnapshotInfo:
        snapshot = self.client.active_pointers().get(self.name, self._read_active)
        if snapshot is None:
            raise PgciteError(
                f"collection {self.name!r} has no active snapshot yet",
                hint=f"ingest documents first: pgcite ingest {self.name} PATH",
            )
        return snapshot

    def _read_active(self) -> SnapshotInfo | None:
        with self.client.connection() as conn:
            return active_snapshot(conn, self.info)

    def ingest(
        self,
        paths: Sequence[str | Path],
        *,
        mapping: FieldMapping | None = None,
        overrides: Overrides | None = None,
        corpus_version: str | None = None,
        replace: bool = False,
        activate: bool = True,
        progress: bool = False,
    ) -> IngestReport:
        """Ingest into a new snapshot. With a golden set configured the snapshot is built
        inactive and activated only if it passes the gate (``report.gate`` says how it went)."""
        with self.client.connection() as conn:
            current = get_collection(conn, self.name).settings
        gated = activate and current.golden is not None
        report = ingest(
            self.client.db, self.name, [Path(p) for p in paths], mapping=mapping,
            overrides=overrides, corpus_version=corpus_version, replace=replace,
            activate=activate and not gated, progress=progress, settings=self.client.settings,
            chat=self.client.llm() if current.contextual == "llm" else None,
        )
        if gated and report.snapshot_id is not None:
            from pgcite._lifecycle import gate_ingest

            report = gate_ingest(self, report)
        self.client.active_pointers().invalidate(self.name)
        return report

    def search(
        self,
        query: str,
        *,
        top_k: int = 5,
        mode: str = "hybrid",
        filters: Filters | dict[str, Any] | None = None,
        cutoff: dt.date | str | None = None,
        corpora: Sequence[str] | None = None,
        metadata: Sequence[MetadataPredicate] | None = None,
        explain: bool = False,
        ordering: Ordering = "score",
        fetch_multiplier: int = 3,
        rrf_k: int = 60,
        weights: tuple[float, float] | None = None,
        ef_search: int | None = None,
        fusion: str | None = None,
        term_depth: int | None = None,
        query_vector: np.ndarray | None = None,
        snapshot_id: int | None = None,
        stages: Stages | Mapping[str, Any] | None = None,
    ) -> SearchResult:
        """Passages for ``query`` with citation ids, filtered in SQL.

        ``cutoff``, ``corpora`` and ``metadata`` are shorthands merged into ``filters``.
        ``fusion`` and ``weights`` default to the collection's settings (convex, 1:1 unless
        set with ``pgcite collection set --fusion/--weights``). ``stages`` overrides the
        collection's optional quality stages for this query, e.g. ``{"rerank": True}``
        (docs/retrieval.md, "Quality stages"); what each stage did is in ``result.stages``.
        """
        plan = Stages.model_validate(self.info.settings.stages).merged(stages)
        kwargs: dict[str, Any] = dict(
            mode=mode, filters=merge_filters(filters, cutoff, corpora, metadata),
            explain=explain, ordering=ordering, fetch_multiplier=fetch_multiplier, rrf_k=rrf_k,
            weights=weights, ef_search=ef_search, fusion=fusion, term_depth=term_depth,
            snapshot_id=snapshot_id)
        if not plan.active:
            return self._search_once(query, top_k=top_k, query_vector=query_vector, **kwargs)
        snapshot = self._snapshot(snapshot_id)
        embedder = (embedder_for_key(snapshot.embed_model, self.client.settings)
                    if mode != "keyword" else None)

        def one(text: str, depth: int, vector: np.ndarray | None,
                legs: tuple[float, float] | None) -> SearchResult:
            if vector is None and text == query:
                vector = query_vector
            return self._search_once(text, top_k=depth, query_vector=vector,
                                     **{**kwargs, "weights": self._tilt(weights, legs)})

        models = StageModels(chat=self.client.llm(), reranker=self.client.reranker(),
                             embedder=embedder)
        return staged_search(one, query, top_k=top_k, mode=mode, stages=plan, models=models,
                             cutoff=kwargs["filters"].cutoff)

    def _tilt(self, requested: tuple[float, float] | None,
              route: tuple[float, float] | None) -> tuple[float, float] | None:
        """The leg weights of one retrieval: weights given with the request win; otherwise the
        route tilts the collection's weights (for the default 1:1, to the route's own)."""
        if requested is not None or route is None:
            return requested
        base = self.info.settings.weights
        return (base[0] * route[0], base[1] * route[1])

    def _search_once(
        self,
        query: str,
        *,
        top_k: int,
        mode: str,
        filters: Filters,
        explain: bool,
        ordering: Ordering,
        fetch_multiplier: int,
        rrf_k: int,
        weights: tuple[float, float] | None,
        ef_search: int | None,
        fusion: str | None,
        term_depth: int | None,
        query_vector: np.ndarray | None,
        snapshot_id: int | None,
    ) -> SearchResult:
        merged = filters
        options = SearchOptions(
            top_k=top_k, mode=mode, fetch_multiplier=fetch_multiplier, rrf_k=rrf_k,
            weights=self.info.settings.weights if weights is None else weights,
            ef_search=ef_search, ordering=ordering,
            fusion=self.info.settings.fusion if fusion is None else fusion,
            term_depth=self.info.settings.term_depth if term_depth is None else term_depth,
        )
        snapshot = self._snapshot(snapshot_id)
        embedder = None
        if mode != "keyword" and query_vector is None:
            # The snapshot's recorded model, never the collection's current one: a query is
            # embedded by exactly the model its snapshot's vectors came from.
            embedder = embedder_for_key(snapshot.embed_model, self.client.settings)
        _check_query_dim(snapshot, embedder, query_vector)
        with self.client.connection() as conn:
            return run_search(
                conn, self.info, snapshot, embedder, query, filters=merged, options=options,
                explain=explain, query_vector=query_vector,
            )

    def answer(
        self,
        question: str,
        *,
        top_k: int = 5,
        mode: str = "hybrid",
        cutoff: dt.date | str | None = None,
        corpora: Sequence[str] | None = None,
        filters: Filters | dict[str, Any] | None = None,
        generator: Generator | str | None = None,
        token_budget: int = 4000,
        threshold: float | None = None,
        persona: str | None = None,
        abstention_text: str | None = None,
        attribution_fallback: str | None = None,
        stages: Mapping[str, Any] | None = None,
        self_check: SelfCheckOptions | Mapping[str, Any] | None = None,
        judge: ChatModel | None = None,
        external: ExternalSearch | None = None,
    ) -> Answer:
        """A grounded answer whose every citation is a retrieved passage (see docs/answers.md).

        ``generator``: a Generator, a kind name ("extractive", the default), or None.
        ``stages``: retrieval stage overrides (as in :meth:`search`). ``self_check``: grading,
        the corrective loop and the sufficiency check, e.g. ``{"grade": True}``, judged by
        ``judge`` or the client's configured LLM (docs/answers.md, "Self-correcting").
        """
        from pgcite.answer._llm import GeneratorConfig, make_generator
        from pgcite.answer._pipeline import AnswerOptions, answer_question
        from pgcite.answer._selfcheck import SelfCheckOptions

        if isinstance(generator, str):
            generator = make_generator(GeneratorConfig(kind=generator))  # type: ignore[arg-type]
        options = AnswerOptions(
            top_k=top_k, mode=mode, token_budget=token_budget, threshold=threshold,
            persona=persona, abstention_text=abstention_text,
            attribution_fallback=attribution_fallback,
            stages=dict(stages) if stages is not None else None,
            self_check=SelfCheckOptions.model_validate(self_check or {}),
        )
        return answer_question(self, question, options=options, filters=filters, cutoff=cutoff,
                               corpora=corpora, generator=generator, judge=judge,
                               external=external)

    def _snapshot(self, snapshot_id: int | None) -> SnapshotInfo:
        if snapshot_id is None:
            return self.active_snapshot()
        for snap in self.snapshots():
            if snap.snapshot_id == snapshot_id:
                return snap
        raise PgciteError(f"collection {self.name!r} has no snapshot {snapshot_id}")


def _check_query_dim(
    snapshot: SnapshotInfo, embedder: Any, query_vector: np.ndarray | None
) -> None:
    dim = embedder.spec.dim if embedder is not None else (
        int(np.asarray(query_vector).size) if query_vector is not None else None)
    if dim is not None and dim != snapshot.embed_dim:
        raise EmbedderError(
            f"the query vector has {dim} dimensions but snapshot {snapshot.snapshot_id} holds "
            f"{snapshot.embed_dim}-dim vectors from {snapshot.embed_model}",
            hint="embed the query with the snapshot's model (leave query_vector unset)",
        )


def connect(
    database_url: str | None = None, *, data_dir: str | Path | None = None
) -> Client:
    """Open pgcite: the embedded PostgreSQL by default, or the server at ``database_url``."""
    overrides: dict[str, Any] = {}
    if database_url is not None:
        overrides["database_url"] = database_url
    if data_dir is not None:
        overrides["data_dir"] = Path(data_dir)
    return Client(Settings(**overrides))
