"""How many passages a cutoff left out because they have no date at all.

A cutoff returns only passages dated on or before it, so an undated passage can never appear: a
corpus with undated documents (files no source dated) would look complete when it is not. A search
or answer with a cutoff reports the count, over the same snapshot and the other filters, so the
user learns that passages exist which the cutoff could not vouch for.

A snapshot never changes once built, so the count is cached per (collection schema, snapshot,
its creation time, the other filters): a cutoff query pays for it once, not on every request.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from pgcite.retrieve._filters import Filters, compile_filters
from pgcite.store._collections import CollectionInfo
from pgcite.store._snapshots import SnapshotInfo

_CACHE_SIZE = 1024
_cache: dict[tuple[str, int, str, str], int] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class UndatedCount:
    """How to know one search's undated count: ``cached`` if known, else run ``statement``
    and :meth:`store` its count (sync and async searches alike)."""

    key: tuple[str, int, str, str]
    cached: int | None
    statement: sql.Composed
    params: dict[str, Any]

    def store(self, row: Sequence[Any] | None) -> int:
        count = int(row[0]) if row else 0
        with _lock:
            if len(_cache) >= _CACHE_SIZE:
                _cache.clear()  # rare, and a recount is cheap enough once
            _cache[self.key] = count
        return count


def undated_count(info: CollectionInfo, snapshot: SnapshotInfo,
                  filters: Filters) -> UndatedCount | None:
    """The count's cache entry and statement; ``None`` without a cutoff."""
    if filters.cutoff is None:
        return None
    others = filters.model_copy(update={"cutoff": None})
    key = (info.schema_name, snapshot.snapshot_id, snapshot.created_at.isoformat(),
           others.model_dump_json())
    with _lock:
        cached = _cache.get(key)
    compiled = compile_filters(others, snapshot.metadata_fields or {}, info.schema_id)
    statement = sql.SQL(
        "SELECT count(*) FROM {s}.chunks c WHERE c.date_end IS NULL AND {filters}"
        " AND c.version_pk IN (SELECT version_pk FROM {s}.snapshot_members"
        " WHERE snapshot_id = %(snapshot_id)s)"
    ).format(s=info.schema_id, filters=compiled.sql())
    return UndatedCount(key, cached, statement,
                        {**compiled.params, "snapshot_id": snapshot.snapshot_id})


def undated_excluded(conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo,
                     filters: Filters) -> int | None:
    """Undated passages the other filters would have let through; ``None`` without a cutoff."""
    count = undated_count(info, snapshot, filters)
    if count is None or count.cached is not None:
        return None if count is None else count.cached
    return count.store(conn.execute(count.statement, count.params).fetchone())
