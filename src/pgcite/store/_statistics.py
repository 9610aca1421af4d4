"""Planner statistics after a build: a collection's search plans depend on them.

A new collection's tables have none until autovacuum's first analyze (a minute or more after
the load, later on a busy server), and without them the planner checked the vector leg's
snapshot membership by reading every chunk: 520 ms instead of 6 ms per search at 100k chunks
(measured: tests/test_statistics.py shows the plan, bench/scale.py the latency). So a build
that grows a collection by more than a tenth analyzes the tables the search plans read.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg import sql

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


# A merge (optimize) rewrites a snapshot's segments under new ids, the old rows staying for older
# snapshots until gc: the segment tables' statistics no longer describe what the plans read,
# whatever the collection's growth (its chunks do not change).
SEGMENT_TABLES = tuple(t for t in PLANNED_TABLES if t != "chunks")


def refresh_after_merge(conn: psycopg.Connection, info: CollectionInfo) -> list[str]:
    """ANALYZE the segment tables after ``optimize`` merged segments; returns their names."""
    return _analyze(conn, info, SEGMENT_TABLES)


def _analyze(conn: psycopg.Connection, info: CollectionInfo,
             tables: Sequence[str]) -> list[str]:
    for table in tables:
        conn.execute(sql.SQL("ANALYZE {s}.{t}").format(s=info.schema_id, t=sql.Identifier(table)))
    return list(tables)
