"""Immutable snapshots: a set of document versions, embedded with one model, with frozen BM25
statistics. Queries see exactly one snapshot (the active one); activation is one UPDATE.

Lifecycle (docs/snapshots.md): build (inactive) → evaluate → activate through the gate →
rollback → garbage-collect. A snapshot is identified by its content: building the same versions
with the same model again returns the existing snapshot, so a resumed build is idempotent.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict

from pgcite._errors import PgciteError
from pgcite._types import ChunkDraft
from pgcite.embed._base import EmbedderSpec, Vectors
from pgcite.index import K1, B, MemberDelta, index_snapshot, member_delta
from pgcite.store._collections import (
    CollectionInfo,
    get_collection,
    set_embedder,
    vector_index_name,
)

_CHUNK_COLUMNS = (
    "version_pk", "id", "document_id", "ordinal", "corpus", "date_start", "date_end", "author",
    "source", "locator", "citation", "title", "body", "metadata", "embedding", "embed_model",
    "corpus_version", "content_hash", "context",
)


class SnapshotInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    snapshot_id: int
    state: str
    embed_model: str
    embed_dim: int
    ts_config: str
    corpus_version: str | None
    created_at: dt.datetime
    n_documents: int | None
    n_chunks: int | None
    metadata_fields: dict[str, list[str]] | None
    evaluation: dict[str, Any] | None
    note: str | None
    active: bool = False
    # The index's shape, which the keyword leg's statement is built for (pgcite.index.KeywordLeg):
    # the chunks its segments indexed, deleted ones included (no list of the snapshot holds more
    # postings), and the chunks it deleted from them. A merge only lowers both, so a copy read
    # before one stays a safe bound. None where unknown.
    segment_chunks: int | None = None
    deleted_chunks: int | None = None


_SNAPSHOT_SELECT = (
    "SELECT s.snapshot_id, s.state, s.embed_model, s.embed_dim, s.ts_config, s.corpus_version,"
    " s.created_at, s.n_documents, s.n_chunks, s.metadata_fields, s.evaluation, s.note,"
    " coalesce(a.snapshot_id = s.snapshot_id, false),"
    " (SELECT coalesce(sum(g.n_nonempty), 0)::bigint FROM {s}.snapshot_segments ss JOIN {s}.segments g"
    "  USING (segment_id) WHERE ss.snapshot_id = s.snapshot_id),"
    " (SELECT coalesce(sum(cardinality(ss.deleted)), 0)::bigint FROM {s}.snapshot_segments ss"
    "  WHERE ss.snapshot_id = s.snapshot_id)"
    " FROM {s}.snapshots s LEFT JOIN {s}.active a ON true"
)


def _to_snapshot(row: Sequence[Any]) -> SnapshotInfo:
    keys = list(SnapshotInfo.model_fields)
    return SnapshotInfo(**dict(zip(keys, row, strict=True)))


def list_snapshots(conn: psycopg.Connection, info: CollectionInfo) -> list[SnapshotInfo]:
    query = sql.SQL(_SNAPSHOT_SELECT + " ORDER BY s.snapshot_id").format(s=info.schema_id)
    return [_to_snapshot(row) for row in conn.execute(query)]


def active_snapshot(conn: psycopg.Connection, info: CollectionInfo) -> SnapshotInfo | None:
    query = sql.SQL(_SNAPSHOT_SELECT + " WHERE a.snapshot_id = s.snapshot_id").format(
        s=info.schema_id
    )
    row = conn.execute(query).fetchone()
    return _to_snapshot(row) if row else None


def get_snapshot(conn: psycopg.Connection, info: CollectionInfo, snapshot_id: int) -> SnapshotInfo:
    query = sql.SQL(_SNAPSHOT_SELECT + " WHERE s.snapshot_id = %s").format(s=info.schema_id)
    row = conn.execute(query, (snapshot_id,)).fetchone()
    if row is None:
        known = [s.snapshot_id for s in list_snapshots(conn, info)]
        raise PgciteError(
            f"collection {info.name!r} has no snapshot {snapshot_id}",
            hint=f"snapshots: {', '.join(map(str, known))}" if known else "build one first",
        )
    return _to_snapshot(row)


def store_evaluation(
    conn: psycopg.Connection, info: CollectionInfo, snapshot_id: int, evaluation: dict[str, Any]
) -> None:
    """Record a snapshot's evaluation (the only column of a snapshot that changes after it is
    built: its members, chunks and postings never do)."""
    conn.execute(
        sql.SQL("UPDATE {s}.snapshots SET evaluation = %s WHERE snapshot_id = %s").format(
            s=info.schema_id),
        (Jsonb(evaluation), snapshot_id),
    )


def find_versions(
    conn: psycopg.Connection, info: CollectionInfo, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], int]:
    """Existing version ids for (document_id, content_hash) pairs."""
    if not keys:
        return {}
    rows = conn.execute(
        sql.SQL(
            "SELECT v.document_id, v.content_hash, v.version_pk FROM {s}.versions v"
            " JOIN unnest(%s::text[], %s::text[]) AS k(document_id, content_hash)"
            " USING (document_id, content_hash)"
        ).format(s=info.schema_id),
        ([k[0] for k in keys], [k[1] for k in keys]),
    ).fetchall()
    return {(doc, digest): pk for doc, digest, pk in rows}


class NewVersion(BaseModel):
    """A document version to store: its chunks and their vectors (one row each)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    document_id: str
    content_hash: str
    source: str
    chunks: Sequence[ChunkDraft]
    vectors: Any  # Vectors, one row per chunk
    provenance: dict[str, Any] | None = None  # the document's fields and where each came from


def insert_version(
    conn: psycopg.Connection,
    info: CollectionInfo,
    *,
    document_id: str,
    content_hash: str,
    source: str,
    chunks: Sequence[ChunkDraft],
    vectors: Vectors,
    spec: EmbedderSpec,
    corpus_version: str | None,
    provenance: dict[str, Any] | None = None,
) -> int:
    """Store one document version and its chunks; returns its version_pk. ``provenance``: the
    document's fields and where each came from (ingest/_provenance.py)."""
    version = NewVersion(document_id=document_id, content_hash=content_hash, source=source,
                         chunks=chunks, vectors=vectors, provenance=provenance)
    return insert_versions(conn, info, [version], spec=spec, corpus_version=corpus_version)[0]


def insert_versions(
    conn: psycopg.Connection,
    info: CollectionInfo,
    versions: Sequence[NewVersion],
    *,
    spec: EmbedderSpec,
    corpus_version: str | None,
) -> list[int]:
    """Store document versions and their chunks in two statements, whatever their number (an
    INSERT of the versions and one COPY of their chunks: a round trip per document, five with
    its entities, was most of an ingest's storing time); returns their version_pks in order. A
    version stored already (a concurrent ingest stored the same one first) is returned, and
    its chunks are not written again."""
    if not versions:
        return []
    rows = conn.execute(
        sql.SQL(
            "INSERT INTO {s}.versions (document_id, content_hash, source, n_chunks, provenance)"
            " SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::int[], %s::jsonb[])"
            " ON CONFLICT (document_id, content_hash) DO UPDATE"
            " SET n_chunks = EXCLUDED.n_chunks"
            " RETURNING document_id, content_hash, version_pk, xmax = 0"
        ).format(s=info.schema_id),
        ([v.document_id for v in versions], [v.content_hash for v in versions],
         [v.source for v in versions], [len(v.chunks) for v in versions],
         [Jsonb(v.provenance) if v.provenance is not None else None for v in versions]),
    ).fetchall()
    stored = {(doc, digest): (int(pk), inserted) for doc, digest, pk, inserted in rows}
    pks = [stored[(v.document_id, v.content_hash)][0] for v in versions]
    copy_sql = sql.SQL("COPY {s}.chunks ({cols}) FROM STDIN").format(
        s=info.schema_id, cols=sql.SQL(", ").join(map(sql.Identifier, _CHUNK_COLUMNS))
    )
    with conn.cursor() as cur, cur.copy(copy_sql) as copy:
        for version, pk in zip(versions, pks, strict=True):
            if not stored[(version.document_id, version.content_hash)][1]:
                continue  # a concurrent ingest stored this version (and its chunks) first
            for chunk, vector in zip(version.chunks, version.vectors, strict=True):
                copy.write_row((
                    pk, chunk.id, chunk.document_id, chunk.ordinal, chunk.corpus,
                    chunk.date_start, chunk.date_end, chunk.author, chunk.source,
                    chunk.locator, chunk.citation, chunk.title, chunk.body,
                    Jsonb(chunk.metadata), _vector_text(vector), spec.model_key,
                    corpus_version, version.content_hash, chunk.context,
                ))
    return pks


def _vector_text(vector: Vectors) -> str:
    """pgvector's text form, each value to 7 significant digits (a float32's precision),
    formatted in one call (a third of the time of one format per value)."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + ",".join(["%.7g"] * len(values)) % tuple(values) + "]"


def document_attributes(conn: psycopg.Connection, info: CollectionInfo, snapshot_id: int,
                        document_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Stored document-level fields of these documents in a snapshot: the version's recorded
    ``provenance`` (None for a version stored before it was recorded), and as the chunks carry
    them: author, corpus, metadata, title and locator of the first chunk, and the date range
    when every chunk has the same one (``dates`` is ``None`` otherwise)."""
    if not document_ids:
        return {}
    rows = conn.execute(
        sql.SQL(
            "SELECT v.document_id, v.provenance, (array_agg(c.author ORDER BY c.ordinal))[1],"
            " (array_agg(c.corpus ORDER BY c.ordinal))[1],"
            " (array_agg(c.title ORDER BY c.ordinal))[1],"
            " (array_agg(c.locator ORDER BY c.ordinal))[1],"
            " (array_agg(c.metadata ORDER BY c.ordinal))[1],"
            " min(c.date_start), max(c.date_end),"
            " bool_and(c.date_start IS NOT NULL) AND count(DISTINCT (c.date_start, c.date_end)) = 1"
            " FROM {s}.snapshot_members m JOIN {s}.versions v USING (version_pk)"
            " JOIN {s}.chunks c USING (version_pk)"
            " WHERE m.snapshot_id = %s AND v.document_id = ANY(%s)"
            " GROUP BY v.document_id, v.provenance"
        ).format(s=info.schema_id),
        (snapshot_id, list(document_ids)),
    ).fetchall()
    return {doc: {"provenance": provenance, "author": author, "corpus": corpus, "title": title,
                  "locator": locator, "metadata": metadata,
                  "dates": (start, end) if uniform else None}
            for doc, provenance, author, corpus, title, locator, metadata, start, end, uniform
            in rows}


def record_provenance(conn: psycopg.Connection, info: CollectionInfo,
                      provenance: dict[int, dict[str, Any]]) -> None:
    """Record what an unchanged version's document says and where from (version_pk -> JSON):
    the same values may come from a new source (a catalogue now gives the date the file gave),
    which a later ingest must know. Not content: the version's chunks stay as they are."""
    if not provenance:
        return
    conn.execute(
        sql.SQL("UPDATE {s}.versions v SET provenance = p.provenance"
                " FROM unnest(%s::bigint[], %s::jsonb[]) AS p(version_pk, provenance)"
                " WHERE v.version_pk = p.version_pk"
                " AND v.provenance IS DISTINCT FROM p.provenance").format(s=info.schema_id),
        (list(provenance), [Jsonb(p) for p in provenance.values()]),
    )


@dataclass(frozen=True)
class SnapshotPlan:
    """A snapshot to build: the one whose keyword index it starts from (``base_id``, sharing
    its segments), how its members differ from that one's, and the snapshot whose documents it
    keeps (``content_id``)."""

    base_id: int | None
    delta: MemberDelta
    content_id: int | None

    @property
    def unchanged(self) -> bool:
        """The new snapshot would hold exactly the documents of the one it keeps."""
        return not self.delta.changed and self.base_id == self.content_id


def plan_snapshot(
    conn: psycopg.Connection,
    info: CollectionInfo,
    version_pks: Iterable[int],
    *,
    spec: EmbedderSpec,
    content_id: int | None,
    remove_documents: Sequence[str] = (),
    replace_all: bool = False,
) -> SnapshotPlan:
    """A new snapshot's members: those of ``content_id`` (None: none) with ``version_pks`` in
    place of its versions of the same documents and without the documents
    ``remove_documents``; with ``replace_all``, exactly ``version_pks``. Its keyword index
    starts from the active snapshot's (or the newest ready one's, same model). When that is
    ``content_id`` (a build on the active snapshot: every ingest, staged build and deletion),
    the difference is found from the documents that change, never from the member list."""
    pks = sorted(set(version_pks))
    base_id = _base_snapshot(conn, info, spec)
    if base_id == content_id or replace_all:
        delta = member_delta(conn, info.schema_name, base_id, pks,
                             remove_documents=remove_documents, replace_all=replace_all)
    else:  # another model's snapshot, or none active: members listed, then compared
        delta = _listed_delta(conn, info, base_id, content_id, pks, remove_documents)
    return SnapshotPlan(base_id=base_id, delta=delta, content_id=content_id)


def _listed_delta(conn: psycopg.Connection, info: CollectionInfo, base_id: int | None,
                  content_id: int | None, pks: list[int],
                  remove_documents: Sequence[str]) -> MemberDelta:
    members = set(pks)
    if content_id is not None:
        rows = conn.execute(sql.SQL(
            "SELECT m.version_pk FROM {s}.snapshot_members m JOIN {s}.versions v"
            " USING (version_pk) WHERE m.snapshot_id = %s AND v.document_id <> ALL(%s)"
            " AND v.document_id NOT IN (SELECT document_id FROM {s}.versions"
            "                           WHERE version_pk = ANY(%s))").format(s=info.schema_id),
            (content_id, list(remove_documents), pks)).fetchall()
        members |= {r[0] for r in rows}
    return member_delta(conn, info.schema_name, base_id, sorted(members), replace_all=True)


def build_snapshot(
    conn: psycopg.Connection,
    info: CollectionInfo,
    plan: SnapshotPlan,
    *,
    spec: EmbedderSpec,
    corpus_version: str | None = None,
    note: str | None = None,
    segments: Sequence[int] = (),
) -> int:
    """Create the ready snapshot ``plan`` describes (:func:`plan_snapshot`), with its BM25
    index and statistics, in work proportional to what changed.

    If a ready snapshot with exactly those members, model and corpus version exists already,
    its id is returned instead: a build resumed after a crash (or run twice) makes no
    duplicate. ``segments``: staged segments that index some of the added versions already
    (store._staged); they are taken over."""
    same = _identical_snapshot(conn, info, plan, spec, corpus_version)
    if same is not None:
        return same
    row = conn.execute(
        sql.SQL(
            "INSERT INTO {s}.snapshots (embed_model, embed_dim, ts_config, corpus_version, note,"
            " bm25_k1, bm25_b, base_id, delta_sha256) VALUES (%s, %s, %s, %s, %s, %s, %s, %s,"
            " %s) RETURNING snapshot_id"
        ).format(s=info.schema_id),
        (spec.model_key, spec.dim, info.ts_config, corpus_version, note, K1, B, plan.base_id,
         plan.delta.digest),
    ).fetchone()
    assert row is not None
    snapshot_id = int(row[0])
    _check_single_model(conn, info, list(plan.delta.added), spec)
    # Membership is the snapshot's segments minus their deleted versions (the index's
    # snapshot_members view): writing it is writing the segments, in proportion to what changed.
    index_snapshot(conn, info.schema_name, snapshot_id, plan.base_id, plan.delta, segments)
    return snapshot_id


def _base_snapshot(conn: psycopg.Connection, info: CollectionInfo,
                   spec: EmbedderSpec) -> int | None:
    """The snapshot a new one's index starts from: the active one, else the newest ready one,
    embedded with the same model (its members passed the model check already)."""
    row = conn.execute(sql.SQL(
        "SELECT s.snapshot_id FROM {s}.snapshots s LEFT JOIN {s}.active a"
        " ON a.snapshot_id = s.snapshot_id WHERE s.state = 'ready' AND s.embed_model = %s"
        " ORDER BY a.snapshot_id IS NULL, s.snapshot_id DESC LIMIT 1").format(s=info.schema_id),
        (spec.model_key,)).fetchone()
    return int(row[0]) if row else None


def _identical_snapshot(conn: psycopg.Connection, info: CollectionInfo, plan: SnapshotPlan,
                        spec: EmbedderSpec, corpus_version: str | None) -> int | None:
    """A ready snapshot with exactly the planned members: the base itself when nothing
    changed, else one built from the same base with the same difference (a build that was
    interrupted before its activation and is now run again). Snapshots built otherwise are not
    compared (that cost a pass over the collection per snapshot); missing one only means
    building an equal snapshot again."""
    if plan.base_id is None:
        return None  # no ready snapshot of this model at all
    row = conn.execute(sql.SQL(
        "SELECT snapshot_id FROM {s}.snapshots WHERE state = 'ready' AND embed_model = %(model)s"
        " AND corpus_version IS NOT DISTINCT FROM %(cv)s AND (snapshot_id = %(base)s AND"
        " NOT %(changed)s OR base_id = %(base)s AND delta_sha256 = %(digest)s)"
        " ORDER BY snapshot_id = %(base)s DESC, snapshot_id DESC LIMIT 1").format(
        s=info.schema_id), {"model": spec.model_key, "cv": corpus_version, "base": plan.base_id,
                            "changed": plan.delta.changed, "digest": plan.delta.digest}
    ).fetchone()
    return int(row[0]) if row else None


def _check_single_model(
    conn: psycopg.Connection, info: CollectionInfo, added: list[int], spec: EmbedderSpec,
) -> None:
    """The versions the base lacks (every one without a base) have this model's vectors: the
    base's members passed this check when it was built."""
    ids = {"pks": added, "model": spec.model_key, "dim": spec.dim}
    other = conn.execute(
        sql.SQL(
            "SELECT DISTINCT c.embed_model FROM {s}.chunks c"
            " WHERE c.version_pk = ANY(%(pks)s::bigint[]) AND c.embed_model <> %(model)s"
        ).format(s=info.schema_id),
        ids,
    ).fetchall()
    if other:
        raise PgciteError(
            f"snapshot would mix embedding models ({spec.model_key} and {other[0][0]})",
            hint="re-embed every document with one model (a full rebuild)",
        )
    # The snapshot records one dimension; queries cast to it, so every vector must have it.
    wrong = conn.execute(
        sql.SQL(
            "SELECT c.id, vector_dims(c.embedding) FROM {s}.chunks c"
            " WHERE c.version_pk = ANY(%(pks)s::bigint[]) AND vector_dims(c.embedding) <> %(dim)s"
            " LIMIT 1"
        ).format(s=info.schema_id),
        ids,
    ).fetchone()
    if wrong:
        raise PgciteError(
            f"chunk {wrong[0]} has a {wrong[1]}-dim vector but {spec.model_key} gives {spec.dim}",
            hint="re-embed it: the snapshot would be unsearchable",
        )


ANY_ACTIVE = -1  # activate_snapshot(expect_active=...): do not check what is active now


def lock_activations(conn: psycopg.Connection, info: CollectionInfo) -> None:
    """In a transaction that builds on the active snapshot and activates the result: wait for
    any other such transaction of this collection to commit first, so each builds on the
    snapshot active when it commits. Without it, two ingests that read the same active
    snapshot each activate it plus their own documents, and the later drops the earlier's
    from the live snapshot (tests/test_ingest_concurrent.py). Only the short final
    transaction waits: chunking and embedding run before it, in parallel."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                 (f"pgcite:activate:{info.schema_name}",))


def activate_snapshot(
    conn: psycopg.Connection,
    info: CollectionInfo,
    snapshot_id: int,
    *,
    forced: bool = False,
    detail: dict[str, Any] | None = None,
    spec: EmbedderSpec | None = None,
    expect_active: int | None = ANY_ACTIVE,
) -> int | None:
    """Make ``snapshot_id`` the active one (in the caller's transaction); returns the previous.

    ``expect_active``: refuse if another snapshot became active meanwhile (the gate compared
    against the one it expected). ``spec``: the snapshot's embedder, needed when it differs from
    the collection's recorded one -- the record switches in this same transaction, so the
    recorded embedder always names the model that serves queries.
    """
    snapshot = get_snapshot(conn, info, snapshot_id)
    if snapshot.state != "ready":
        raise PgciteError(
            f"snapshot {snapshot_id} of {info.name!r} is not ready to activate"
            f" (state: {snapshot.state})",
            hint="see `pgcite snapshot list`",
        )
    # Lock the pointer row so two activations serialise.
    previous = conn.execute(
        sql.SQL("SELECT snapshot_id, previous_id FROM {s}.active FOR UPDATE").format(
            s=info.schema_id)
    ).fetchone()
    previous_id = previous[0] if previous else None
    if expect_active != ANY_ACTIVE and previous_id != expect_active:
        raise PgciteError(
            f"snapshot {previous_id} became active in {info.name!r} while snapshot "
            f"{snapshot_id} was being checked against {expect_active}",
            hint="run the activation again: it re-checks against the new active snapshot",
        )
    if previous_id == snapshot_id:
        return previous[1] if previous else None  # already active: nothing to switch
    switched = _record_embedder(conn, info, snapshot, spec)
    conn.execute(
        sql.SQL(
            "INSERT INTO {s}.active (singleton, snapshot_id, previous_id) VALUES (true, %s, %s)"
            " ON CONFLICT (singleton) DO UPDATE SET snapshot_id = EXCLUDED.snapshot_id,"
            " previous_id = EXCLUDED.previous_id, activated_at = now()"
        ).format(s=info.schema_id),
        (snapshot_id, previous_id),
    )
    conn.execute(
        sql.SQL(
            "INSERT INTO {s}.activations (snapshot_id, previous_id, forced, detail)"
            " VALUES (%s, %s, %s, %s)"
        ).format(s=info.schema_id),
        (snapshot_id, previous_id, forced, Jsonb({**(detail or {}), **switched})),
    )
    # Delivered at commit, to every process LISTENing (their active-pointer caches).
    conn.execute("SELECT pg_notify('pgcite_active', %s)", (f"{info.name}:{snapshot_id}",))
    return previous_id


def _record_embedder(
    conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo,
    spec: EmbedderSpec | None,
) -> dict[str, Any]:
    """Switch the collection's recorded embedder to the snapshot's model if it differs."""
    conn.execute("SELECT 1 FROM pgcite.collections WHERE name = %s FOR UPDATE", (info.name,))
    recorded = get_collection(conn, info.name).embedder
    if recorded.model_key == snapshot.embed_model:
        return {}
    if spec is None or spec.model_key != snapshot.embed_model or spec.dim != snapshot.embed_dim:
        raise PgciteError(
            f"snapshot {snapshot.snapshot_id} was embedded with {snapshot.embed_model} "
            f"({snapshot.embed_dim} dims) but {info.name!r} records {recorded.model_key}",
            hint="activate it with `pgcite snapshot activate`, which loads that model",
        )
    set_embedder(conn, info.name, spec)
    return {"embedder": {"from": recorded.model_key, "to": spec.model_key}}


class Activation(BaseModel):
    """One row of a collection's activation log."""

    at: dt.datetime
    snapshot_id: int
    previous_id: int | None
    forced: bool
    detail: dict[str, Any]


def activations(conn: psycopg.Connection, info: CollectionInfo) -> list[Activation]:
    rows = conn.execute(
        sql.SQL("SELECT at, snapshot_id, previous_id, forced, detail FROM {s}.activations"
                " ORDER BY at, snapshot_id").format(s=info.schema_id)
    ).fetchall()
    keys = list(Activation.model_fields)
    return [Activation(**dict(zip(keys, row, strict=True))) for row in rows]


def previous_snapshot(conn: psycopg.Connection, info: CollectionInfo) -> int | None:
    """The snapshot that was active before the current one (the rollback target)."""
    row = conn.execute(
        sql.SQL("SELECT previous_id FROM {s}.active").format(s=info.schema_id)).fetchone()
    return int(row[0]) if row and row[0] is not None else None


# --- garbage collection -------------------------------------------------------------------------
# gc and the final transaction of a build exclude each other with one advisory lock per
# collection: builds take it shared (many may commit at once), gc exclusive. A build that reuses
# an existing version re-checks, under the lock, that gc has not removed it.


def _lock_key(info: CollectionInfo) -> str:
    return f"pgcite:build:{info.schema_name}"


def lock_versions(conn: psycopg.Connection, info: CollectionInfo, version_pks: Iterable[int]) -> None:
    """In a build's final transaction: keep gc out, and make sure the reused versions exist."""
    conn.execute("SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))",
                 (_lock_key(info),))
    pks = sorted(set(version_pks))
    row = conn.execute(
        sql.SQL("SELECT count(*) FROM (SELECT 1 FROM {s}.versions WHERE version_pk = ANY(%s)"
                " FOR KEY SHARE) v").format(s=info.schema_id),
        (pks,),
    ).fetchone()
    if row is None or row[0] != len(pks):
        raise PgciteError(
            f"`pgcite snapshot gc` removed versions of {info.name!r} this build reuses",
            hint="run the build again (embeddings are cached: nothing is embedded twice)",
        )


class GcReport(BaseModel):
    collection: str
    snapshots_removed: list[int]
    versions_removed: int
    chunks_removed: int
    segments_removed: int = 0
    indexes_dropped: list[str] = []
    dry_run: bool = False


def collect_garbage(
    conn: psycopg.Connection,
    info: CollectionInfo,
    *,
    older_than: dt.timedelta,
    keep_retired: int,
    dry_run: bool = False,
) -> GcReport:
    """Remove snapshots nobody can activate any more, then versions (and their chunks) that no
    snapshot references. Never touches the active snapshot or the rollback target.

    Removed: never-activated snapshots created before ``older_than`` ago (refused, abandoned or
    superseded builds), and retired snapshots beyond the ``keep_retired`` most recently active.
    """
    got = conn.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))",
                       (_lock_key(info),)).fetchone()
    if not got or not got[0]:
        raise PgciteError(f"a build of {info.name!r} is committing now",
                          hint="run gc again in a moment")
    with conn.transaction(force_rollback=dry_run):
        doomed = [r[0] for r in conn.execute(_DOOMED_SQL.format(s=info.schema_id), {
            "older": older_than, "keep": keep_retired})]
        conn.execute(sql.SQL("DELETE FROM {s}.snapshots WHERE snapshot_id = ANY(%s)").format(
            s=info.schema_id), (doomed,))
        # Segments no snapshot uses any more (merged away, or only the removed ones'), then
        # versions no remaining segment holds (a snapshot's members are its segments' versions).
        # Staged versions and their segments wait for a build (store._staged): both are kept.
        segments = conn.execute(sql.SQL(
            "DELETE FROM {s}.segments g WHERE NOT EXISTS (SELECT 1 FROM {s}.snapshot_segments ss"
            " WHERE ss.segment_id = g.segment_id) AND NOT EXISTS (SELECT 1 FROM {s}.staged st"
            " WHERE st.segment_id = g.segment_id) RETURNING segment_id").format(s=info.schema_id)
        ).fetchall()
        removed = conn.execute(sql.SQL(
            "DELETE FROM {s}.versions v WHERE NOT EXISTS (SELECT 1 FROM"
            " {s}.segment_versions sv WHERE sv.version_pk = v.version_pk) AND NOT EXISTS"
            " (SELECT 1 FROM {s}.staged st WHERE st.version_pk = v.version_pk)"
            " RETURNING n_chunks"
        ).format(s=info.schema_id)).fetchall()
    return GcReport(collection=info.name, snapshots_removed=sorted(doomed),
                    versions_removed=len(removed), chunks_removed=sum(r[0] for r in removed),
                    segments_removed=len(segments), dry_run=dry_run)


_DOOMED_SQL = sql.SQL("""
WITH pointer AS (
    SELECT snapshot_id AS id FROM {s}.active UNION SELECT previous_id FROM {s}.active
), last_active AS (
    SELECT snapshot_id, max(at) AS at FROM {s}.activations GROUP BY snapshot_id
), retired AS (
    SELECT snapshot_id, row_number() OVER (ORDER BY at DESC, snapshot_id DESC) AS n
    FROM last_active WHERE snapshot_id NOT IN (SELECT id FROM pointer WHERE id IS NOT NULL)
)
SELECT s.snapshot_id FROM {s}.snapshots s
LEFT JOIN last_active l USING (snapshot_id) LEFT JOIN retired r USING (snapshot_id)
WHERE s.snapshot_id NOT IN (SELECT id FROM pointer WHERE id IS NOT NULL)
  AND ((l.snapshot_id IS NULL AND s.created_at < now() - %(older)s) OR r.n > %(keep)s)
FOR UPDATE OF s
""")


def unused_vector_indexes(conn: psycopg.Connection, info: CollectionInfo) -> list[str]:
    """Partial HNSW indexes of models that no stored chunk uses (and the collection does not
    record): left behind by a model switch once gc removed the old snapshots."""
    live = {vector_index_name(info.embedder.model_key)} | {
        vector_index_name(r[0]) for r in conn.execute(
            sql.SQL("SELECT DISTINCT embed_model FROM {s}.chunks").format(s=info.schema_id))
    }
    names = [r[0] for r in conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'chunks'"
        " AND indexname LIKE 'chunks\\_hnsw\\_%%'", (info.schema_name,))]
    return sorted(n for n in names if n not in live)


def drop_index_concurrently(conn: psycopg.Connection, info: CollectionInfo, name: str) -> None:
    """DROP INDEX CONCURRENTLY (needs an autocommit connection): queries are never blocked."""
    conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}.{}").format(
        info.schema_id, sql.Identifier(name)))
