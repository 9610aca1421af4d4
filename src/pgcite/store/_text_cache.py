"""The lookup both per-collection caches keyed by text share (the embedding cache and the entity
cache): the cached value of each distinct text hash, read in batches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

_LOOKUP_BATCH = 2000


def cached(conn: psycopg.Connection, *, table: str, value: str, model_column: str, scope: str,
           model: str, shas: Sequence[bytes]) -> dict[bytes, Any]:
    """text hash -> ``value`` of ``pgcite.<table>`` for the hashes among ``shas`` that
    ``scope`` (a collection) has cached under ``model``."""
    query = sql.SQL("SELECT text_sha256, {value} FROM pgcite.{table} WHERE collection = %s"
                    " AND {model} = %s AND text_sha256 = ANY(%s)").format(
        value=sql.Identifier(value), table=sql.Identifier(table),
        model=sql.Identifier(model_column))
    unique = list(dict.fromkeys(shas))
    found: dict[bytes, Any] = {}
    for start in range(0, len(unique), _LOOKUP_BATCH):
        rows = conn.execute(query, (scope, model, unique[start: start + _LOOKUP_BATCH]))
        found.update((bytes(sha), row_value) for sha, row_value in rows)
    return found
