"""Staged ingest: many workers store versions, one build makes one snapshot (docs/snapshots.md,
"Parallel ingest").

A staging worker commits, batch by batch, its versions, chunks, vectors and one segment with
their postings, and records them in ``staged`` (migration 0008). No snapshot holds them, so
search never sees them, and the only locks a worker takes are row locks on what it writes and
gc's shared advisory lock: workers never wait for each other. The build takes every staged row
in one transaction and makes ONE snapshot: the active one plus, per document, its last-staged
version, through :func:`build_snapshot` (same identity rule, same BM25 statistics), taking the
workers' segments over instead of indexing their versions again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import psycopg
from psycopg import sql
from pydantic import BaseModel

from pgcite._errors import PgciteError
from pgcite.embed._base import EmbedderSpec
from pgcite.index import MergeReport, is_member, new_segment
from pgcite.store._collections import CollectionInfo
from pgcite.store._entities import derive_initial_aliases
from pgcite.store._snapshots import (
    activate_snapshot,
    active_snapshot,
    build_snapshot,
    list_snapshots,
    lock_activations,
    lock_versions,
    plan_snapshot,
)


class StagedSummary(BaseModel):
    """What is staged now, waiting for a build."""

    collection: str
    versions: int
    documents: int
    chunks: int
    segments: int


class StagedBuild(BaseModel):
    """The outcome of building the staged versions into one snapshot."""

    collection: str
    staged: int = 0  # staged versions this build took
    documents: int = 0  # distinct documents among them
    superseded: int = 0  # of them, replaced by a later-staged version of their document
    unchanged: int = 0  # of the winners, already live in the base snapshot
    segments: int = 0  # workers' segments the snapshot took over
    snapshot_id: int | None = None  # None: nothing changed, no new snapshot
    base_snapshot_id: int | None = None
    activated: bool = False
    gate: str | None = None  # the activation gate's outcome, when the collection has one
    merged: MergeReport | None = None  # the keyword index's merges after the build
    seconds: float = 0.0


def stage_versions(conn: psycopg.Connection, info: CollectionInfo, versions: Mapping[str, int],
                   *, written: Sequence[int]) -> int | None:
    """In a worker's transaction: stage ``versions`` (document_id -> version_pk) for the next
    build. ``written``: the versions this transaction stored; those no segment indexes yet go
    into one new segment (a concurrent worker that stored the same version first indexed it).
    Returns that segment's id, if any."""
    s = info.schema_id
    pks = sorted(set(versions.values()))
    lock_versions(conn, info, pks)  # gc waits; reused versions must still exist
    mine = [r[0] for r in conn.execute(sql.SQL(
        "SELECT pk FROM unnest(%s::bigint[]) AS x(pk) WHERE NOT EXISTS"
        " (SELECT 1 FROM {s}.segment_versions sv WHERE sv.version_pk = x.pk) ORDER BY pk"
    ).format(s=s), (sorted(set(written)),))]
    segment_id = new_segment(conn, info.schema_name, mine) if mine else None
    docs = sorted(versions.items(), key=lambda item: item[1])  # rows locked in version order
    # Staged again (a re-run): a new number, so it wins over versions staged before it.
    conn.execute(sql.SQL(
        "INSERT INTO {s}.staged AS st (version_pk, document_id, segment_id)"
        " SELECT x.pk, x.doc, CASE WHEN x.pk = ANY(%s::bigint[]) THEN %s::integer END"
        " FROM unnest(%s::bigint[], %s::text[]) WITH ORDINALITY AS x(pk, doc, n) ORDER BY x.n"
        " ON CONFLICT (version_pk) DO UPDATE SET seq = DEFAULT, staged_at = now(),"
        " segment_id = coalesce(EXCLUDED.segment_id, st.segment_id)").format(s=s),
        (mine, segment_id, [pk for _, pk in docs], [doc for doc, _ in docs]))
    return segment_id


def staged_summary(conn: psycopg.Connection, info: CollectionInfo) -> StagedSummary:
    row = conn.execute(sql.SQL(
        "SELECT count(*), count(DISTINCT st.document_id), coalesce(sum(v.n_chunks), 0),"
        " count(DISTINCT st.segment_id) FROM {s}.staged st JOIN {s}.versions v USING (version_pk)"
    ).format(s=info.schema_id)).fetchone()
    assert row is not None
    return StagedSummary(collection=info.name, versions=row[0], documents=row[1],
                         chunks=row[2], segments=row[3])


def _take_staged(conn: psycopg.Connection,
                 info: CollectionInfo) -> list[tuple[int, int, str, int | None]]:
    """Every staged row committed so far, removed in the caller's transaction (rows workers
    commit meanwhile stay for the next build). Locked in version order, as workers lock them."""
    s = info.schema_id
    rows = conn.execute(sql.SQL(
        "SELECT seq, version_pk, document_id, segment_id FROM {s}.staged"
        " ORDER BY version_pk FOR UPDATE").format(s=s)).fetchall()
    conn.execute(sql.SQL("DELETE FROM {s}.staged WHERE version_pk = ANY(%s)").format(s=s),
                 ([r[1] for r in rows],))
    return [(int(a), int(b), str(c), d) for a, b, c, d in rows]


def build_staged(conn: psycopg.Connection, info: CollectionInfo, *, spec: EmbedderSpec,
                 activate: bool, corpus_version: str | None = None) -> StagedBuild:
    """In one transaction: one snapshot of the active snapshot plus every staged version (per
    document the last staged), activated with ``activate``. Staging the same content again and
    building gives the same snapshot back (``build_snapshot``'s identity rule); if it is what is
    live already, no snapshot is made. Nothing staged is an error."""
    lock_activations(conn, info)  # one build at a time, each on what is active when it commits
    rows = _take_staged(conn, info)
    if not rows:
        newest = max((snap.snapshot_id for snap in list_snapshots(conn, info)), default=None)
        raise PgciteError(
            f"nothing is staged in {info.name!r}",
            hint=(f"stage documents first: pgcite ingest {info.name} PATH --stage-only"
                  + (f" (the newest snapshot is {newest})" if newest is not None else "")))
    lock_versions(conn, info, [r[1] for r in rows])
    latest: dict[str, tuple[int, int, int | None]] = {}
    for seq, pk, doc, segment in rows:
        if doc not in latest or seq > latest[doc][0]:
            latest[doc] = (seq, pk, segment)
    current = active_snapshot(conn, info)
    content_id = None if current is None else current.snapshot_id
    plan = plan_snapshot(conn, info, [pk for _, pk, _ in latest.values()], spec=spec,
                         content_id=content_id)
    report = StagedBuild(
        collection=info.name, staged=len(rows), documents=len(latest),
        superseded=len(rows) - len(latest),
        unchanged=0 if current is None else _members_of(conn, info, current.snapshot_id,
                                                        [pk for _, pk, _ in latest.values()]),
        base_snapshot_id=content_id)
    if plan.unchanged:
        return report  # everything staged is live already: no new snapshot
    segments = sorted({seg for _, _, seg in latest.values() if seg is not None})
    report.snapshot_id = build_snapshot(
        conn, info, plan, spec=spec, corpus_version=corpus_version,
        note=f"build of {len(rows)} staged versions", segments=segments)
    report.segments = len(segments)
    derive_initial_aliases(conn, info)  # workers leave it to the build (it reads every name)
    if activate:
        activate_snapshot(conn, info, report.snapshot_id, spec=spec)
        report.activated = True
    return report


def _members_of(conn: psycopg.Connection, info: CollectionInfo, snapshot_id: int,
                version_pks: Sequence[int]) -> int:
    """How many of these versions the snapshot holds (one lookup each)."""
    row = conn.execute(sql.SQL(
        "SELECT count(*) FILTER (WHERE {member}) FROM unnest(%(pks)s::bigint[]) AS x(pk)").format(
        member=is_member(info.schema_id, sql.Placeholder("sid"), sql.SQL("x.pk"))),
        {"pks": sorted(set(version_pks)), "sid": snapshot_id}).fetchone()
    return int(row[0]) if row else 0
