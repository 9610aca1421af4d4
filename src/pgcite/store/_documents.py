"""The documents of a snapshot: list them, and build a snapshot without some of them.

A snapshot holds document *versions*; a document is listed with what its chunks say about it
(title, dates, author, corpus) and how many chunks it has. Deleting documents never touches
stored rows: it builds a new snapshot of the remaining versions (the same ``build_snapshot`` an
ingest uses, so the same BM25 statistics, the same identity rule, the same gc lock), and the
caller activates it -- through the gate when the collection has one -- exactly as after an ingest.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import psycopg
from psycopg import sql
from pydantic import AliasChoices, ConfigDict, Field

from pgcite._camel import CAMEL, CamelModel
from pgcite._errors import PgciteError
from pgcite.index import MergeReport, is_member
from pgcite.store._collections import CollectionInfo
from pgcite.store._snapshots import (
    SnapshotInfo,
    activate_snapshot,
    build_snapshot,
    lock_versions,
    plan_snapshot,
)


class DocumentInfo(CamelModel):
    """One document of a snapshot, as its chunks describe it (JSON: camelCase). Its first day
    is ``date`` in JSON, as a search hit's is (``dateStart`` before: read still)."""

    model_config = ConfigDict(**CAMEL, frozen=True)

    id: str
    title: str | None
    date_start: dt.date | None = Field(serialization_alias="date", validation_alias=AliasChoices(
        "date", "date_start", "dateStart"))
    date_end: dt.date | None
    author: str | None
    corpus: str | None
    source: str | None
    chunks: int

    @property
    def date(self) -> dt.date | None:
        """The document's first day: the one name on every surface (``date_start`` is kept)."""
        return self.date_start


class DocumentsRemoved(CamelModel):
    """What ``delete_documents`` did: the snapshot built without them, and whether it is live."""

    collection: str
    removed: list[str]
    from_snapshot: int
    snapshot_id: int | None = None
    activated: bool = False
    gate: str | None = None  # the activation gate's outcome, when the collection has one
    merged: MergeReport | None = None  # the keyword index's merges after the build


# One row per document: its title (as its version recorded it: a section chunk's title ends
# with its headings; else the first chunk's), the first chunk's author/corpus (a document's
# chunks share them), the earliest start and latest end date over its chunks.
_LIST_SQL = """
SELECT c.document_id,
       CASE WHEN v.provenance IS NULL THEN (array_agg(c.title ORDER BY c.ordinal))[1]
            ELSE v.provenance->>'title' END,
       min(c.date_start), max(coalesce(c.date_end, c.date_start)),
       (array_agg(c.author ORDER BY c.ordinal))[1],
       (array_agg(c.corpus ORDER BY c.ordinal))[1],
       v.source, count(*)
FROM {s}.snapshot_members m
JOIN {s}.versions v USING (version_pk)
JOIN {s}.chunks c USING (version_pk)
WHERE m.snapshot_id = %(sid)s
GROUP BY c.document_id, v.source, v.provenance
ORDER BY min(c.date_start) NULLS LAST, c.document_id
LIMIT %(limit)s OFFSET %(offset)s
"""


def list_documents(
    conn: psycopg.Connection, info: CollectionInfo, snapshot_id: int, *,
    limit: int | None = None, offset: int = 0,
) -> list[DocumentInfo]:
    """The documents of ``snapshot_id``, oldest first (undated last), then by id."""
    rows = conn.execute(sql.SQL(_LIST_SQL).format(s=info.schema_id),
                        {"sid": snapshot_id, "limit": limit, "offset": offset}).fetchall()
    keys = list(DocumentInfo.model_fields)
    return [DocumentInfo(**dict(zip(keys, row, strict=True))) for row in rows]


def build_without(
    conn: psycopg.Connection, info: CollectionInfo, base: SnapshotInfo, ids: Sequence[str],
    *, activate: bool,
) -> DocumentsRemoved:
    """In the caller's transaction: a new snapshot of ``base`` less the documents ``ids``.

    An id that ``base`` does not hold is an error and nothing is built; removing every document
    is refused too (a collection with an empty snapshot answers nothing: drop it instead)."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        raise PgciteError("name at least one document id to delete")
    held, others = _held(conn, info, base.snapshot_id, wanted)
    unknown = [i for i in wanted if i not in held]
    if unknown:
        shown = ", ".join(repr(i) for i in unknown[:5]) + (" …" if len(unknown) > 5 else "")
        raise PgciteError(
            f"snapshot {base.snapshot_id} of {info.name!r} has no document {shown}; "
            "nothing was deleted",
            hint=f"see `pgcite documents list {info.name}`")
    if not others:
        raise PgciteError(f"that would delete every document of {info.name!r}",
                          hint=f"drop the collection instead: pgcite collection drop {info.name}")
    # gc must not remove what the new snapshot keeps: its base's versions, which gc leaves alone
    # while the base is the active snapshot, and its lock keeps gc out until this commits
    lock_versions(conn, info, [])
    spec = info.embedder if base.embed_model == info.embedder.model_key else None
    if spec is None:
        raise PgciteError(
            f"snapshot {base.snapshot_id} was embedded with {base.embed_model}, not the "
            f"collection's {info.embedder.model_key}", hint="delete from the active snapshot")
    plan = plan_snapshot(conn, info, [], spec=spec, content_id=base.snapshot_id,
                         remove_documents=wanted)
    snapshot_id = build_snapshot(
        conn, info, plan, spec=spec, corpus_version=base.corpus_version,
        note=f"delete of {', '.join(wanted)}"[:200])
    report = DocumentsRemoved(collection=info.name, removed=wanted,
                              from_snapshot=base.snapshot_id, snapshot_id=snapshot_id)
    if activate:
        activate_snapshot(conn, info, snapshot_id, spec=spec)
        report = report.model_copy(update={"activated": True})
    return report


def _held(conn: psycopg.Connection, info: CollectionInfo, snapshot_id: int,
          ids: Sequence[str]) -> tuple[set[str], bool]:
    """Which of these documents the snapshot holds, and whether it holds any other."""
    s = info.schema_id
    held = {r[0] for r in conn.execute(sql.SQL(
        "SELECT DISTINCT x.document_id FROM (SELECT v.document_id, {member} AS member"
        " FROM {s}.versions v WHERE v.document_id = ANY(%(ids)s) OFFSET 0) x WHERE x.member"
    ).format(s=s, member=is_member(s, sql.Placeholder("sid"), sql.SQL("v.version_pk"))),
        {"ids": list(ids), "sid": snapshot_id})}
    other = conn.execute(sql.SQL(
        "SELECT EXISTS (SELECT 1 FROM {s}.snapshot_members m JOIN {s}.versions v"
        " USING (version_pk) WHERE m.snapshot_id = %s AND v.document_id <> ALL(%s))").format(
        s=s), (snapshot_id, list(ids))).fetchone()
    return held, bool(other and other[0])
