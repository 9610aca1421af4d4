"""The async Python API: ``await pgcite.connect_async()`` → :class:`AsyncClient` →
:class:`AsyncCollection`, with the sync API's types (``SearchResult``, ``Answer``, …).

What is awaited, and what still runs in a worker thread (said here so nobody assumes more):

- ``search`` without optional stages runs its statement on psycopg's async pool, with the very
  statement, settings and shaping of the sync search (:mod:`pgcite.retrieve._asearch`). The
  query embedding (model inference, CPU work) runs in a worker thread, as do snapshot lookups
  that miss the in-process cache.
- ``search`` with optional stages (the heuristic router is on by default), ``answer`` and
  ``ingest`` call the sync API in a worker thread: their stages and generators are synchronous.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pgvector.psycopg import register_vector_async
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from pgcite._client import Client, Collection, connect
from pgcite._types import Mode
from pgcite.answer._types import Answer
from pgcite.embed._registry import embedder_for_key
from pgcite.ingest._pipeline import IngestReport
from pgcite.retrieve._asearch import arun_search
from pgcite.retrieve._filters import Filters, MetadataPredicate, merge_filters
from pgcite.retrieve._hits import SearchResult
from pgcite.retrieve._pipeline import Stages
from pgcite.retrieve._search import SearchOptions
from pgcite.store._snapshots import SnapshotInfo


async def _configure(conn: AsyncConnection) -> None:
    await register_vector_async(conn)


class AsyncClient:
    """A sync :class:`Client` (for what still runs in threads) plus an async connection pool."""

    def __init__(self, client: Client, pool: AsyncConnectionPool) -> None:
        self.sync, self.pool = client, pool

    async def collection(self, name: str) -> AsyncCollection:
        return AsyncCollection(self, await asyncio.to_thread(self.sync.collection, name))

    async def close(self) -> None:
        await self.pool.close()
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncCollection:
    """One collection, awaited: ``search``, ``answer``, ``ingest`` as in :class:`Collection`."""

    def __init__(self, client: AsyncClient, collection: Collection) -> None:
        self.client, self.sync = client, collection

    @property
    def name(self) -> str:
        return self.sync.name

    async def search(
        self,
        query: str,
        *,
        top_k: int = 5,
        mode: Mode = "hybrid",
        filters: Filters | dict[str, Any] | None = None,
        cutoff: dt.date | str | None = None,
        corpora: Sequence[str] | None = None,
        metadata: Sequence[MetadataPredicate] | None = None,
        explain: bool = False,
        snapshot_id: int | None = None,
        stages: Stages | Mapping[str, Any] | None = None,
    ) -> SearchResult:
        """As :meth:`Collection.search` (its common arguments)."""
        plan = Stages.model_validate(self.sync.info.settings.stages).merged(stages)
        if plan.active:
            return await asyncio.to_thread(
                self.sync.search, query, top_k=top_k, mode=mode,
                filters=merge_filters(filters, cutoff, corpora, metadata), explain=explain,
                snapshot_id=snapshot_id, stages=stages)
        merged = merge_filters(filters, cutoff, corpora, metadata)
        settings = self.sync.info.settings
        options = SearchOptions(top_k=top_k, mode=mode, weights=settings.weights,
                                fusion=settings.fusion, term_depth=settings.term_depth)
        started = time.perf_counter()
        snapshot = await asyncio.to_thread(self.sync._snapshot, snapshot_id)
        vector, timings = None, {}
        if mode != "keyword" and query.strip():
            vector, timings["embed"] = await asyncio.to_thread(self._embed, snapshot, query)
        async with self.client.pool.connection() as conn:
            return await arun_search(conn, self.sync.info, snapshot, query, filters=merged,
                                     options=options, query_vector=vector, explain=explain,
                                     timings=timings, started=started)

    def _embed(self, snapshot: SnapshotInfo, query: str) -> tuple[np.ndarray, float]:
        # The snapshot's recorded model, as in the sync search.
        started = time.perf_counter()
        embedder = embedder_for_key(snapshot.embed_model, self.client.sync.settings)
        return embedder.embed_query(query), (time.perf_counter() - started) * 1000

    async def answer(self, question: str, **options: Any) -> Answer:
        """As :meth:`Collection.answer` (in a worker thread: its generators are synchronous)."""
        return await asyncio.to_thread(self.sync.answer, question, **options)

    async def ingest(self, paths: Sequence[str | Path], **options: Any) -> IngestReport:
        """As :meth:`Collection.ingest` (in a worker thread)."""
        return await asyncio.to_thread(self.sync.ingest, paths, **options)


async def connect_async(
    database_url: str | None = None, *, data_dir: str | Path | None = None,
    max_connections: int = 16,
) -> AsyncClient:
    """Open pgcite for asyncio: the embedded PostgreSQL by default, or ``database_url``."""
    client = await asyncio.to_thread(connect, database_url, data_dir=data_dir)
    pool = AsyncConnectionPool(client.db.url, min_size=1, max_size=max_connections, open=False,
                               configure=_configure, kwargs={"autocommit": True})
    await pool.open()
    return AsyncClient(client, pool)
