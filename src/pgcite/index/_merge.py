"""Merges: fewer, larger segments for a snapshot, with its deleted chunks purged; no score
changes (a snapshot's statistics do not depend on its layout).

Tiered, as Lucene's TieredMergePolicy: segments whose live sizes are within a factor of
MERGE_FACTOR of each other share a tier, and a tier that holds MERGE_FACTOR of them is merged
into one (a tier up); a segment mostly deleted is rewritten on its own. A snapshot of N chunks
so has at most MERGE_FACTOR - 1 segments a tier and log(N) tiers. :func:`merge_after_build` runs
that policy after every build, each merge in its own transaction, within a time budget and up
to a largest merged size (Lucene's maxMergedSegmentMB); :func:`optimize` runs it on demand, or
merges everything into one segment.

A merge changes one snapshot's rows (its segments and statistics) in a transaction of its own:
readers keep reading the rows they started with (MVCC), so no search waits for a merge. Other
snapshots keep the segments they had; gc removes what no snapshot uses.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import psycopg
from psycopg import sql

from pgcite._camel import CamelModel
from pgcite._errors import PgciteError
from pgcite.index._writer import add_segment, finish_snapshot, new_segment

MERGE_FACTOR = 10
# A segment whose deleted share passes this is rewritten on its own (its dead postings purged).
MAX_DELETED_SHARE = 0.3
# What an automatic merge may cost: the chunks it writes per second of its budget, the floor
# measured on a 2-core machine under load (bench/results/merges: a full merge wrote 3,230
# chunks/s at 11k chunks, 4,842 at 101k, load average ~13); a merge that would write more is
# left for `pgcite collection optimize`, as Lucene leaves segments over maxMergedSegmentMB.
MERGE_CHUNKS_PER_S = 3_000


class SegmentInfo(CamelModel):
    segment_id: int
    chunks: int  # live in the snapshot
    deleted: int


class OptimizeReport(CamelModel):
    collection: str
    snapshot_id: int
    segments_before: int
    segments_after: int
    merges: int
    deleted_purged: int


class MergeReport(CamelModel):
    """What the merges after a build did: how many, the chunks they wrote, in how long, and
    why they stopped early (``stopped``: None when nothing was left to merge)."""

    snapshot_id: int
    merges: int = 0
    chunks_written: int = 0
    seconds: float = 0.0
    stopped: str | None = None


def snapshot_segments(conn: psycopg.Connection, schema: str,
                      snapshot_id: int) -> list[SegmentInfo]:
    rows = conn.execute(sql.SQL(
        "SELECT ss.segment_id, g.n_chunks - cardinality(ss.deleted), cardinality(ss.deleted)"
        " FROM {s}.snapshot_segments ss JOIN {s}.segments g USING (segment_id)"
        " WHERE ss.snapshot_id = %s ORDER BY ss.segment_id").format(s=sql.Identifier(schema)),
        (snapshot_id,)).fetchall()
    return [SegmentInfo(segment_id=r[0], chunks=r[1], deleted=r[2]) for r in rows]


def plan_merges(segments: Sequence[SegmentInfo], *, full: bool = False,
                max_chunks: int | None = None) -> list[list[int]]:
    """Which segments to merge (each inner list into one), smallest merge first, by the tiered
    policy: a tier with MERGE_FACTOR segments or more is merged, and so is a lone segment mostly
    deleted; with ``max_chunks``, only merges that write at most that many chunks. ``full``:
    everything into one segment (unless that is what there is already, with nothing
    deleted)."""
    if full:
        if len(segments) > 1 or any(g.deleted for g in segments):
            return [[g.segment_id for g in segments]]
        return []
    tiers: dict[int, list[SegmentInfo]] = {}
    for g in segments:
        tiers.setdefault(_tier(g.chunks), []).append(g)
    plan: list[list[SegmentInfo]] = []
    for members in tiers.values():
        if len(members) >= MERGE_FACTOR:
            plan.append(members)
        else:
            plan.extend([g] for g in members
                        if g.deleted > MAX_DELETED_SHARE * (g.chunks + g.deleted))
    plan.sort(key=_written)
    return [[g.segment_id for g in group] for group in plan
            if max_chunks is None or _written(group) <= max_chunks]


def _tier(chunks: int) -> int:
    return int(math.log(max(chunks, 1), MERGE_FACTOR))


def _written(group: Sequence[SegmentInfo]) -> int:
    return sum(g.chunks for g in group)


def optimize(conn: psycopg.Connection, collection: str, schema: str, snapshot_id: int, *,
             full: bool = False) -> OptimizeReport:
    """Merge the snapshot's segments (tiered policy; ``full``: into one) in the caller's
    transaction. Only the snapshot's physical layout changes: its chunks, statistics and every
    score stay the same."""
    lock_merges(conn, schema, wait=True)
    _check_ready(conn, collection, schema, snapshot_id)
    before = snapshot_segments(conn, schema, snapshot_id)
    merges = 0
    purged = 0
    while plan := plan_merges(snapshot_segments(conn, schema, snapshot_id), full=full):
        for group in plan:
            purged += merge(conn, schema, snapshot_id, group)
            merges += 1
        if full:
            break
    if merges:
        finish_snapshot(conn, schema, snapshot_id)
    after = snapshot_segments(conn, schema, snapshot_id)
    return OptimizeReport(collection=collection, snapshot_id=snapshot_id,
                          segments_before=len(before), segments_after=len(after),
                          merges=merges, deleted_purged=purged)


def merge_after_build(transaction: Callable[[], AbstractContextManager[psycopg.Connection]],
                      schema: str, snapshot_id: int, *, budget_s: float) -> MergeReport:
    """The tiered policy's merges of a snapshot just built, smallest first, each in its own
    transaction (``transaction()`` opens one), until none is due or ``budget_s`` is spent: a
    merge is started only if its size fits what is left of the budget (MERGE_CHUNKS_PER_S), and
    a statement timeout stops one that overruns it anyway (rolled back: nothing half-written).
    Skipped while another process merges this collection. ``budget_s`` 0: nothing."""
    report = MergeReport(snapshot_id=snapshot_id)
    started = time.monotonic()
    while (left := budget_s - (time.monotonic() - started)) > 0:
        try:
            with transaction() as conn:
                step = _merge_one(conn, schema, snapshot_id, left)
        except psycopg.errors.QueryCanceled:
            step = "a merge ran past the budget and was rolled back"
        if not isinstance(step, int):
            report.stopped = step
            break
        report.merges += 1
        report.chunks_written += step
    else:
        if budget_s > 0:
            with transaction() as conn:
                if plan_merges(snapshot_segments(conn, schema, snapshot_id)):
                    report.stopped = "the budget is spent"
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _merge_one(conn: psycopg.Connection, schema: str, snapshot_id: int,
               left_s: float) -> int | str | None:
    """The smallest due merge that fits ``left_s``, with the statistics after it; returns the
    chunks it wrote, or why it wrote none (None: no merge is due)."""
    if not lock_merges(conn, schema, wait=False):
        return "another process is merging this collection"
    if not _is_ready(conn, schema, snapshot_id):
        return None  # removed by gc since it was built
    segments = snapshot_segments(conn, schema, snapshot_id)
    if not plan_merges(segments):
        return None
    fits = plan_merges(segments, max_chunks=int(left_s * MERGE_CHUNKS_PER_S))
    if not fits:
        return "the next merge is larger than the budget allows (pgcite collection optimize)"
    conn.execute("SELECT set_config('statement_timeout', %s, true)",
                 (str(max(1, int(left_s * 1000))),))
    merge(conn, schema, snapshot_id, fits[0])
    finish_snapshot(conn, schema, snapshot_id)
    return sum(g.chunks for g in segments if g.segment_id in fits[0])


def lock_merges(conn: psycopg.Connection, schema: str, *, wait: bool) -> bool:
    """For the caller's transaction: the collection's merge lock (one merging process at a
    time: two would merge the same segments twice over) and gc's lock, shared with builds (gc
    must not remove a segment while it is merged or made). Without ``wait``, False if another
    process holds the merge lock."""
    key = f"pgcite:merge:{schema}"
    if wait:
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
    else:
        row = conn.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))",
                           (key,)).fetchone()
        if not row or not row[0]:
            return False
    conn.execute("SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))",
                 (f"pgcite:build:{schema}",))
    return True


def _is_ready(conn: psycopg.Connection, schema: str, snapshot_id: int) -> bool:
    row = conn.execute(sql.SQL("SELECT state FROM {s}.snapshots WHERE snapshot_id = %s"
                               " FOR UPDATE").format(s=sql.Identifier(schema)),
                       (snapshot_id,)).fetchone()
    return row is not None and row[0] == "ready"


def _check_ready(conn: psycopg.Connection, collection: str, schema: str,
                 snapshot_id: int) -> None:
    if not _is_ready(conn, schema, snapshot_id):
        raise PgciteError(f"collection {collection!r} has no ready snapshot {snapshot_id}",
                          hint="see `pgcite snapshot list`")


def merge(conn: psycopg.Connection, schema: str, snapshot_id: int, group: list[int]) -> int:
    """Replace these segments of the snapshot by one holding their live versions; returns the
    number of deleted chunks dropped. The caller recomputes the snapshot's statistics."""
    s = sql.Identifier(schema)
    # Live in these segments, by each segment's own deleted versions (a version dropped from one
    # segment may be live in another: re-added after a revert).
    live = [r[0] for r in conn.execute(sql.SQL(
        "SELECT DISTINCT sv.version_pk FROM {s}.segment_versions sv"
        " JOIN {s}.snapshot_segments ss ON ss.segment_id = sv.segment_id AND ss.snapshot_id = %s"
        " WHERE sv.segment_id = ANY(%s) AND NOT sv.version_pk = ANY(ss.deleted_versions)"
        ).format(s=s), (snapshot_id, group))]
    row = conn.execute(sql.SQL(
        "DELETE FROM {s}.snapshot_segments WHERE snapshot_id = %s AND segment_id = ANY(%s)"
        " RETURNING cardinality(deleted)").format(s=s), (snapshot_id, group)).fetchall()
    if live:
        add_segment(conn, schema, snapshot_id, new_segment(conn, schema, live))
    return sum(r[0] for r in row)
