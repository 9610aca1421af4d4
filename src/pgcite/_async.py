"""The async Python API: ``await pgcite.connect_async()`` → :class:`AsyncClient` →
:class:`AsyncCollection`, with the sync API's types (``SearchResult``, ``Answer``, …).

One implementation: the arguments are resolved by the sync API's own functions
(:func:`search_arguments`, :meth:`Collection.view`), the statement, the stages and the result
shaping are the sync search's (:mod:`pgcite.retrieve._asearch` says which pieces); the awaited
part is the database round trips, on psycopg's :class:`AsyncConnectionPool`.

What runs where (said here so nobody assumes more):

- on the event loop: the database I/O, and the pure steps (argument checks, the heuristic
  router, statement building, boosts, shaping the hits);
- in the client's bounded executor (:class:`Offloader`, ``workers`` threads): model inference --
  the query embedding, an LLM-backed stage, the reranker -- and the answer's composition (the
  default answerer embeds every candidate sentence: CPU work), plus the first resolution of a
  collection's view (loading its embedder) and a lookup of a named snapshot;
- ``ingest`` runs the sync ingest in the executor: it is dominated by parsing and embedding
  (CPU), writes through COPY in one transaction, and an async copy of it would be a second
  implementation of the pipeline for no gain.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, Unpack

import numpy as np
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from pgcite._client import (
    POOL_WAIT_S,
    Client,
    Collection,
    DeprecatedAnswerKeywords,
    IngestKeywords,
    answer_arguments,
    connect,
    search_arguments,
)
from pgcite._types import Mode
from pgcite.answer._pipeline import AnswerOptions
from pgcite.answer._search import SearchFn
from pgcite.answer._selfcheck import ExternalSearch
from pgcite.answer._types import Answer, Generator
from pgcite.ingest._pipeline import IngestReport
from pgcite.llm import ChatModel
from pgcite.retrieve._asearch import AsyncConnectionFactory, AsyncSearchView, afinish
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._hits import SearchResult
from pgcite.retrieve._pipeline import Stages
from pgcite.retrieve._search import SearchOptions
from pgcite.retrieve._snippets import DEFAULT_SNIPPETS, marked_here, snippet_limit
from pgcite.retrieve._view import SearchView

T = TypeVar("T")
# Threads for model work (CPU-bound; the GIL is released inside the ONNX/torch kernels). 16,
# not 4: with 32 clients on 2 quiet cores, 4 threads queued a search's embedding 66 ms at p50
# (595 ms p95) for 31.7 req/s, 16 threads 1 ms (110 ms) for 33.7 req/s, against 34.8 req/s for
# the old thread-per-request service; under heavy load 16 also answered faster (0.37 vs 0.27
# answers/s). bench/async_service.py measured it: docs/http-api.md, "Concurrency".
DEFAULT_WORKERS = 16
DEFAULT_MAX_CONNECTIONS = 16


@dataclass
class OffloadStats:
    """What the executor did: calls, and how long they waited between submission and start
    (the queueing a benchmark looks for), in seconds."""

    calls: int = 0
    waited_s: float = 0.0
    max_wait_s: float = 0.0
    queued: int = 0  # calls that waited over a millisecond for a thread
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=10_000), repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, wait: float) -> None:
        with self._lock:
            self.calls += 1
            self.waited_s += wait
            self.max_wait_s = max(self.max_wait_s, wait)
            self.queued += wait > 0.001
            self.recent.append(wait)

    def snapshot(self) -> dict[str, float]:
        """The counts, and the p50/p95 wait (ms) of the last 10,000 calls."""
        with self._lock:
            waits = sorted(self.recent)
            return {"calls": self.calls, "waitedS": self.waited_s, "maxWaitS": self.max_wait_s,
                    "queued": self.queued,
                    "p50Ms": waits[len(waits) // 2] * 1000 if waits else 0.0,
                    "p95Ms": waits[int(len(waits) * 0.95)] * 1000 if waits else 0.0}


class Offloader:
    """A bounded executor for blocking work, awaited; it records each call's queue wait."""

    def __init__(self, workers: int = DEFAULT_WORKERS) -> None:
        self.workers = workers
        self._pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pgcite-cpu")
        self.stats = OffloadStats()

    async def __call__(self, fn: Callable[[], T], /) -> T:
        submitted = time.perf_counter()

        def timed() -> T:
            self.stats.record(time.perf_counter() - submitted)
            return fn()

        return await asyncio.wrap_future(self._pool.submit(timed))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


async def _configure(conn: AsyncConnection) -> None:
    await register_vector_async(conn)


def open_async_pool(url: str, *, max_size: int = DEFAULT_MAX_CONNECTIONS) -> AsyncConnectionPool:
    """The async pool (unopened): autocommit connections with pgvector's types, checked on
    checkout, and the sync pool's wait bound (a 503 with a retry hint, not a hang). The one
    place the async API makes a pool."""
    return AsyncConnectionPool(url, min_size=1, max_size=max_size, open=False,
                               configure=_configure, kwargs={"autocommit": True},
                               check=AsyncConnectionPool.check_connection, timeout=POOL_WAIT_S)


class AsyncClient:
    """A sync :class:`Client` (settings, models, the active-pointer cache, admin work) with
    an async connection pool and a bounded executor for model work."""

    def __init__(self, client: Client, pool: AsyncConnectionPool, *,
                 workers: int = DEFAULT_WORKERS, owns_client: bool = True) -> None:
        self.sync, self.pool = client, pool
        self.offload = Offloader(workers)
        self._generation = client.db.generation  # the embedded server's restarts the pool knows
        self._pool_lock = asyncio.Lock()
        self._owns_client = owns_client
        self._warm: set[tuple[str, bool]] = set()  # views resolved once (models loaded)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        """A pooled async connection (autocommit; use ``conn.transaction()`` for more)."""
        db = self.sync.db
        # as the sync pool: a dead embedded server is a DatabaseError now (and its restart
        # begins), not a pool timeout; after a restart the old pool's connections are dead
        db.check_alive()
        if self._generation != db.generation:
            async with self._pool_lock:
                if self._generation != db.generation:
                    stale, generation = self.pool, db.generation
                    self.pool = open_async_pool(db.url, max_size=stale.max_size)
                    await self.pool.open()
                    self._generation = generation
                    await stale.close(timeout=0)
        async with self.pool.connection() as conn:
            yield conn

    async def collection(self, name: str) -> AsyncCollection:
        # the registry read is the sync client's (once per collection object)
        return AsyncCollection(self, await self.offload(lambda: self.sync.collection(name)))

    async def close(self) -> None:
        await self.pool.close()
        self.offload.close()
        if self._owns_client:
            await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncCollection:
    """One collection, awaited: ``search``, ``answer``, ``ingest`` as in :class:`Collection`
    (``sync`` is that collection, for everything else)."""

    def __init__(self, client: AsyncClient, collection: Collection, *,
                 connection: AsyncConnectionFactory | None = None) -> None:
        self.client, self.sync = client, collection
        # Where searches get connections: the client's async pool, or (the service) a
        # role-scoped transaction on it.
        self._connection: AsyncConnectionFactory = connection or client.connection

    @property
    def name(self) -> str:
        return self.sync.name

    async def view(self, snapshot_id: int | None = None, *, embedder: bool = True) -> SearchView:
        """:meth:`Collection.view`, on the loop once its caches are warm (the active pointer
        is kept current by LISTEN/NOTIFY, models load once per process); in the executor the
        first time, and for a named snapshot (a lookup in the database)."""
        key = (self.name, embedder)
        if snapshot_id is None and key in self.client._warm:
            return self.sync.view(None, embedder=embedder)
        view = await self.client.offload(lambda: self.sync.view(snapshot_id, embedder=embedder))
        if snapshot_id is None:
            self.client._warm.add(key)
        return view

    def searcher(self, view: SearchView) -> AsyncSearchView:
        return AsyncSearchView(view, self._connection, self.client.offload)

    async def search(
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
        """As :meth:`Collection.search`: the same arguments, the same result."""
        merged_filters, merged_options = search_arguments(top_k, mode, filters, options)
        view = await self.view(snapshot_id, embedder=merged_options.mode != "keyword")
        return await self._search(view, query, filters=merged_filters, options=merged_options,
                                  stages=stages, query_vector=query_vector, explain=explain,
                                  snippets=snippets)

    async def _search(self, view: SearchView, query: str, *, filters: Filters,
                      options: SearchOptions, stages: Stages | Mapping[str, Any] | None,
                      query_vector: np.ndarray | None = None, explain: bool = False,
                      snippets: bool | int = DEFAULT_SNIPPETS) -> SearchResult:
        result = await self.searcher(view).search(query, filters=filters, options=options,
                                                  stages=stages, query_vector=query_vector,
                                                  explain=explain)
        limit = snippet_limit(snippets, len(result.hits))
        result, limit = marked_here(result, view.info.ts_config, limit)  # the rest: the database's
        if not limit and filters.cutoff is None:
            return result
        async with self._connection() as conn:  # one connection, as the sync search
            return await afinish(conn, view.info, view.snapshot, result, filters, limit=limit)

    async def answer(
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
        **deprecated: Unpack[DeprecatedAnswerKeywords],
    ) -> Answer:
        """As :meth:`Collection.answer` (the same arguments). The answer's first retrieval --
        the question at ``top_k`` -- is awaited here; the rest of the pipeline (the answerer
        embeds candidate sentences; generation; the guard) runs in the executor on the same
        view, with any further retrieval (a self-check's) made there by the sync search."""
        merged, resolved = answer_arguments(top_k, mode, filters, options, stages, snapshot_id,
                                            deprecated)
        view = await self.view(resolved.snapshot_id, embedder=resolved.mode != "keyword")
        first = await self._search(view, question, filters=merged, stages=resolved.stages,
                                   options=SearchOptions(top_k=resolved.top_k,
                                                         mode=resolved.mode),
                                   snippets=False)
        given, wanted_k = [first], resolved.top_k

        def first_then(search: SearchFn) -> SearchFn:
            def retrieve(query: str, *, top_k: int, mode: Mode, filters: Filters,
                         stages: Mapping[str, Any] | None) -> SearchResult:
                if given and query == question and top_k == wanted_k:
                    return given.pop()
                return search(query, top_k=top_k, mode=mode, filters=filters, stages=stages)
            return retrieve

        pinned = self.sync.pinned(view)
        return await self.client.offload(lambda: pinned.answer(
            question, filters=merged, options=resolved, generator=generator, judge=judge,
            external=external, wrap_generator=wrap_generator, wrap_search=first_then))

    async def ingest(self, paths: Sequence[str | Path],
                     **options: Unpack[IngestKeywords]) -> IngestReport:
        """As :meth:`Collection.ingest`, in the executor (see the module doc for why)."""
        return await self.client.offload(lambda: self.sync.ingest(paths, **options))


async def connect_async(
    database_url: str | None = None, *, data_dir: str | Path | None = None,
    max_connections: int = DEFAULT_MAX_CONNECTIONS, workers: int = DEFAULT_WORKERS,
) -> AsyncClient:
    """Open pgcite for asyncio: the embedded PostgreSQL by default, or ``database_url``.
    ``workers``: threads for model work (see the module doc)."""
    client = await asyncio.to_thread(connect, database_url, data_dir=data_dir)
    return await async_client(client, max_connections=max_connections, workers=workers,
                              owns_client=True)


async def async_client(client: Client, *, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                       workers: int = DEFAULT_WORKERS, owns_client: bool = False) -> AsyncClient:
    """An :class:`AsyncClient` over an open sync ``client`` (the service's), its pool opened."""
    pool = open_async_pool(client.db.url, max_size=max_connections)
    await pool.open()
    return AsyncClient(client, pool, workers=workers, owns_client=owns_client)
