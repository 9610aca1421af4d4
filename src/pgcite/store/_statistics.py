"""Planner statistics after a build: a collection's search plans depend on them.

A new collection's tables have none until autovacuum's first analyze (a minute or more after
the load, later on a busy server), and without them the planner checked the vector leg's
snapshot membership by reading every chunk: 520 ms instead of 6 ms per search at 100k chunks
(measured: tests/test_statistics.py shows the plan, bench/scale.py the latency). So a build
that grows a collection by more than a tenth analyzes the tables the search plans read.

:func:`after_build` is what follows every build's commit: that refresh, then the keyword
index's merges due (pgcite.index), and the refresh those need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import psycopg
from psycopg import sql

from pgcite.config import Settings
from pgcite.index import MergeReport, merge_after_build
from pgcite.store._collections import CollectionInfo

# The tables whose statistics choose the search statement's plan.
PLANNED_TABLES = ("chunks", "segment_versions", "snapshot_segments", "segment_postings")
# Analyze when the rows just written exceed this share of what the statistics describe
# (autovacuum's own default is 0.1 of the table plus 50 rows).
GROWTH = 0.1


def refresh_statistics(conn: psycopg.Connection, info: CollectionInfo, *,
                       chunks_added: int) -> list[str]:
    """ANALYZE the planned tables that were never analyzed, or all of them when
    ``chunks_added`` exceeds GROWTH of the chunks the statistics know; returns their names.
    Small additions to a large collection cost nothing here (autovacuum keeps up with them)."""
    rows = conn.execute(
        "SELECT c.relname, c.reltuples FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = ANY(%s)",
        (info.schema_name, list(PLANNED_TABLES))).fetchall()
    known = {str(name): float(tuples) for name, tuples in rows}
    grew = chunks_added > GROWTH * max(known.get("chunks", -1.0), 0.0)
    stale = [t for t in PLANNED_TABLES if t in known and (known[t] < 0 or grew)]
    return _analyze(conn, info, stale)


# A merge rewrites a snapshot's segments under new ids, the old rows staying for older snapshots
# until gc: the segment tables' statistics no longer describe what the plans read, whatever the
# collection's growth (its chunks do not change).
SEGMENT_TABLES = tuple(t for t in PLANNED_TABLES if t != "chunks")


def refresh_after_merge(conn: psycopg.Connection, info: CollectionInfo, *,
                        chunks_written: int | None = None) -> list[str]:
    """ANALYZE the segment tables after merges (``optimize``: always; merges after a build:
    when they wrote more than GROWTH of the chunks the statistics know); returns their names."""
    if chunks_written is not None:
        row = conn.execute("SELECT c.reltuples FROM pg_class c JOIN pg_namespace n"
                           " ON n.oid = c.relnamespace WHERE n.nspname = %s"
                           " AND c.relname = 'chunks'", (info.schema_name,)).fetchone()
        if chunks_written <= GROWTH * max(float(row[0]) if row else 0.0, 0.0):
            return []
    return _analyze(conn, info, SEGMENT_TABLES)


def after_build(transaction: Callable[[], AbstractContextManager[psycopg.Connection]],
                info: CollectionInfo, snapshot_id: int | None, *, chunks_added: int,
                settings: Settings) -> MergeReport | None:
    """After a build's commit (``transaction()`` opens a transaction): the statistics a grown
    collection needs, then the keyword index's merges due for the new snapshot (at most
    ``settings.merge_budget_s`` of them: pgcite.index.merge_after_build) and the statistics
    those need. None when no snapshot was built."""
    with transaction() as conn:
        refresh_statistics(conn, info, chunks_added=chunks_added)
    if snapshot_id is None:
        return None
    report = merge_after_build(transaction, info.schema_name, snapshot_id,
                               budget_s=settings.merge_budget_s)
    if report.merges:
        with transaction() as conn:
            refresh_after_merge(conn, info, chunks_written=report.chunks_written)
    return report


def _analyze(conn: psycopg.Connection, info: CollectionInfo,
             tables: Sequence[str]) -> list[str]:
    for table in tables:
        conn.execute(sql.SQL("ANALYZE {s}.{t}").format(s=info.schema_id, t=sql.Identifier(table)))
    return list(tables)
