"""A build that grows a collection leaves the search plans' tables analyzed (store/_statistics.py):
a new collection's tables have no statistics until autovacuum's first analyze, and without them
the vector leg's membership check read every chunk (bench/scale.py, 100k chunks: 520 ms vs 6)."""

from __future__ import annotations

from pathlib import Path

from psycopg import sql

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


def test_a_merge_leaves_the_segment_tables_analyzed(client: pgcite.Client,
                                                   tmp_path: Path) -> None:
    """optimize rewrites segments under new ids (the old rows stay for older snapshots): the
    segment tables' statistics must describe the rows the plans now read."""
    col = client.create_collection("statistics_merge")
    try:
        col.ingest([DIARY])
        extra = tmp_path / "extra.jsonl"
        extra.write_text('{"_id": "x-1", "date": "1667-01-01", "text": "A small new entry."}\n',
                         encoding="utf-8")
        col.ingest([extra])  # one chunk: under a tenth, nothing analyzed
        report = col.optimize(full=True)
        assert report.merges == 1 and report.segments_after == 1
        with client.connection() as conn:
            (rows,) = conn.execute(psycopg_sql("SELECT count(*) FROM {s}.segment_versions",
                                               col)).fetchone()
        assert _reltuples(client, col)["segment_versions"] == rows  # both segments' rows + merged
    finally:
        client.drop_collection("statistics_merge")


def psycopg_sql(text: str, col: pgcite.Collection) -> sql.Composed:
    return sql.SQL(text).format(s=col.info.schema_id)
