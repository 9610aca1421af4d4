"""The Python API: ``pgcite.connect()`` → :class:`Client` → :class:`Collection`."""

from __future__ import annotations

import atexit
import datetime as dt
import functools
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, Unpack, cast

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool
from pydantic import ValidationError

from pgcite._errors import (
    AccessDenied,
    CollectionNotFound,
    ConfigError,
    PgciteError,
    SnapshotNotFound,
)
from pgcite._inputs import MAX_ID_CHARS, MAX_NAME_CHARS, check_text, first_problem
from pgcite._models import chat_model_from, reranker_from
from pgcite._types import Mode
from pgcite.answer._pipeline import AnswerOptions
from pgcite.answer._search import SearchFn
from pgcite.answer._selfcheck import ExternalSearch, SelfCheckOptions
from pgcite.answer._types import Answer, Generator
from pgcite.config import Settings
from pgcite.embed._registry import DEFAULT_EMBEDDER, embedder_for_key, load_embedder
from pgcite.index import OptimizeReport, optimize
from pgcite.llm import ChatModel
from pgcite.retrieve._entities import (
    EntitiesResult,
    Kind,
    canonical_key,
    entity_graph,
    related_entities,
    snapshot_models,
)
from pgcite.retrieve._filters import Filters, merge_filters
from pgcite.retrieve._hits import SearchResult
from pgcite.retrieve._pipeline import StageModels, Stages
from pgcite.retrieve._rerank import Reranker
from pgcite.retrieve._search import SearchOptions, check_query
from pgcite.retrieve._snippets import (
    DEFAULT_SNIPPETS,
    marked_here,
    snippet_limit,
    with_snippets,
)
from pgcite.retrieve._undated import undated_excluded
from pgcite.retrieve._view import ConnectionFactory, SearchView
from pgcite.store._active import ActivePointerCache
from pgcite.store._collections import (
    CollectionInfo,
    CollectionSettings,
    collection_stats,
    create_collection,
    drop_collection,
    get_collection,
    list_collections,
    validate_name,
)
from pgcite.store._database import Database
from pgcite.store._documents import DocumentInfo, DocumentsRemoved, build_without, list_documents
from pgcite.store._migrations import UpgradeStep, upgrade_collection
from pgcite.store._replicas import (
    PRIMARY_SQL,
    REPLAY_SQL,
    Failure,
    Replica,
    ReplicaBehind,
    ReplicaSet,
    classify,
)
from pgcite.store._snapshots import (
    SnapshotInfo,
    active_snapshot,
    list_snapshots,
    lock_activations,
)
from pgcite.store._statistics import after_build, refresh_after_merge

if TYPE_CHECKING:
    # Imported where they are used: a search (the CLI's most common command) needs neither
    # the ingest nor the lifecycle, whose imports cost it ~0.09 s of CPU (bench/cli.py).
    from pgcite.ingest._loaders import FieldMapping, Overrides
    from pgcite.ingest._pipeline import IngestReport
    from pgcite.lifecycle import ActivationResult
    from pgcite.store._staged import StagedBuild, StagedSummary

R = TypeVar("R", SearchResult, Answer)
# Which snapshots a Collection may read: any ready one, or the active one only (a reader key's)
SnapshotScope = Literal["any", "active"]
SNAPSHOT_DENIED = "only an admin key may query a snapshot that is not the active one"
SNAPSHOT_DENIED_HINT = "leave the snapshot out to query the active one"

# How long a caller waits for a pooled connection. While PostgreSQL recovers from a crashed
# backend no connection can be had; psycopg's default 30 s made requests hang past any client
# timeout, where a PoolTimeout after a few seconds is a 503 with a retry hint.
POOL_WAIT_S = 5.0

# --- read replicas (docs/scale-out.md; the routing decisions are store/_replicas.py's) ------
# The node the current read runs on (None: the primary). Client.read sets it for one search or
# answer, so every connection that read takes -- through the collection's own factory too, the
# service's role-scoped one included -- comes from that one node, and so does its snapshot.
_READ_NODE: ContextVar[Replica | None] = ContextVar("pgcite_read_node", default=None)
# Whether a read is under way (on a replica or the primary): a read inside it (an answer's
# searches) stays on the node the outer one chose.
_IN_READ: ContextVar[bool] = ContextVar("pgcite_in_read", default=False)
# The database errors the current read's replica connections raised. Only these (and
# ReplicaBehind, raised on purpose) say the replica failed: anything else -- an LLM endpoint
# refusing a connection, a file that cannot be read -- is the request's own, reaches the caller
# once and leaves the replica in.
_REPLICA_ERRORS: ContextVar[list[BaseException] | None] = ContextVar(
    "pgcite_replica_errors", default=None)
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def on_replica() -> bool:
    """Whether the current read runs on a replica."""
    return _READ_NODE.get() is not None


def _replica_failure(exc: BaseException) -> Failure | None:
    """What ``exc``, raised by a read on a replica, says about that replica (None: nothing,
    the error is the request's own). The error counts when it, or an error it was raised from,
    came out of the replica's connection."""
    if isinstance(exc, ReplicaBehind):
        return "behind"
    noted = _REPLICA_ERRORS.get() or []
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        if any(error is n for n in noted):
            return classify(error)
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _reachable(node: Replica) -> bool:
    """Whether a replica accepts a connection now (2 s at most)."""
    try:
        with psycopg.connect(node.url, connect_timeout=2, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except (psycopg.Error, OSError):
        return False
    return True


def _reads(method: F) -> F:
    """Run a Collection method as one read (``Client.read``): on a replica when one is up."""
    @functools.wraps(method)
    def read(self: Collection, *args: Any, **kwargs: Any) -> Any:
        return self.client.read(lambda: method(self, *args, **kwargs))
    return cast(F, read)


# --- end read replicas ------------------------------------------------------------------------


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
        self.replicas = ReplicaSet(self.settings.read_urls,
                                   retry_after_s=self.settings.replica_retry_s)
        self._replica_pools: dict[str, ConnectionPool] = {}
        # Models for the optional stages: given here, or built on first use from PGCITE_LLM*
        # / PGCITE_RERANKER* settings (None when not configured: those stages are skipped).
        self._llm, self._llm_ready = llm, llm is not None
        self._reranker, self._reranker_ready = reranker, reranker is not None
        self._models_lock = threading.RLock()  # reranker() may build the LLM through llm()
        self._built: list[object] = []  # models this client built (and so closes), once each

    def llm(self) -> ChatModel | None:
        """The chat model for HyDE, decomposition, routing, grading (None if not configured)."""
        with self._models_lock:
            if not self._llm_ready:
                self._llm, self._llm_ready = chat_model_from(self.settings), True
                self._built.append(self._llm)
            return self._llm

    def reranker(self) -> Reranker | None:
        """The reranker (None if not configured)."""
        with self._models_lock:
            if not self._reranker_ready:
                # the LLM reranker shares the client's one chat model (a local model loads once)
                self._reranker = reranker_from(self.settings, self.llm())
                self._reranker_ready = True
                self._built.append(self._reranker)
            return self._reranker

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection (autocommit; use ``conn.transaction()`` for more): the
        primary's, or inside a read (``read``) the replica it runs on."""
        node = _READ_NODE.get()
        if node is not None:
            try:
                with self._replica_pool(node).connection() as conn:
                    yield conn
            except psycopg.Error as exc:  # PoolTimeout included: the replica's, not ours
                noted = _REPLICA_ERRORS.get()
                if noted is not None:
                    noted.append(exc)
                raise
            return
        self.db.check_alive()  # a dead embedded server: DatabaseError now, not a pool timeout
        with self._pool_lock:
            pool = self._pool
            if pool is None or self._pool_generation != self.db.generation:
                # the first use, or the embedded server was restarted: its connections are dead
                stale = pool
                self._pool = pool = ConnectionPool(
                    self.db.url, min_size=1, max_size=8, configure=_configure, open=True,
                    kwargs={"autocommit": True}, check=ConnectionPool.check_connection,
                    timeout=POOL_WAIT_S,
                )
                self._pool_generation = self.db.generation
                if stale is not None:
                    stale.close(timeout=0)
        with pool.connection() as conn:
            yield conn

    # --- read replicas --------------------------------------------------------------------

    def read(self, fn: Callable[[], T]) -> T:
        """``fn()`` (a search, an answer: reads only) on a healthy replica, else the primary.
        A replica that fails is taken out and ``fn`` runs again on the next one; one that has
        not replayed what ``fn`` needs sends it to the primary (store/_replicas.py)."""
        if not self.replicas or _IN_READ.get():
            return fn()
        reading = _IN_READ.set(True)
        try:
            return self._read_somewhere(fn)
        finally:
            _IN_READ.reset(reading)

    def _read_somewhere(self, fn: Callable[[], T]) -> T:
        tried: set[str] = set()
        while (node := self.replicas.choose(frozenset(tried))) is not None:
            token = _READ_NODE.set(node)
            errors = _REPLICA_ERRORS.set([])
            try:
                result = fn()
            except Exception as exc:
                failure = _replica_failure(exc)
                if failure is None:
                    raise  # the request's own error: any node would say the same
                tried.add(node.url)
                self.replicas.count("retried")
                if failure == "busy" and not _reachable(node):
                    failure = "down"  # its pool waited on reconnects that will not come
                if failure == "down":
                    self.replicas.failed(node)
                    self._drop_replica_pool(node)
                if failure == "behind":
                    break  # the primary has it
                continue
            finally:
                _READ_NODE.reset(token)
                _REPLICA_ERRORS.reset(errors)
            self.replicas.succeeded(node)
            self.replicas.count(node.label)
            return result
        self.replicas.count("primary")
        return fn()

    def replica_lag(self) -> list[Replica]:
        """Measure every replica's lag now (a fresh connection each, 2 s timeout); one that
        cannot be reached is taken out. For /metrics and benchmarks."""
        try:
            with self.connection() as conn:
                row = conn.execute(PRIMARY_SQL).fetchone()
            primary = str(row[0]) if row else None
        except (psycopg.Error, PgciteError, OSError):
            primary = None  # the primary is down: lag unknown, replicas still serve
        for replica in self.replicas.replicas:
            try:
                with psycopg.connect(replica.url, connect_timeout=2, autocommit=True) as conn:
                    replay = conn.execute(REPLAY_SQL).fetchone()
            except (psycopg.Error, OSError):
                self.replicas.failed(replica)
                self._drop_replica_pool(replica)
                continue
            self.replicas.record_lag(replica, primary, replay)
        return list(self.replicas.replicas)

    def _replica_pool(self, node: Replica) -> ConnectionPool:
        with self._pool_lock:
            pool = self._replica_pools.get(node.url)
            if pool is None:
                # no check on checkout: a broken connection (the replica died) fails its
                # query at once, which takes the replica out, instead of a 5 s pool wait
                pool = self._replica_pools[node.url] = ConnectionPool(
                    node.url, min_size=1, max_size=8, configure=_configure, open=True,
                    kwargs={"autocommit": True}, timeout=POOL_WAIT_S,
                    name=f"pgcite-replica-{node.label}")
            return pool

    def _drop_replica_pool(self, node: Replica) -> None:
        """Close a failed replica's pool: a fresh one (no reconnect backoff) on its retry."""
        with self._pool_lock:
            pool = self._replica_pools.pop(node.url, None)
        if pool is not None:  # its workers may be mid-connect: not on the request's time
            threading.Thread(target=pool.close, name="pgcite-replica-close", daemon=True).start()

    # --- end read replicas ----------------------------------------------------------------

    def active_pointers(self) -> ActivePointerCache[SnapshotInfo | None]:
        """This process's cache of active snapshots, kept current by LISTEN/NOTIFY."""
        if self._active is None:
            url = self.db.url
            self._active = ActivePointerCache(lambda: psycopg.connect(
                url, autocommit=True, application_name="pgcite-active-listener"))
        return self._active

    def close(self) -> None:
        with self._models_lock:  # the models built from settings; given ones are the caller's
            built, self._built = self._built, []
            for model in built:
                close = getattr(model, "close", None)  # HTTP clients hold connections
                if callable(close):
                    close()
            if any(m is self._llm for m in built):
                self._llm, self._llm_ready = None, False
            if any(m is self._reranker for m in built):
                self._reranker, self._reranker_ready = None, False
        atexit.unregister(self._close_at_exit)
        if self._active is not None:
            self._active.close()
            self._active = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        with self._pool_lock:
            replica_pools, self._replica_pools = list(self._replica_pools.values()), {}
        for pool in replica_pools:
            pool.close(timeout=1.0)

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
        validate_name(name)  # before loading a model: a bad name is said at once
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

    def upgrade_collections(
        self, names: Sequence[str] | None = None, *,
        on_step: Callable[[str, int, str], None] | None = None,
    ) -> list[UpgradeStep]:
        """Bring collections (every one by default) to the schema version this pgcite reads,
        one step at a time, each in its own transaction (docs/architecture.md, "The
        database"); ``on_step(collection, version, name)`` is told of each step before it
        runs. Until then an older
        collection is refused with a message naming `pgcite collection upgrade`."""
        if names is None:
            names = [c.name for c in self.collections()]
        done: list[UpgradeStep] = []
        for name in names:
            with self.connection() as conn:
                get_collection(conn, name, any_version=True)  # an unknown name says so
            done += upgrade_collection(self.db.transaction, name, on_step=on_step)
        return done


class Collection:
    """One collection: ingest into it, search it.

    ``snapshots="active"`` is the collection as a reader key sees it (service/_access.py opens
    it so for every surface): naming any snapshot but the active one is refused with
    :class:`AccessDenied`, where the snapshot is resolved, so no route, tool or stage can read
    another one."""

    def __init__(self, client: Client, info: CollectionInfo, *,
                 connection: ConnectionFactory | None = None,
                 view: SearchView | None = None,
                 snapshots: SnapshotScope = "any") -> None:
        self.client = client
        self.info = info
        # Where this collection's queries get connections: the client's pool, or (the service)
        # a role-scoped transaction on it. Admin work always uses the client's own.
        self._connection: ConnectionFactory = connection or client.connection
        self._pinned = view
        self._snapshots: SnapshotScope = snapshots

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
        from pgcite.lifecycle import activate

        return activate(self, snapshot_id, golden_path=Path(golden) if golden else None,
                        force=force)

    def rollback(self) -> ActivationResult:
        """Back to the previously active snapshot (no gate: it passed when it was live)."""
        from pgcite.lifecycle import rollback

        return rollback(self)

    def snapshots(self) -> list[SnapshotInfo]:
        with self.client.connection() as conn:
            return list_snapshots(conn, self.info)

    def active_snapshot(self) -> SnapshotInfo:
        if on_replica():
            # LISTEN/NOTIFY does not reach a standby: read its own pointer, every time, so a
            # read there uses a snapshot active on that node when the request ran
            snapshot = self._read_active()
            if snapshot is None:
                raise ReplicaBehind(f"{self.name}: no active snapshot replayed yet")
            return snapshot
        snapshot = self.client.active_pointers().get(self.name, self._read_active)
        if snapshot is None:
            raise PgciteError(
                f"collection {self.name!r} has no active snapshot yet",
                hint=f"ingest documents first: pgcite ingest {self.name} PATH",
            )
        return snapshot

    def _read_active(self) -> SnapshotInfo | None:
        with self._connection() as conn:
            return active_snapshot(conn, self.info)

    def ingest(
        self,
        paths: Sequence[str | Path],
        *,
        mapping: FieldMapping | None = None,
        overrides: Overrides | None = None,
        catalogue: str | Path | None = None,
        dates_from_names: bool = False,
        dates_from_timestamps: bool = False,
        entries: bool = False,
        corpus_version: str | None = None,
        replace: bool = False,
        activate: bool = True,
        progress: bool = False,
        aliases: str | Path | None = None,
        stage: bool = False,
        time_budget_s: float | None = None,
    ) -> IngestReport:
        """Ingest into a new snapshot. With a golden set configured the snapshot is built
        inactive and activated only if it passes the gate (``report.gate`` says how it went).
        ``catalogue`` (a sidecar CSV/JSONL), ``dates_from_names`` and ``dates_from_timestamps``
        (when a file was made: never a date unless asked for) are further date sources;
        ``entries`` reads a .txt/.md journal as its entries, each dated by its date line
        (docs/ingest.md, "Dates"). What the user gave a document before (a flag, a catalogue,
        a ``mapping``) stays until the user gives another; ``report.changes`` lists each date,
        title, author or corpus this ingest changes, old -> new. ``aliases`` is a YAML/CSV list of entity names and their
        other spellings that the collection keeps (docs/ingest.md, "Entities").

        ``stage``: store the documents, batch by batch, for a later :meth:`build_staged`
        instead of building a snapshot (``report.staged``; ``activate`` does not apply): many
        processes can stage into one collection at once (docs/snapshots.md, "Parallel ingest").
        ``time_budget_s``: past it the ingest stops (``TimeBudgetExceeded``) and stores nothing
        (checked after each file is read and before storing)."""
        from pgcite.ingest._pipeline import ingest
        from pgcite.lifecycle import gate_ingest

        with self.client.connection() as conn:
            current = get_collection(conn, self.name).settings
        gated = activate and not stage and current.golden is not None
        report = ingest(
            self.client.db, self.name, [Path(p) for p in paths], mapping=mapping,
            overrides=overrides, catalogue=Path(catalogue) if catalogue is not None else None,
            dates_from_names=dates_from_names, dates_from_timestamps=dates_from_timestamps,
            entries=entries, corpus_version=corpus_version, replace=replace,
            activate=activate and not gated, progress=progress, settings=self.client.settings,
            chat=self.client.llm() if current.contextual == "llm" else None,
            aliases=Path(aliases) if aliases is not None else None, stage=stage,
            time_budget_s=time_budget_s,
        )
        if gated and report.snapshot_id is not None:
            report = gate_ingest(self, report)
        self.client.active_pointers().invalidate(self.name)
        return report

    def staged(self) -> StagedSummary:
        """What staged ingests stored that no build has taken yet (invisible to search)."""
        from pgcite.store._staged import staged_summary

        with self.client.connection() as conn:
            return staged_summary(conn, self.info)

    def build_staged(self, *, activate: bool = True,
                     corpus_version: str | None = None) -> StagedBuild:
        """ONE snapshot of the active one plus every staged version (per document the one
        staged last), taking over the staging workers' segments, in one transaction. It goes
        live as an ingest's would: through the gate when the collection has a golden set
        (``report.gate``), not at all with ``activate=False``. Raises ``PgciteError`` if
        nothing is staged; ``report.snapshot_id`` is None if what is staged is live already."""
        from pgcite.lifecycle import gate_ingest
        from pgcite.store._staged import build_staged, staged_summary

        started = time.monotonic()
        with self.client.connection() as conn:
            info = get_collection(conn, self.name)
        gated = activate and info.settings.golden is not None
        with self.client.db.transaction() as conn:
            staged_chunks = staged_summary(conn, info).chunks
            report = build_staged(conn, info, spec=info.embedder, activate=activate and not gated,
                                  corpus_version=corpus_version)
        # what the workers wrote is searchable now: statistics, then the merges due
        report.merged = after_build(self.client.db.transaction, info, report.snapshot_id,
                                    chunks_added=staged_chunks, settings=self.client.settings)
        if gated and report.snapshot_id is not None:
            report = gate_ingest(self, report)
        self.client.active_pointers().invalidate(self.name)
        return report.model_copy(update={"seconds": round(time.monotonic() - started, 3)})

    def documents(self, *, snapshot_id: int | None = None, limit: int | None = None,
                  offset: int = 0) -> list[DocumentInfo]:
        """The documents of the active snapshot (or ``snapshot_id``): id, title, dates, author,
        corpus, source and chunk count, oldest first."""
        snapshot = self._snapshot(snapshot_id)
        with self.client.connection() as conn:
            return list_documents(conn, self.info, snapshot.snapshot_id, limit=limit,
                                  offset=offset)

    def delete_documents(self, ids: Sequence[str], *, activate: bool = True) -> DocumentsRemoved:
        """A new snapshot: the active one without the documents ``ids`` (nothing stored is
        deleted; ``pgcite snapshot rollback`` undoes it). It goes live as an ingest's would:
        through the gate when the collection has a golden set (``report.gate`` says how it
        went), not at all with ``activate=False``. An id the active snapshot does not hold is
        an error, and then nothing changes."""
        for document_id in ids:
            check_text(document_id, "document id", max_chars=MAX_ID_CHARS)
        with self.client.connection() as conn:
            info = get_collection(conn, self.name)
        gated = activate and info.settings.golden is not None
        with self.client.db.transaction() as conn:
            if activate and not gated:
                lock_activations(conn, info)  # as ingest: build on what is active at commit
            base = active_snapshot(conn, info)
            if base is None:
                raise PgciteError(f"collection {self.name!r} has no active snapshot yet")
            report = build_without(conn, info, base, ids, activate=activate and not gated)
        report = report.model_copy(update={"merged": after_build(
            self.client.db.transaction, info, report.snapshot_id, chunks_added=0,
            settings=self.client.settings)})
        if gated:
            from pgcite.lifecycle import gate_ingest

            report = gate_ingest(self, report)
        self.client.active_pointers().invalidate(self.name)
        return report

    def optimize(self, *, snapshot_id: int | None = None, full: bool = False) -> OptimizeReport:
        """Merge the keyword index's segments of the active snapshot (or ``snapshot_id``) by
        the tiered policy, or all into one (``full``), purging deleted chunks. No score or
        result changes (docs/snapshots.md, "Segments"); segments other snapshots still use are
        kept until gc removes those snapshots."""
        target = self._snapshot(snapshot_id).snapshot_id
        with self.client.db.transaction() as conn:
            report = optimize(conn, self.name, self.info.schema_name, target, full=full)
        if report.merges:  # after the commit: what the merge wrote is what the plans read now
            with self.client.db.transaction() as conn:
                refresh_after_merge(conn, self.info)
        return report

    def view(self, snapshot_id: int | None = None, *, embedder: bool = True) -> SearchView:
        """This collection as one request sees it: one snapshot (the active one unless
        ``snapshot_id``), the snapshot's embedder (unless ``embedder=False``) and the client's
        stage models, resolved once. Everything a request does goes through one view."""
        if self._pinned is not None and snapshot_id is None:
            return self._pinned
        snapshot = self._snapshot(snapshot_id)
        # The snapshot's recorded model, never the collection's current one: a query is embedded
        # by exactly the model its snapshot's vectors came from.
        model = embedder_for_key(snapshot.embed_model, self.client.settings) if embedder else None
        models = StageModels(chat=self.client.llm(), reranker=self.client.reranker(),
                             embedder=model)
        return SearchView(info=self.info, snapshot=snapshot, models=models,
                          connection=self._connection)

    def pinned(self, view: SearchView) -> Collection:
        """This collection with every search going through ``view`` (one snapshot, one set of
        models), e.g. for the several searches of one answer."""
        return Collection(self.client, self.info, connection=self._connection, view=view,
                          snapshots=self._snapshots)

    @_reads
    def search(
        self,
        query: str,
        *,
        top_k: int | None = None,
        mode: Mode | None = None,
        filters: Filters | Mapping[str, Any] | None = None,
        options: SearchOptions | Mapping[str, Any] | None = None,
        stages: Stages | Mapping[str, Any] | None = None,
        explain: bool = False,
        query_vector: np.ndarray | None = None,
        snapshot_id: int | None = None,
        snippets: bool | int = DEFAULT_SNIPPETS,
    ) -> SearchResult:
        """Passages for ``query`` with citation ids, filtered in SQL.

        ``filters`` (a :class:`Filters` or a dict: cutoff, corpora, authors, metadata …) says
        what may come back; ``options`` (a :class:`SearchOptions` or a dict: fusion, weights,
        ef_search …) how it is ranked; ``top_k`` and ``mode`` are shorthands for the two options
        set most often. ``fusion`` and ``weights`` default to the collection's settings (convex,
        1:1 unless set with ``pgcite collection set --fusion/--weights``). ``stages`` overrides
        the collection's optional quality stages for this query, e.g. ``{"rerank": True}``
        (docs/retrieval.md, "Quality stages"); what each stage did is in ``result.stages``.
        ``snippets``: give the first hits a ``snippet`` around the words that matched, with
        their ``highlights`` -- the first ``DEFAULT_SNIPPETS`` (10) by default, ``True`` every
        hit, ``False`` none, a number that many (docs/retrieval.md, "Snippets").
        """
        merged_filters, merged_options = search_arguments(top_k, mode, filters, options)
        view = self.view(snapshot_id, embedder=merged_options.mode != "keyword")
        result = view.search(query, filters=merged_filters, options=merged_options,
                             stages=stages, query_vector=query_vector, explain=explain)
        return self._finish(result, merged_filters, snippets)

    def _finish(self, result: SearchResult, filters: Filters,
                snippets: bool | int) -> SearchResult:
        """``result`` with its snippets and undated count, both read on ONE connection of this
        collection's (in the service: role-scoped) kind, and none when neither is wanted."""
        limit = snippet_limit(snippets, len(result.hits))
        result, limit = marked_here(result, self.info.ts_config, limit)  # the rest: the database's
        if not limit and filters.cutoff is None:
            return result
        with self._connection() as conn:
            if limit:
                result = self._with_snippets(conn, result, limit)
            return self._note_undated(conn, result, filters)

    def _note_undated(self, conn: psycopg.Connection, result: R, filters: Filters) -> R:
        """``result`` with the count of undated passages its cutoff left out (docs/ingest.md)."""
        if filters.cutoff is not None:
            result.undated_excluded = undated_excluded(
                conn, self.info, self._snapshot(result.snapshot_id), filters)
        return result

    def _with_snippets(self, conn: psycopg.Connection, result: SearchResult,
                       limit: int) -> SearchResult:
        started = time.perf_counter()
        hits = with_snippets(conn, self.info.ts_config, result.lexemes, result.hits, limit)
        timings = {**result.timings_ms, "snippets": (time.perf_counter() - started) * 1000}
        return result.model_copy(update={"hits": hits, "timings_ms": timings})

    def entities(
        self,
        *,
        near: str | None = None,
        filters: Filters | Mapping[str, Any] | None = None,
        kind: Kind = "any",
        limit: int = 20,
        citations: int = 5,
        edges: int = 0,
        snapshot_id: int | None = None,
    ) -> EntitiesResult:
        """Entities ranked by the passages that mention them -- with ``near``, by the passages
        that mention them together with that entity (any spelling its aliases know) -- each
        with the citation ids that support it; ``edges`` > 0 adds the heaviest co-occurrence
        edges. Computed in SQL over the snapshot's passages under ``filters`` (cutoff,
        corpora, metadata), so nothing after the cutoff counts (docs/retrieval.md,
        "Entities")."""
        wanted = merge_filters(filters if isinstance(filters, Filters) else dict(filters or {}),
                               None, None, None)
        if near is not None:
            check_text(near, "near", max_chars=MAX_NAME_CHARS)
        if not 1 <= limit <= 1000 or not 1 <= citations <= 100 or not 0 <= edges <= 1000:
            raise ConfigError("limit must be 1-1000, citations 1-100 and edges 0-1000")
        snapshot = self._snapshot(snapshot_id)
        with self._connection() as conn:
            found = related_entities(conn, self.info, snapshot, filters=wanted, near=near,
                                     kind=kind, limit=limit, citations=citations)
            graph = (entity_graph(conn, self.info, snapshot, filters=wanted, limit=edges,
                                  citations=citations) if edges else [])
            return EntitiesResult(
                collection=self.name, snapshot_id=snapshot.snapshot_id, near=near,
                near_key=canonical_key(conn, self.info, near) if near is not None else None,
                entities=found, edges=graph, models=snapshot_models(conn, self.info, snapshot))

    @_reads
    def answer(
        self,
        question: str,
        *,
        top_k: int | None = None,
        mode: Mode | None = None,
        filters: Filters | Mapping[str, Any] | None = None,
        options: AnswerOptions | Mapping[str, Any] | None = None,
        stages: Mapping[str, Any] | None = None,
        snapshot_id: int | None = None,
        generator: Generator | str | None = None,
        judge: ChatModel | None = None,
        external: ExternalSearch | None = None,
        wrap_generator: Callable[[Generator], Generator] | None = None,
        wrap_search: Callable[[SearchFn], SearchFn] | None = None,
        **deprecated: Unpack[DeprecatedAnswerKeywords],
    ) -> Answer:
        """A grounded answer whose every citation is a retrieved passage (see docs/answers.md).

        The shape of :meth:`search`: ``filters`` (a :class:`Filters` or a dict: cutoff,
        corpora, metadata …) says what it may cite; ``options`` (an :class:`AnswerOptions` or a
        dict: token_budget, threshold, persona, self_check, entity_facts, neighbours …) how it
        answers; ``top_k`` and ``mode`` are shorthands for the two options set most often, and
        ``stages`` and ``snapshot_id`` are as in :meth:`search`. ``self_check`` (in options):
        grading, the corrective loop and the sufficiency check, e.g. ``{"grade": True}``,
        judged by ``judge`` or the client's configured LLM (docs/answers.md, "Self-correcting").

        ``generator``: a Generator, a kind name ("extractive", the default), or None.
        ``wrap_search`` wraps the answer's search (this collection's, on the answer's one view,
        without snippets), e.g. to hand it a result retrieved already: the async API awaits the
        first retrieval on its event loop. The keywords this method took before ``options``
        (``cutoff=``, ``corpora=``, ``threshold=``, ``persona=`` …: :class:`DeprecatedAnswerKeywords`)
        still work, with a DeprecationWarning.
        """
        from pgcite.answer._llm import GeneratorConfig, make_generator
        from pgcite.answer._pipeline import answer_question
        from pgcite.answer._search import AnswerSettings

        check_query(question)  # before anything reads the question: the entity graph does
        if isinstance(generator, str):
            generator = make_generator(GeneratorConfig(kind=generator))  # type: ignore[arg-type]
        filters, options = answer_arguments(top_k, mode, filters, options, stages, snapshot_id,
                                            deprecated)
        # one snapshot and one set of models for every search the answer makes
        view = self.view(options.snapshot_id, embedder=options.mode != "keyword")
        pinned = self.pinned(view)

        def search(query: str, *, top_k: int, mode: Mode, filters: Filters,
                   stages: Mapping[str, Any] | None) -> SearchResult:
            # sources carry their own excerpts: no snippet statement
            return pinned.search(query, top_k=top_k, mode=mode, filters=filters, stages=stages,
                                 snippets=False)

        settings = AnswerSettings(persona_author=self.info.settings.persona_author,
                                  language=self.info.ts_config,
                                  abstention=self.info.settings.abstention)
        if judge is None and options.self_check.active:
            judge = self.client.llm()
        retrieve = wrap_search(search) if wrap_search is not None else search
        answer = answer_question(retrieve, question, settings=settings,
                                 embedder=view.models.embedder, options=options,
                                 filters=filters, generator=generator, judge=judge,
                                 external=external,
                                 wrap_generator=wrap_generator,
                                 entity_evidence=view.entity_evidence,
                                 neighbours=view.neighbours)
        if filters.cutoff is None:
            return answer
        with self._connection() as conn:
            return self._note_undated(conn, answer, filters)

    def snapshot(self, snapshot_id: int | None = None) -> SnapshotInfo:
        """The snapshot ``snapshot_id`` (default: the active one); only a ready snapshot
        can be searched or listed."""
        return self._snapshot(snapshot_id)

    def _snapshot(self, snapshot_id: int | None) -> SnapshotInfo:
        if snapshot_id is None:
            return self.active_snapshot()
        if self._snapshots == "active":
            # before anything says whether that snapshot exists (service/_access.py)
            active = self.active_snapshot()
            if snapshot_id != active.snapshot_id:
                raise AccessDenied(SNAPSHOT_DENIED, hint=SNAPSHOT_DENIED_HINT)
            return active
        for snap in self._snapshots_with(snapshot_id):
            if snap.snapshot_id == snapshot_id:
                if snap.state != "ready":
                    raise PgciteError(f"snapshot {snapshot_id} of {self.name!r} is "
                                      f"{snap.state}, not ready: it cannot be searched")
                return snap
        # no list of the others: whoever may see them lists them (`pgcite snapshot list`)
        raise SnapshotNotFound(f"collection {self.name!r} has no snapshot {snapshot_id}",
                               hint="leave the snapshot out to use the active one")

    def _snapshots_with(self, snapshot_id: int) -> list[SnapshotInfo]:
        """The snapshots; on a replica, waiting (``replica_wait_s``) for ``snapshot_id`` to be
        replayed ready, then sending the read to the primary (``ReplicaBehind``)."""
        deadline = time.monotonic() + self.client.settings.replica_wait_s
        while True:
            snapshots = self.snapshots()
            if not on_replica() or any(s.snapshot_id == snapshot_id and s.state == "ready"
                                       for s in snapshots):
                return snapshots
            if time.monotonic() >= deadline:
                raise ReplicaBehind(f"{self.name}: snapshot {snapshot_id} not replayed yet")
            time.sleep(0.05)


def search_arguments(
    top_k: int | None,
    mode: Mode | None,
    filters: Filters | Mapping[str, Any] | None,
    options: SearchOptions | Mapping[str, Any] | None,
) -> tuple[Filters, SearchOptions]:
    """A search's filters and options from its arguments, the ``top_k``/``mode`` shorthands on
    top of ``options``. One place for the sync and the async :meth:`search`."""
    merged_filters = merge_filters(dict(filters) if isinstance(filters, Mapping) else filters,
                                   None, None, None)
    merged_options = SearchOptions.coerce(options)
    shorthand = {k: v for k, v in (("top_k", top_k), ("mode", mode)) if v is not None}
    if shorthand:
        merged_options = SearchOptions(**{**merged_options.model_dump(exclude_unset=True),
                                          **shorthand})
    return merged_filters, merged_options


class IngestKeywords(TypedDict, total=False):
    """The keywords of :meth:`Collection.ingest`, for the APIs that pass them on (the async
    :meth:`AsyncCollection.ingest`): one list, checked against the sync signature by
    tests/test_async.py, so a new keyword cannot be typed on one side only."""

    mapping: FieldMapping | None
    overrides: Overrides | None
    catalogue: str | Path | None
    dates_from_names: bool
    dates_from_timestamps: bool
    entries: bool
    corpus_version: str | None
    replace: bool
    activate: bool
    progress: bool
    aliases: str | Path | None
    stage: bool
    time_budget_s: float | None


class DeprecatedAnswerKeywords(TypedDict, total=False):
    """The keywords :meth:`Collection.answer` took before ``filters`` and ``options`` carried
    them. Each still works, with a DeprecationWarning saying where it goes now."""

    cutoff: dt.date | str | None  # filters
    corpora: Sequence[str] | None  # filters
    token_budget: int  # options, and the rest too
    threshold: float | None
    persona: str | None
    abstention_text: str | None
    attribution_fallback: str | None
    self_check: SelfCheckOptions | Mapping[str, Any] | None
    entity_facts: bool
    neighbours: int | None


_DEPRECATED_FILTERS = ("cutoff", "corpora")


def answer_arguments(
    top_k: int | None,
    mode: Mode | None,
    filters: Filters | Mapping[str, Any] | None,
    options: AnswerOptions | Mapping[str, Any] | None,
    stages: Mapping[str, Any] | None,
    snapshot_id: int | None,
    deprecated: DeprecatedAnswerKeywords,
) -> tuple[Filters, AnswerOptions]:
    """An answer's filters and options from its arguments, as :func:`search_arguments` makes a
    search's: ``top_k``, ``mode``, ``stages`` and ``snapshot_id`` on top of ``options``, and
    the deprecated keywords (warned about) on top of both. One place for the sync and the
    async :meth:`answer`."""
    old = {k: v for k, v in deprecated.items()
           if v is not None and k not in _DEPRECATED_FILTERS}
    if deprecated:
        moved = ", ".join(f"{k} in {'filters' if k in _DEPRECATED_FILTERS else 'options'}="
                          for k in deprecated)
        _warn_caller(f"Collection.answer's keywords are deprecated: pass {moved} (as search "
                     "takes them; docs/api.md)")
    merged_filters = merge_filters(dict(filters) if isinstance(filters, Mapping) else filters,
                                   deprecated.get("cutoff"), deprecated.get("corpora"), None)
    given = (options.model_dump(exclude_unset=True) if isinstance(options, AnswerOptions)
             else dict(options or {}))
    shorthand = {k: v for k, v in (("top_k", top_k), ("mode", mode), ("snapshot_id", snapshot_id),
                                   ("stages", None if stages is None else dict(stages)))
                 if v is not None}
    try:
        merged_options = AnswerOptions(**{**given, **shorthand, **old})
    except ValidationError as exc:
        raise ConfigError(f"bad answer options: {first_problem(exc, 'options')}",
                          hint="see docs/answers.md and docs/api.md") from None
    return merged_filters, merged_options


def _warn_caller(message: str) -> None:
    """A DeprecationWarning pointing at the first frame outside pgcite: the user's call, however
    many of pgcite's frames (the replica wrapper, the async API, an exhibit) lie between."""
    level, frame = 2, sys._getframe(1)  # stacklevel 2: our caller
    while frame is not None and frame.f_globals.get("__name__", "").startswith("pgcite"):
        level, frame = level + 1, frame.f_back  # type: ignore[assignment]
    warnings.warn(message, DeprecationWarning, stacklevel=level)


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
