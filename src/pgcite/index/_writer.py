"""The segment writer: a new snapshot's keyword index from the snapshot it replaces, in work
proportional to what changed (docs/snapshots.md, "Segments").

A segment indexes a set of document versions once: per term its postings in impact order, the
block bounds of that list and, for its commonest lists, dense rows (pgcite/index/_layout.py),
all written by one statement. A snapshot shares its base's segments with the versions it drops
(and their chunks) marked deleted, indexes the versions it adds in one new segment, and gets its
statistics from its segments and deleted chunks. BM25 is scored at query time from those
statistics, so a snapshot built this way scores exactly as one built from scratch over the same
chunks, and a merge never changes a score.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from psycopg import sql

from pgcite.index import _bm25
from pgcite.index._layout import (
    BLOCK_POSTINGS,
    DENSE_BLOCK,
    DENSE_MIN_POSTINGS,
    DENSE_RATIO,
    MAX_DENSE_TF,
)


@dataclass(frozen=True)
class MemberDelta:
    """How a new snapshot differs from its base: the versions it adds (the base lacks them) and
    the base's members it drops."""

    added: tuple[int, ...]
    dropped: tuple[int, ...]

    @property
    def changed(self) -> bool:
        return bool(self.added or self.dropped)

    @property
    def digest(self) -> bytes:
        """The delta's identity: with the base, it names the new snapshot's members exactly."""
        text = f"+{','.join(map(str, self.added))}-{','.join(map(str, self.dropped))}"
        return hashlib.sha256(text.encode()).digest()


def is_member(s: sql.Identifier, snapshot: sql.Composable,
              version: sql.Composable) -> sql.Composed:
    """Whether the snapshot holds the version: the snapshot_members view written for one row,
    a lookup through segment_versions' version_pk index. A scalar subquery in a select list, so
    that it runs per row: an EXISTS in a WHERE clause became a join that read every member, and
    one in a select list a hashed subplan that did the same (half a second, then 30 ms, for 100
    versions against 52k members whose statistics were stale; 1 ms as a lookup per version)."""
    return sql.SQL(
        "coalesce((SELECT true FROM {s}.segment_versions sv JOIN {s}.snapshot_segments ss"
        " USING (segment_id) WHERE ss.snapshot_id = {snapshot} AND sv.version_pk = {v}"
        " AND sv.version_pk <> ALL(ss.deleted_versions) LIMIT 1), false)").format(
        s=s, snapshot=snapshot, v=version)


# The versions a new snapshot adds (those of the wanted versions its base lacks) and the base's
# members it drops: those of the documents that change, found through versions' document_id
# index, each checked by one lookup (is_member); never through the member list (at 1M members,
# reading it into Python and comparing took seconds).
_DELTA_SQL = """
WITH wanted AS (
    SELECT DISTINCT unnest(%(pks)s::bigint[]) AS version_pk
)
SELECT true, x.version_pk
FROM (SELECT w.version_pk, {wanted_member} AS member FROM wanted w OFFSET 0) x
WHERE NOT x.member
UNION ALL
SELECT false, x.version_pk
FROM (SELECT v.version_pk, {member} AS member
      FROM (SELECT v.document_id FROM {s}.versions v JOIN wanted USING (version_pk)
            UNION SELECT unnest(%(remove)s::text[])) d
      JOIN {s}.versions v USING (document_id)
      WHERE NOT EXISTS (SELECT 1 FROM wanted w WHERE w.version_pk = v.version_pk)
      OFFSET 0) x
WHERE x.member"""
# Replacing every member: the change is the whole list, compared with the base's in one pass.
_REPLACE_SQL = """
SELECT n.pk IS NOT NULL, coalesce(n.pk, o.version_pk)
FROM unnest(%(pks)s::bigint[]) AS n(pk)
FULL JOIN (SELECT version_pk FROM {s}.snapshot_members WHERE snapshot_id = %(base)s) o
  ON o.version_pk = n.pk
WHERE n.pk IS NULL OR o.version_pk IS NULL"""


def member_delta(conn: psycopg.Connection, schema: str, base_id: int | None,
                 version_pks: Sequence[int], *, remove_documents: Sequence[str] = (),
                 replace_all: bool = False) -> MemberDelta:
    """A new snapshot of ``base_id`` holding ``version_pks`` instead of the base's versions of
    the same documents, and none of the documents ``remove_documents``; with ``replace_all``,
    exactly ``version_pks``. Without a base every version is added."""
    if base_id is None:
        return MemberDelta(added=tuple(sorted(set(version_pks))), dropped=())
    s = sql.Identifier(schema)
    base = sql.Placeholder("base")
    statement = sql.SQL(_REPLACE_SQL).format(s=s) if replace_all else sql.SQL(_DELTA_SQL).format(
        s=s, wanted_member=is_member(s, base, sql.SQL("w.version_pk")),
        member=is_member(s, base, sql.SQL("v.version_pk")))
    rows = conn.execute(statement, {
        "pks": sorted(set(version_pks)), "remove": list(remove_documents),
        "base": base_id}).fetchall()
    return MemberDelta(added=tuple(sorted(pk for new, pk in rows if new)),
                       dropped=tuple(sorted({pk for new, pk in rows if not new})))


def index_snapshot(conn: psycopg.Connection, schema: str, snapshot_id: int,
                   base_id: int | None, delta: MemberDelta,
                   staged_segments: Sequence[int] = ()) -> None:
    """Give a new snapshot its segments and statistics from ``base_id``'s: its segments are
    shared, with the versions it drops (and their chunks) marked deleted, and the versions it
    adds go into one new segment. ``staged_segments``: segments staging workers wrote already;
    those of the added versions they index are taken over as they are, and only the rest is
    indexed anew."""
    s = sql.Identifier(schema)
    added = list(delta.added)
    if base_id is not None:
        conn.execute(_INHERIT_SQL.format(s=s), {"sid": snapshot_id, "base": base_id,
                                                "dropped": list(delta.dropped)})
    if added and staged_segments:
        adopted = conn.execute(_ADOPT_SQL.format(s=s), {
            "sid": snapshot_id, "segs": sorted(set(staged_segments)), "added": added}).fetchall()
        covered = {pk for (pks,) in adopted for pk in pks}
        added = [pk for pk in added if pk not in covered]
    if added:
        add_segment(conn, schema, snapshot_id, new_segment(conn, schema, added))
    conn.execute(_DROP_DEAD_SQL.format(s=s), {"sid": snapshot_id})
    finish_snapshot(conn, schema, snapshot_id)


def add_segment(conn: psycopg.Connection, schema: str, snapshot_id: int, segment_id: int) -> None:
    """The snapshot holds every chunk of this segment."""
    conn.execute(sql.SQL("INSERT INTO {s}.snapshot_segments (snapshot_id, segment_id)"
                         " VALUES (%s, %s)").format(s=sql.Identifier(schema)),
                 (snapshot_id, segment_id))


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
# search then read its deleted chunks and versions (docs/snapshots.md: Pepys, re-ingested
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


def new_segment(conn: psycopg.Connection, schema: str, version_pks: Sequence[int]) -> int:
    """Index these versions as a new segment (postings, block bounds, dense rows); returns its
    id. No snapshot holds it yet."""
    s = sql.Identifier(schema)
    row = conn.execute(sql.SQL("INSERT INTO {s}.segments DEFAULT VALUES RETURNING segment_id")
                       .format(s=s)).fetchone()
    assert row is not None
    segment_id = int(row[0])
    conn.execute(sql.SQL("INSERT INTO {s}.segment_versions (segment_id, version_pk)"
                         " SELECT %s, unnest(%s::bigint[])").format(s=s),
                 (segment_id, sorted(set(version_pks))))
    conn.execute(segment_sql(s), {"segment": segment_id, "k1": _bm25.K1, "b": _bm25.B})
    return segment_id


def segment_sql(s: sql.Identifier) -> sql.Composed:
    """The statement that indexes a segment whose segment_versions are written: the segment's
    counts, and per term its postings in impact order (each chunk's weight with the segment's
    own average length and no idf, highest first: term_depth takes a prefix), the list's block
    bounds and, for a common list, its dense rows. Term frequencies and lengths come from the
    same tsvector the GIN index uses: exactly PostgreSQL's analyser for the language."""
    impact = _bm25.weight(
        sql.Literal(1), sql.SQL("tf.tf"), sql.SQL("dl.dl"),
        base=_bm25.norm_base(sql.Placeholder("k1"), sql.Placeholder("b")),
        slope=_bm25.norm_slope(sql.Placeholder("k1"), sql.Placeholder("b"), sql.SQL("st.avgdl")))
    return sql.SQL(_SEGMENT).format(
        s=s, impact=impact, blocks=_blocks_select(),
        dense=dense_select(s, sql.SQL("lists p"), sql.SQL("cardinality(p.chunk_pks)"),
                           sql.SQL("true"), min_postings=DENSE_MIN_POSTINGS, ratio=DENSE_RATIO))


_SEGMENT = """
WITH members AS (
    SELECT c.chunk_pk, c.tsv, c.metadata FROM {s}.chunks c
    JOIN {s}.segment_versions v USING (version_pk) WHERE v.segment_id = %(segment)s
), tf AS (
    SELECT m.chunk_pk, t.lexeme AS term, cardinality(t.positions) AS tf
    FROM members m, unnest(m.tsv) AS t
), dl AS (
    SELECT chunk_pk, sum(tf)::integer AS dl FROM tf GROUP BY chunk_pk
), stats AS (
    SELECT (SELECT count(*) FROM members) AS n, count(*) AS nonempty,
           coalesce(sum(dl), 0) AS total, coalesce(avg(dl), 1)::float8 AS avgdl FROM dl
), fields AS (
    SELECT coalesce(jsonb_object_agg(key, types), '{{}}'::jsonb) AS f FROM (
        SELECT key, jsonb_object_agg(typ, n) AS types FROM (
            SELECT e.key, jsonb_typeof(e.value) AS typ, count(*) AS n
            FROM members, jsonb_each(members.metadata) AS e GROUP BY 1, 2) kt
        GROUP BY key) k
), counted AS (
    UPDATE {s}.segments s SET n_chunks = st.n, n_nonempty = st.nonempty,
           total_length = st.total, metadata_counts = (SELECT f FROM fields),
           n_documents = (SELECT count(*) FROM {s}.segment_versions sv
                          JOIN {s}.versions v USING (version_pk)
                          WHERE sv.segment_id = %(segment)s AND v.n_chunks > 0)
    FROM stats st WHERE s.segment_id = %(segment)s
), lists AS (
    SELECT %(segment)s::integer AS segment_id, term,
           array_agg(chunk_pk ORDER BY impact DESC, chunk_pk) AS chunk_pks,
           array_agg(tf ORDER BY impact DESC, chunk_pk) AS tfs,
           array_agg(dl ORDER BY impact DESC, chunk_pk) AS lengths
    FROM (SELECT tf.term, tf.chunk_pk, tf.tf, dl.dl, {impact} AS impact
          FROM tf JOIN dl USING (chunk_pk) CROSS JOIN stats st) w
    GROUP BY term
), postings AS (
    INSERT INTO {s}.segment_postings (segment_id, term, chunk_pks, tfs, lengths)
    SELECT segment_id, term, chunk_pks, tfs, lengths FROM lists
), blocks AS (
    INSERT INTO {s}.segment_blocks
        (segment_id, term, postings, block_size, max_tfs, min_lengths)
    {blocks}
)
INSERT INTO {s}.segment_dense (segment_id, term, block, tfs)
{dense}"""


def _blocks_select() -> sql.Composed:
    """Each list's block bounds: per BLOCK_POSTINGS postings, the largest tf and smallest
    length, in list order."""
    return sql.SQL("""SELECT n.segment_id, n.term, cardinality(n.chunk_pks), {size}, b.max_tfs,
           b.min_lengths
    FROM lists n CROSS JOIN LATERAL (
        SELECT array_agg(x.mt ORDER BY x.blk) AS max_tfs,
               array_agg(x.ml ORDER BY x.blk) AS min_lengths
        FROM (SELECT (u.o - 1) / {size} AS blk, max(u.tf) AS mt, min(u.len) AS ml
              FROM unnest(n.tfs, n.lengths) WITH ORDINALITY AS u(tf, len, o)
              GROUP BY 1) x) b""").format(size=sql.Literal(BLOCK_POSTINGS))


def dense_select(s: sql.Identifier, lists: sql.Composable, postings: sql.Composable,
                 where: sql.Composable, *, min_postings: int, ratio: int) -> sql.Composed:
    """The dense rows of the lists ``lists`` (a FROM item ``p`` with segment_id, term,
    chunk_pks and tfs) of at least ``min_postings`` postings (their length: ``postings``) that
    hold at least 1/``ratio`` of the chunk_pks of the blocks they touch, and no tf above a
    byte's range. A list made dense already is left as it is."""
    return sql.SQL("""SELECT p.segment_id, p.term, x.block,
       -- each posting's byte after the zeros of the gap before it, then the zeros after the
       -- last (a row per posting, not per byte: 12.7 s -> 9.6 s for the 44 dense lists of 1M)
       (SELECT decode(string_agg(repeat('00', y.o - coalesce(y.prev, -1) - 1)
                                 || lpad(to_hex(y.tf), 2, '0'), '' ORDER BY y.o)
                      || repeat('00', {last} - max(y.o)), 'hex')
        FROM (SELECT u.o, u.tf, lag(u.o) OVER (ORDER BY u.o) AS prev
              FROM unnest(x.offsets, x.tfs) AS u(o, tf)) y)
FROM {lists} CROSS JOIN LATERAL (
    SELECT u.pk / {width} AS block, array_agg(mod(u.pk, {width})::integer) AS offsets,
           array_agg(u.tf) AS tfs
    FROM unnest(p.chunk_pks, p.tfs) AS u(pk, tf) GROUP BY 1) x
WHERE {where} AND {postings} >= {min_postings}
  AND (SELECT max(t) FROM unnest(p.tfs) AS t) <= {max_tf}
  AND {postings}::bigint * {ratio}
      >= {width} * (SELECT count(DISTINCT pk / {width}) FROM unnest(p.chunk_pks) AS pk)
  AND NOT EXISTS (SELECT 1 FROM {s}.segment_dense d
                  WHERE d.segment_id = p.segment_id AND d.term = p.term)""").format(
        s=s, lists=lists, postings=postings, where=where, width=sql.Literal(DENSE_BLOCK),
        last=sql.Literal(DENSE_BLOCK - 1), max_tf=sql.Literal(MAX_DENSE_TF),
        min_postings=sql.Literal(min_postings), ratio=sql.Literal(ratio))


def densify(conn: psycopg.Connection, schema: str, segment_id: int, *,
            min_postings: int = DENSE_MIN_POSTINGS, ratio: int = DENSE_RATIO) -> None:
    """Give an existing segment's lists their dense rows by other thresholds than the writer's
    (tests make every list of a tiny corpus dense with ``(1, DENSE_BLOCK)``). The list's
    length comes from its block bounds, which spares expanding every short list's arrays."""
    s = sql.Identifier(schema)
    conn.execute(sql.SQL("INSERT INTO {s}.segment_dense (segment_id, term, block, tfs) ").format(
        s=s) + dense_select(
        s, sql.SQL("{s}.segment_postings p JOIN {s}.segment_blocks b USING (segment_id, term)")
        .format(s=s), sql.SQL("b.postings"), sql.SQL("p.segment_id = %(segment)s"),
        min_postings=min_postings, ratio=ratio), {"segment": segment_id})


def finish_snapshot(conn: psycopg.Connection, schema: str, snapshot_id: int) -> None:
    """A snapshot's statistics from its segments and deleted chunks (snapshot_segments written
    first), in work proportional to its segments and deleted chunks, never to the collection;
    marks it ready. Run again after a merge, it gives the same numbers."""
    s = sql.Identifier(schema)
    conn.execute(sql.SQL("DELETE FROM {s}.snapshot_deleted_df WHERE snapshot_id = %s").format(
        s=s), (snapshot_id,))
    conn.execute(_DELETED_DF_SQL.format(s=s), {"sid": snapshot_id})
    conn.execute(_STATISTICS_SQL.format(s=s), {"sid": snapshot_id})


# The document frequencies among the snapshot's deleted chunks: a term's df in the snapshot is
# its lists' lengths over the snapshot's segments minus this.
_DELETED_DF_SQL = sql.SQL("""
WITH dead AS (
    SELECT c.chunk_pk, c.tsv FROM {s}.snapshot_segments ss, unnest(ss.deleted) AS d(pk)
    JOIN {s}.chunks c ON c.chunk_pk = d.pk WHERE ss.snapshot_id = %(sid)s
)
INSERT INTO {s}.snapshot_deleted_df (snapshot_id, term, df)
SELECT %(sid)s, t.lexeme, count(*) FROM dead, unnest(dead.tsv) AS t GROUP BY t.lexeme
""")

# N, the average length (over chunks with at least one lexeme), the documents (one version of
# each: a segment counts its versions with chunks) and the metadata fields with their JSON
# types: the segments' counts minus those of the deleted chunks and versions.
_STATISTICS_SQL = sql.SQL("""
WITH segs AS (
    SELECT g.* FROM {s}.snapshot_segments ss JOIN {s}.segments g USING (segment_id)
    WHERE ss.snapshot_id = %(sid)s
), dead AS (
    SELECT c.chunk_pk, c.metadata,
           (SELECT coalesce(sum(cardinality(t.positions)), 0) FROM unnest(c.tsv) AS t) AS dl
    FROM {s}.snapshot_segments ss, unnest(ss.deleted) AS d(pk)
    JOIN {s}.chunks c ON c.chunk_pk = d.pk WHERE ss.snapshot_id = %(sid)s
), dead_documents AS (
    SELECT count(*) AS n FROM {s}.snapshot_segments ss, unnest(ss.deleted_versions) AS d(pk)
    JOIN {s}.versions v ON v.version_pk = d.pk
    WHERE ss.snapshot_id = %(sid)s AND v.n_chunks > 0
), totals AS (
    SELECT (SELECT coalesce(sum(n_chunks), 0) FROM segs) - (SELECT count(*) FROM dead) AS n,
           (SELECT coalesce(sum(n_nonempty), 0) FROM segs)
               - (SELECT count(*) FROM dead WHERE dl > 0) AS nonempty,
           (SELECT coalesce(sum(total_length), 0) FROM segs)
               - (SELECT coalesce(sum(dl), 0) FROM dead) AS total,
           (SELECT coalesce(sum(n_documents), 0) FROM segs)
               - (SELECT n FROM dead_documents) AS documents
), field_counts AS (
    SELECT key, typ, sum(n) AS n FROM (
        SELECT k.key, t.key AS typ, t.value::bigint AS n
        FROM segs, jsonb_each(segs.metadata_counts) AS k, jsonb_each_text(k.value) AS t
        UNION ALL
        SELECT e.key, jsonb_typeof(e.value), -count(*)
        FROM dead, jsonb_each(dead.metadata) AS e GROUP BY 1, 2) x
    GROUP BY key, typ HAVING sum(n) > 0
), fields AS (
    SELECT coalesce(jsonb_object_agg(key, types), '{{}}'::jsonb) AS f FROM (
        SELECT key, jsonb_agg(to_jsonb(typ) ORDER BY typ) AS types FROM field_counts
        GROUP BY key) k
)
UPDATE {s}.snapshots SET
    state = 'ready',
    finalized_at = coalesce(finalized_at, now()),
    n_documents = (SELECT documents FROM totals),
    n_chunks = (SELECT n FROM totals),
    avg_length = (SELECT CASE WHEN nonempty > 0 THEN total::float8 / nonempty ELSE 1 END
                  FROM totals),
    metadata_fields = (SELECT f FROM fields)
WHERE snapshot_id = %(sid)s
""")
