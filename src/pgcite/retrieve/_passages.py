"""Passages by citation id: one passage and its neighbours in the same document, within one
snapshot and under the same hard filters as a search (a cutoff hides later neighbours too).
Also a snapshot's profile: its date range, corpora and sizes (what an agent needs to know before
it searches)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
from psycopg import sql
from pydantic import BaseModel, ConfigDict, Field

from pgcite._errors import PgciteError
from pgcite._inputs import MAX_ID_CHARS, check_text, excerpt
from pgcite.retrieve._filters import Filters, compile_filters
from pgcite.store._collections import CollectionInfo
from pgcite.store._snapshots import SnapshotInfo


class Passage(BaseModel):
    """One stored passage, addressed by its citation id."""

    model_config = ConfigDict(frozen=True)

    id: str
    document_id: str
    ordinal: int = Field(description="position in its document (0-based)")
    citation: str
    author: str | None
    corpus: str | None
    date_start: dt.date | None
    date_end: dt.date | None
    source: str | None
    locator: str | None
    title: str | None
    body: str
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def date(self) -> dt.date | None:
        """The passage's first day, named as on every surface (``date_start`` is the same)."""
        return self.date_start


class PassageWindow(BaseModel):
    """A passage with up to ``n`` neighbours either side (same document, same snapshot)."""

    passage: Passage
    before: list[Passage]
    after: list[Passage]
    snapshot_id: int


class SnapshotProfile(BaseModel):
    """What a snapshot holds, for a caller choosing filters."""

    snapshot_id: int
    documents: int | None
    passages: int | None
    first_date: dt.date | None
    last_date: dt.date | None
    undated_passages: int
    corpora: list[str]
    metadata_fields: dict[str, list[str]]


# Both statements: chunks of one snapshot (its member versions), under the compiled filters.
_WINDOW = sql.SQL(
    "WITH target AS (SELECT c.version_pk, c.ordinal FROM {s}.chunks c"
    " WHERE c.id = %(id)s AND {f} AND c.version_pk IN"
    " (SELECT version_pk FROM {s}.snapshot_members WHERE snapshot_id = %(snapshot_id)s))"
    " SELECT c.id, c.document_id, c.ordinal, c.citation, c.author, c.corpus, c.date_start,"
    " c.date_end, c.source, c.locator, c.title, c.body, c.metadata"
    " FROM {s}.chunks c JOIN target t USING (version_pk)"
    " WHERE abs(c.ordinal - t.ordinal) <= %(n)s AND {f} ORDER BY c.ordinal")
# The neighbours of several passages at once (the answer's context): each target's document
# version in the snapshot, ``n`` either side, the targets themselves left out.
_NEIGHBOURS = sql.SQL(
    "WITH target AS (SELECT c.id AS target, c.version_pk, c.ordinal FROM {s}.chunks c"
    " WHERE c.id = ANY(%(ids)s) AND {f} AND c.version_pk IN"
    " (SELECT version_pk FROM {s}.snapshot_members WHERE snapshot_id = %(snapshot_id)s))"
    " SELECT t.target, c.id, c.document_id, c.ordinal, c.citation, c.author, c.corpus,"
    " c.date_start, c.date_end, c.source, c.locator, c.title, c.body, c.metadata"
    " FROM {s}.chunks c JOIN target t USING (version_pk)"
    " WHERE c.ordinal <> t.ordinal AND abs(c.ordinal - t.ordinal) <= %(n)s AND {f}"
    " ORDER BY t.target, c.ordinal")
_PROFILE = sql.SQL(
    "SELECT min(c.date_start), max(c.date_end), count(*) FILTER (WHERE c.date_end IS NULL),"
    " coalesce(array_agg(DISTINCT c.corpus) FILTER (WHERE c.corpus IS NOT NULL), '{{}}')"
    " FROM {s}.chunks c WHERE c.version_pk IN"
    " (SELECT version_pk FROM {s}.snapshot_members WHERE snapshot_id = %(snapshot_id)s)")


def _passage(row: tuple[Any, ...]) -> Passage:
    return Passage.model_validate(dict(zip(Passage.model_fields, row, strict=True)))


def passage_window(
    conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo, passage_id: str,
    *, neighbours: int = 1, filters: Filters | None = None,
) -> PassageWindow:
    """The passage ``passage_id`` of ``snapshot`` and its neighbours, all within ``filters``.
    A passage outside the filters is as absent as an unknown id."""
    check_text(passage_id, "citation_id", max_chars=MAX_ID_CHARS)
    compiled = compile_filters(filters or Filters(), snapshot.metadata_fields or {}, info.schema_id)
    params = {**compiled.params, "snapshot_id": snapshot.snapshot_id, "id": passage_id,
              "n": neighbours}
    query = _WINDOW.format(s=info.schema_id, f=compiled.sql())
    rows = [_passage(r) for r in conn.execute(query, params).fetchall()]
    target = next((p for p in rows if p.id == passage_id), None)
    if target is None:
        raise PgciteError(
            f"no passage {excerpt(repr(passage_id), 80)} in snapshot {snapshot.snapshot_id} of {info.name!r}"
            + (" within these filters" if filters and filters != Filters() else ""),
            hint="use a citation id exactly as search returned it",
        )
    return PassageWindow(
        passage=target, snapshot_id=snapshot.snapshot_id,
        before=[p for p in rows if p.ordinal < target.ordinal],
        after=[p for p in rows if p.ordinal > target.ordinal],
    )


def neighbour_passages(
    conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo,
    passage_ids: list[str], *, neighbours: int = 1, filters: Filters | None = None,
) -> dict[str, list[Passage]]:
    """For each of ``passage_ids`` in ``snapshot``, the passages up to ``neighbours`` before and
    after it in its document, in document order, every one within ``filters`` (the same hard
    filters as a search: a neighbour after the cutoff, in another corpus or outside a metadata
    or entity filter is left out). An id not in the snapshot or outside the filters has none."""
    if not passage_ids or neighbours < 1:
        return {}
    compiled = compile_filters(filters or Filters(), snapshot.metadata_fields or {}, info.schema_id)
    params = {**compiled.params, "snapshot_id": snapshot.snapshot_id, "ids": list(passage_ids),
              "n": neighbours}
    out: dict[str, list[Passage]] = {}
    for target, *row in conn.execute(_NEIGHBOURS.format(s=info.schema_id, f=compiled.sql()),
                                     params).fetchall():
        out.setdefault(target, []).append(_passage(tuple(row)))
    return out


def snapshot_profile(
    conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo
) -> SnapshotProfile:
    query = _PROFILE.format(s=info.schema_id)
    row = conn.execute(query, {"snapshot_id": snapshot.snapshot_id}).fetchone()
    first, last, undated, corpora = row if row else (None, None, 0, [])
    return SnapshotProfile(
        snapshot_id=snapshot.snapshot_id, documents=snapshot.n_documents,
        passages=snapshot.n_chunks, first_date=first, last_date=last, undated_passages=undated,
        corpora=sorted(corpora), metadata_fields=snapshot.metadata_fields or {},
    )
