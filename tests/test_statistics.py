"""A build that grows a collection leaves the search plans' tables analyzed (store/_statistics.py):
a new collection's tables have no statistics until autovacuum's first analyze, and without them
the vector leg's membership check read every chunk (bench/scale.py, 100k chunks: 520 ms vs 6)."""

from __future__ import annotations

import pgcite
from pgcite.store._statistics import PLANNED_TABLES, refresh_statistics

from .conftest import DIARY


def _reltuples(client: pgcite.Client, col: pgcite.Collection) -> dict[str, float]:
    with client.connection() as conn:
        rows = conn.execute(
            "SELECT c.relname, c.reltuples FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = ANY(%s)",
            (col.info.schema_name, list(PLANNED_TABLES))).fetchall()
    return {name: float(tuples) for name, tuples in rows}


def test_a_new_collection_is_analyzed_by_its_first_ingest(client: pgcite.Client) -> None:
    col = client.create_collection("statistics_new")
    try:
        assert all(t < 0 for t in _reltuples(client, col).values())  # never analyzed yet
        report = col.ingest([DIARY])
        assert report.activated
        tuples = _reltuples(client, col)
        assert set(tuples) == set(PLANNED_TABLES)
        assert all(t >= 0 for t in tuples.values()), tuples
        assert tuples["chunks"] >= report.chunks_added > 0
    finally:
        client.drop_collection("statistics_new")


def test_only_growth_beyond_a_tenth_analyzes_again(client: pgcite.Client) -> None:
    col = client.create_collection("statistics_growth")
    try:
        col.ingest([DIARY])
        chunks = _reltuples(client, col)["chunks"]
        with client.db.transaction() as conn:
            assert refresh_statistics(conn, col.info, chunks_added=0) == []
            assert refresh_statistics(conn, col.info, chunks_added=int(chunks * 0.1)) == []
            assert refresh_statistics(conn, col.info, chunks_added=int(chunks * 0.1) + 1) == \
                list(PLANNED_TABLES)
    finally:
        client.drop_collection("statistics_growth")
