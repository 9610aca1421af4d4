"""The BM25 index as segments (docs/snapshots.md): a snapshot's keyword index is built from the
snapshot it replaces, in work proportional to what changed, and merged on demand.

A segment indexes a set of document versions once (raw term frequencies and chunk lengths); a
snapshot is a set of segments, each with the chunks it no longer holds, and its own statistics
(SQL functions ``index_segment`` and ``finish_snapshot`` of migration 0004). BM25 is scored at
query time from those statistics, so a snapshot built incrementally scores exactly as one built
from scratch over the same chunks, and a merge never changes a score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import psycopg
from psycopg import sql

from pgcite._camel import CamelModel
from pgcite._errors import PgciteError
from pgcite.store._collections import CollectionInfo

BM25_K1 = 1.2
BM25_B = 0.75

# Tiered merging: segments whose live sizes are within one factor of MERGE_FACTOR of each other
# share a tier; a tier that holds MERGE_FACTOR of them is merged into one (a level up). So a
# snapshot of N chunks has at most (MERGE_FACTOR - 1) segments per tier, log(N) tiers.
MERGE_FACTOR = 10
# A segment whose deleted share passes this is rewritten on its own (its dead postings purged).
MAX_DELETED_SHARE = 0.3


def member_delta(conn: psycopg.Connection, info: CollectionInfo, base_id: int | None,
                 version_pks: Sequence[int]) -> tuple[list[int], list[int]]:
    """(added, dropped): the versions of ``version_pks`` that ``base_id``'s members lack, and
    the members it lacks (every version is added without a base). One pass over both sets: at
    1M members each set difference costs about a second, and a build used to take it five
    times over (10.8 s to add 100 documents)."""
    if base_id is None:
        return sorted(set(version_pks)), []
    rows = conn.execute(sql.SQL(
        "SELECT n.pk, o.version_pk FROM unnest(%(pks)s::bigint[]) AS n(pk)"
        " FULL JOIN (SELECT version_pk FROM {s}.snapshot_members WHERE snapshot_id = %(base)s) o"
        " ON o.version_pk = n.pk WHERE n.pk IS NULL OR o.version_pk IS NULL").format(
        s=info.schema_id), {"pks": list(version_pks), "base": base_id}).fetchall()
    added = sorted({new for new, old in rows if old is None})
    dropped = sorted({old for new, old in rows if new is None})
    return added, dropped


def index_snapshot(conn: psycopg.Connection, info: CollectionInfo, snapshot_id: int,
                   base_id: int | None, added: Sequence[int], dropped: Sequence[int] = (),
                   staged_segments: Sequence[int] = ()) -> None:
    """Give a new snapshot its segments and statistics from ``base_id``'s (:func:`member_delta`
    gives ``added`` and ``dropped``): its segments are shared, with the versions it drops (and
    their chunks) marked deleted, and the versions it adds go into one new segment.
    ``staged_segments``: segments staging workers wrote already (store._staged); those of the
    added versions they index are taken over as they are, and only the rest is indexed anew."""
    s = info.schema_id
    added = list(added)
    if base_id is not None:
        conn.execute(_INHERIT_SQL.format(s=s), {"sid": snapshot_id, "base": base_id,
                                                "dropped": list(dropped)})
    if added and staged_segments:
        adopted = conn.execute(_ADOPT_SQL.format(s=s), {
            "sid": snapshot_id, "segs": sorted(set(staged_segments)), "added": added}).fetchall()
        covered = {pk for (pks,) in adopted for pk in pks}
        added = [pk for pk in added if pk not in covered]
    if added:
        segment_id = new_segment(conn, info, added)
        conn.execute(sql.SQL("INSERT INTO {s}.snapshot_segments (snapshot_id, segment_id)"
                             " VALUES (%s, %s)").format(s=s), (snapshot_id, segment_id))
    conn.execute(_DROP_DEAD_SQL.format(s=s), {"sid": snapshot_id})
    conn.execute(sql.SQL("SELECT {s}.finish_snapshot(%s)").format(s=s), (snapshot_id,))


# The base's segments, each with its deleted chunks and versions plus those of the base's
# versions that the new snapshot does not keep (in whichever of the base's segments hold them).
# Rows written: one per segment, whatever the collection's size.
_INHERIT_SQL = sql.SQL("""
WITH dropped AS (
    SELECT unnest(%(dropped)s::bigint[]) AS version_pk
), hit AS (
    SELECT sv.segment_id, array_agg(sv.version_pk) AS pks
    FROM dropped JOIN {s}.segment_versions sv USING (version_pk)
    GROUP BY sv.segment_id
), dead AS (
    SELECT sv.segment_id, array_agg(c.chunk_pk) AS pks
    FROM dropped JOIN {s}.segment_versions sv USING (version_pk)
    JOIN {s}.chunks c USING (version_pk)
    GROUP BY sv.segment_id
)
INSERT INTO {s}.snapshot_segments (snapshot_id, segment_id, deleted, deleted_versions)
SELECT %(sid)s, ss.segment_id,
       CASE WHEN d.pks IS NULL THEN ss.deleted
            ELSE ARRAY(SELECT DISTINCT x FROM unnest(ss.deleted || d.pks) AS x ORDER BY x) END,
       CASE WHEN h.pks IS NULL THEN ss.deleted_versions
            ELSE ARRAY(SELECT DISTINCT x FROM unnest(ss.deleted_versions || h.pks) AS x
                       ORDER BY x) END
FROM {s}.snapshot_segments ss LEFT JOIN dead d USING (segment_id)
LEFT JOIN hit h USING (segment_id)
WHERE ss.snapshot_id = %(base)s
""")


# A segment the new snapshot deletes every version of is left out of it, as Lucene drops a fully
# deleted segment: a re-ingest that replaced every document of a segment had kept it, and every
# search then read its deleted chunks and versions (bench/snapshot_switch.py's Pepys, re-ingested
# from another file, so every version new: 8,178 deleted chunks, 3,365 deleted versions; hybrid
# top-10, 120 searches one at a time: database 29.4 ms a search with the segment, 12.8 without).
# Scores do not change (finish_snapshot derives the statistics from the segments that remain).
# deleted_versions holds distinct versions of its segment, so equal counts mean all of them.
# Only a segment whose every chunk is deleted has its versions counted (a segment's row knows
# its chunks): a build that replaces a few documents of a 1M-version segment counts nothing.
_DROP_DEAD_SQL = sql.SQL("""
DELETE FROM {s}.snapshot_segments ss USING {s}.segments g
WHERE ss.snapshot_id = %(sid)s AND g.segment_id = ss.segment_id
  AND cardinality(ss.deleted_versions) > 0 AND cardinality(ss.deleted) = g.n_chunks
  AND cardinality(ss.deleted_versions) = (SELECT count(*) FROM {s}.segment_versions sv
                                          WHERE sv.segment_id = ss.segment_id)
""")


# Staged segments of the new snapshot: each added version is live in exactly one of them (the
# lowest-numbered that indexes it: two workers may have stored the same version at once), and a
# segment's other versions (superseded by a later-staged version of their document, or live
# elsewhere) are deleted in it, chunks and all, as a base segment's dropped versions are. A
# segment with no live version is left out. Returns each adopted segment's live versions.
_ADOPT_SQL = sql.SQL("""
WITH cand AS (
    SELECT sv.segment_id, sv.version_pk FROM {s}.segment_versions sv
    WHERE sv.segment_id = ANY(%(segs)s::integer[]) AND NOT EXISTS (
        SELECT 1 FROM {s}.snapshot_segments ss  -- one the base holds already stays as it is
        WHERE ss.snapshot_id = %(sid)s AND ss.segment_id = sv.segment_id)
), owner AS (
    SELECT version_pk, min(segment_id) AS segment_id FROM cand
    WHERE version_pk = ANY(%(added)s::bigint[]) GROUP BY version_pk
), dead AS (
    SELECT c.segment_id, c.version_pk FROM cand c
    WHERE NOT EXISTS (SELECT 1 FROM owner o
                      WHERE o.version_pk = c.version_pk AND o.segment_id = c.segment_id)
)
INSERT INTO {s}.snapshot_segments AS t (snapshot_id, segment_id, deleted, deleted_versions)
SELECT %(sid)s, g.segment_id,
       ARRAY(SELECT ch.chunk_pk FROM dead d JOIN {s}.chunks ch USING (version_pk)
             WHERE d.segment_id = g.segment_id ORDER BY ch.chunk_pk),
       ARRAY(SELECT d.version_pk FROM dead d WHERE d.segment_id = g.segment_id
             ORDER BY d.version_pk)
FROM (SELECT DISTINCT segment_id FROM owner) g
RETURNING (SELECT array_agg(o.version_pk) FROM owner o WHERE o.segment_id = t.segment_id)
""")


def new_segment(conn: psycopg.Connection, info: CollectionInfo, version_pks: Sequence[int]) -> int:
    """Index these versions as a new segment; returns its id."""
    s = info.schema_id
    row = conn.execute(sql.SQL("INSERT INTO {s}.segments DEFAULT VALUES RETURNING segment_id")
                       .format(s=s)).fetchone()
    assert row is not None
    segment_id = int(row[0])
    conn.execute(sql.SQL("INSERT INTO {s}.segment_versions (segment_id, version_pk)"
                         " SELECT %s, unnest(%s::bigint[])").format(s=s),
                 (segment_id, sorted(set(version_pks))))
    conn.execute(sql.SQL("SELECT {s}.index_segment(%s, %s, %s)").format(s=s),
                 (segment_id, BM25_K1, BM25_B))
    return segment_id


class SegmentInfo(CamelModel):
    segment_id: int
    chunks: int  # live in the snapshot
    deleted: int


def snapshot_segments(conn: psycopg.Connection, info: CollectionInfo,
                      snapshot_id: int) -> list[SegmentInfo]:
    rows = conn.execute(sql.SQL(
        "SELECT ss.segment_id, g.n_chunks - cardinality(ss.deleted), cardinality(ss.deleted)"
        " FROM {s}.snapshot_segments ss JOIN {s}.segments g USING (segment_id)"
        " WHERE ss.snapshot_id = %s ORDER BY ss.segment_id").format(s=info.schema_id),
        (snapshot_id,)).fetchall()
    return [SegmentInfo(segment_id=r[0], chunks=r[1], deleted=r[2]) for r in rows]


def plan_merges(segments: Sequence[SegmentInfo], *, full: bool = False) -> list[list[int]]:
    """Which segments to merge (each inner list into one), by the tiered policy: a tier with
    MERGE_FACTOR segments or more is merged, and so is a lone segment mostly deleted. ``full``:
    everything into one segment (unless that is what there is already, with nothing deleted)."""
    if full:
        if len(segments) > 1 or any(g.deleted for g in segments):
            return [[g.segment_id for g in segments]]
        return []
    tiers: dict[int, list[SegmentInfo]] = {}
    for g in segments:
        tiers.setdefault(_tier(g.chunks), []).append(g)
    plan: list[list[int]] = []
    for members in tiers.values():
        if len(members) >= MERGE_FACTOR:
            plan.append([g.segment_id for g in members])
        else:
            plan.extend([g.segment_id] for g in members
                        if g.deleted > MAX_DELETED_SHARE * (g.chunks + g.deleted))
    return plan


def _tier(chunks: int) -> int:
    return int(math.log(max(chunks, 1), MERGE_FACTOR))


class OptimizeReport(CamelModel):
    collection: str
    snapshot_id: int
    segments_before: int
    segments_after: int
    merges: int
    deleted_purged: int


def optimize(conn: psycopg.Connection, info: CollectionInfo, snapshot_id: int, *,
             full: bool = False) -> OptimizeReport:
    """Merge the snapshot's segments (tiered policy; ``full``: into one) in the caller's
    transaction. Only the snapshot's physical layout changes: its chunks, statistics and every
    score stay the same. Other snapshots keep the segments they had (gc frees them later)."""
    s = info.schema_id
    conn.execute("SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))",
                 (f"pgcite:build:{info.schema_name}",))  # gc's lock (store._snapshots)
    row = conn.execute(sql.SQL("SELECT state FROM {s}.snapshots WHERE snapshot_id = %s"
                               " FOR UPDATE").format(s=s), (snapshot_id,)).fetchone()
    if row is None or row[0] != "ready":
        raise PgciteError(f"collection {info.name!r} has no ready snapshot {snapshot_id}",
                          hint="see `pgcite snapshot list`")
    before = snapshot_segments(conn, info, snapshot_id)
    merges = 0
    purged = 0
    while plan := plan_merges(snapshot_segments(conn, info, snapshot_id), full=full):
        for group in plan:
            purged += _merge(conn, info, snapshot_id, group)
            merges += 1
        if full:
            break
    if merges:
        conn.execute(sql.SQL("SELECT {s}.finish_snapshot(%s)").format(s=s), (snapshot_id,))
    after = snapshot_segments(conn, info, snapshot_id)
    return OptimizeReport(collection=info.name, snapshot_id=snapshot_id,
                          segments_before=len(before), segments_after=len(after),
                          merges=merges, deleted_purged=purged)


def _merge(conn: psycopg.Connection, info: CollectionInfo, snapshot_id: int,
           group: list[int]) -> int:
    """Replace these segments of the snapshot by one holding their live versions; returns the
    number of deleted chunks dropped."""
    s = info.schema_id
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
        segment_id = new_segment(conn, info, live)
        conn.execute(sql.SQL("INSERT INTO {s}.snapshot_segments (snapshot_id, segment_id)"
                             " VALUES (%s, %s)").format(s=s), (snapshot_id, segment_id))
    return sum(r[0] for r in row)
