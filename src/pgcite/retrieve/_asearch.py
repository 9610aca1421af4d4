"""One search on an async connection: the same statement (:func:`prepare_search`), settings and
result shaping as :func:`run_search`; only the round trip is awaited."""

from __future__ import annotations

import time

import numpy as np
import psycopg
from psycopg import AsyncConnection

from pgcite._errors import ConfigError
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._hits import SearchResult
from pgcite.retrieve._search import SEARCH_SETTINGS, SearchOptions, prepare_search, shape_result
from pgcite.store._collections import CollectionInfo
from pgcite.store._snapshots import SnapshotInfo


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
    """Search ``snapshot``; a vector or hybrid search needs ``query_vector`` (embedding is the
    caller's: model inference does not belong on an event loop). ``started``: when the caller
    began (before embedding), for the total."""
    if not query.strip():
        raise ConfigError("the question is empty")
    timings = dict(timings or {})
    started = time.perf_counter() if started is None else started
    statement, params = prepare_search(info, snapshot, query, filters=filters, options=options,
                                       query_vector=query_vector, explain=explain)
    t0 = time.perf_counter()
    async with conn.pipeline(), conn.transaction(), conn.cursor(
            row_factory=psycopg.rows.dict_row) as cur:
        await cur.execute(SEARCH_SETTINGS, (str(options.hnsw_ef_search),))
        await cur.execute(statement, params)
        rows = await cur.fetchall()
    timings["database"] = (time.perf_counter() - t0) * 1000
    return shape_result(rows, query, info, snapshot, options=options, explain=explain,
                        timings=timings, started=started)
