"""Searches on an async connection: the sync search's statement (:func:`prepare_search`),
settings, stages and result shaping; only the round trips are awaited.

What the sync path shares with this one, so that neither has a copy of the other's logic:
:meth:`SearchView.plan` and :meth:`SearchView.retrieval` (options, stages, a route's weights),
the stage steps of :mod:`pgcite.retrieve._pipeline`, :func:`prepare_search` and
:func:`shape_result`, :func:`snippet_statement` / :func:`apply_snippets`, :func:`undated_count`.
What differs is the I/O shell: ``await`` on psycopg's async connections, and model work (query
embedding, an LLM-backed stage, the reranker) handed to ``offload``, a bounded executor, so that
the event loop never runs model inference.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
import psycopg
from psycopg import AsyncConnection

from pgcite.retrieve._filters import Filters
from pgcite.retrieve._hits import SearchResult
from pgcite.retrieve._pipeline import (
    Retrieval,
    StageRun,
    Stages,
    combine_retrievals,
    entity_boost_for,
    finish_calls_model,
    finish_stages,
    plan_calls_model,
    plan_stages,
    retrievals_call_model,
    stage_retrievals,
)
from pgcite.retrieve._search import (
    PLANNED_EF_SEARCH,
    SearchOptions,
    check_query,
    planned_ef_search,
    prepare_search,
    shape_result,
)
from pgcite.retrieve._snippets import apply_snippets, snippet_statement
from pgcite.retrieve._undated import undated_count
from pgcite.retrieve._view import SearchView
from pgcite.retrieve._when import asked_periods
from pgcite.store._collections import CollectionInfo
from pgcite.store._snapshots import SnapshotInfo

T = TypeVar("T")
AsyncConnectionFactory = Callable[[], AbstractAsyncContextManager[AsyncConnection]]


class Offload(Protocol):
    """Runs a blocking call (model inference) off the event loop and awaits its result."""

    def __call__(self, fn: Callable[[], T], /) -> Awaitable[T]: ...


@dataclass(frozen=True)
class AsyncSearchView:
    """A :class:`SearchView` (one snapshot, one set of models) searched with ``await``:
    connections from ``connection`` (an async pool, role-scoped in the service), model work
    through ``offload``."""

    view: SearchView
    connection: AsyncConnectionFactory
    offload: Offload

    async def search(
        self,
        query: str,
        *,
        filters: Filters | None = None,
        options: SearchOptions | None = None,
        stages: Stages | Mapping[str, Any] | None = None,
        query_vector: np.ndarray | None = None,
        explain: bool = False,
    ) -> SearchResult:
        """As :meth:`SearchView.search`."""
        filters = filters or Filters()
        given = options
        requested, options, plan = self.view.plan(options, stages)
        if entity_boost_for(plan, query)[0] > 0 or (plan.date_boost > 0
                                                      and asked_periods(query)):
            # the boosts read entity rows or a deeper list around the fused search: the sync
            # view's one implementation, off the loop (by default only entity questions and
            # questions naming a month or year take this path)
            return await self.offload(lambda: self.view.search(
                query, filters=filters, options=given, stages=stages,
                query_vector=query_vector, explain=explain))
        if not plan.active:
            return await self.search_once(query, filters=filters, options=options,
                                          query_vector=query_vector, explain=explain)
        started = time.perf_counter()
        models = self.view.models

        def planned() -> tuple[StageRun, int]:
            return plan_stages(query, mode=options.mode, stages=plan, models=models,
                               top_k=options.top_k)

        run, depth = await self._maybe_offload(plan_calls_model(plan, models), planned)
        wanted = await self._maybe_offload(retrievals_call_model(run),
                                           lambda: stage_retrievals(run, depth))

        async def one(retrieval: Retrieval) -> SearchResult:
            vector, chosen = self.view.retrieval(retrieval, query=query,
                                                 query_vector=query_vector,
                                                 requested=requested, options=options)
            return await self.search_once(retrieval.text, filters=filters, options=chosen,
                                          query_vector=vector, explain=explain)

        result = combine_retrievals(await asyncio.gather(*(one(r) for r in wanted)))
        return await self._maybe_offload(finish_calls_model(run), lambda: finish_stages(
            run, result, top_k=options.top_k, cutoff=filters.cutoff, started=started))

    async def search_once(self, query: str, *, filters: Filters, options: SearchOptions,
                          query_vector: np.ndarray | None = None,
                          explain: bool = False) -> SearchResult:
        """As :meth:`SearchView.search_once`; the query is embedded through ``offload``."""
        check_query(query)
        embedder = self.view.query_embedder(options, query_vector)
        started = time.perf_counter()
        timings: dict[str, float] = {}
        if embedder is not None:
            query_vector = await self.offload(lambda: embedder.embed_query(query))
            timings["embed"] = (time.perf_counter() - started) * 1000
        async with self.connection() as conn:
            return await arun_search(conn, self.view.info, self.view.snapshot, query,
                                     filters=filters, options=options,
                                     query_vector=query_vector, explain=explain,
                                     timings=timings, started=started)

    async def _maybe_offload(self, blocking: bool, fn: Callable[[], T]) -> T:
        # pure steps (the heuristic router, boosts, the cut) run on the loop: no hop for them
        return await self.offload(fn) if blocking else fn()


async def arun_search(
    conn: AsyncConnection,
    info: CollectionInfo,
    snapshot: SnapshotInfo,
    query: str,
    *,
    filters: Filters,
    options: SearchOptions,
    query_vector: np.ndarray | None,
    explain: bool = False,
    timings: dict[str, float] | None = None,
    started: float | None = None,
) -> SearchResult:
    """As :func:`run_search`, given the query vector (embedding is the caller's: model
    inference does not belong on an event loop). ``started``: when the caller began."""
    check_query(query)
    timings = dict(timings or {})
    started = time.perf_counter() if started is None else started
    statement, params = prepare_search(info, snapshot, query, filters=filters, options=options,
                                       query_vector=query_vector, explain=explain)
    t0 = time.perf_counter()
    planned = planned_ef_search(options)
    async with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        if planned is None:
            rows = await (await cur.execute(statement, params)).fetchall()
        else:  # as the sync search (run_embedded)
            async with conn.pipeline(), conn.transaction():
                await cur.execute(PLANNED_EF_SEARCH, (planned,))
                rows = await (await cur.execute(statement, params)).fetchall()
    timings["database"] = (time.perf_counter() - t0) * 1000
    return shape_result(rows, query, info, snapshot, options=options, explain=explain,
                        timings=timings, started=started)


async def afinish(conn: AsyncConnection, info: CollectionInfo, snapshot: SnapshotInfo,
                  result: SearchResult, filters: Filters, *, limit: int) -> SearchResult:
    """``result`` with the first ``limit`` hits' snippets and its undated count (as
    ``Collection.search`` adds them), read on ``conn``."""
    if limit:
        started = time.perf_counter()
        statement, params = snippet_statement(info.ts_config, result.lexemes, result.hits,
                                              limit)
        rows = await (await conn.execute(statement, params)).fetchall()
        hits = apply_snippets(result.hits, rows, limit)
        result = result.model_copy(update={"hits": hits, "timings_ms": {
            **result.timings_ms, "snippets": (time.perf_counter() - started) * 1000}})
    undated = await aundated_excluded(conn, info, snapshot, filters)
    if undated is not None:
        result.undated_excluded = undated
    return result


async def aundated_excluded(conn: AsyncConnection, info: CollectionInfo,
                            snapshot: SnapshotInfo, filters: Filters) -> int | None:
    """As :func:`undated_excluded`."""
    count = undated_count(info, snapshot, filters)
    if count is None or count.cached is not None:
        return None if count is None else count.cached
    return count.store(await (await conn.execute(count.statement, count.params)).fetchone())
