"""A citation opens its source: the cited passage in its document with its neighbours, the
document's date, author, title and provenance, and for a passage read by OCR the page it was read
from with the passage's block outlined (docs/exhibits.md, "Every citation opens its source").

Everything shown is under the request's hard filters, exactly as a search is: a neighbour after
an exhibit's cutoff is not shown, the document's dates are those of the passages the filters
let through, and a page image is shown only when every passage on that page passes them (a page
holds other blocks, and a block after the cutoff must not be read off the image).

A citation link names its passage and the snapshot the answer came from. The text shown is read
from the snapshot the caller may read (the active one; an admin may pin another); the named one
only tells whether that text is still the text that was cited (``status``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

import psycopg
from psycopg import sql
from pydantic import BaseModel, Field

from pgcite._errors import PgciteError
from pgcite.retrieve._filters import Filters, compile_filters
from pgcite.retrieve._passages import Passage, passage_window
from pgcite.store._collections import CollectionInfo
from pgcite.store._page_images import StoredPage, has_page_image, page_image
from pgcite.store._snapshots import SnapshotInfo

Status = Literal["current", "same", "replaced", "removed", "unverified", "pinned"]
NOTES: dict[Status, str] = {
    "current": "the passage as it is in the archive now",
    "same": "the same text as when it was cited",
    "replaced": "the passage was replaced after it was cited; this is its current text",
    "removed": "the passage was removed from the archive after it was cited",
    "unverified": "the snapshot it was cited from is no longer kept, so whether the text "
                  "changed since cannot be checked; this is its current text",
    "pinned": "the passage as it was in the snapshot named",
}


class PassageNotFound(PgciteError):
    """No such passage where the caller may look (unknown, or outside the filters)."""


class SourceDocument(BaseModel):
    """The document a passage belongs to, as far as the filters let it be seen."""

    document_id: str
    title: str | None
    author: str | None
    corpus: str | None
    date_start: dt.date | None = Field(description="its first date among the passages shown")
    date_end: dt.date | None
    source: str | None = Field(description="the file or edition it was ingested from")
    corpus_version: str | None
    ingested_at: dt.datetime = Field(description="when this version of it was stored")
    passages: int = Field(description="its passages within the filters")
    metadata: dict[str, Any] = Field(description="what its source said about it (catalogue "
                                     "fields, OCR's engine and confidence …)")


class PageRegion(BaseModel):
    """Where on a scanned page the passage was read: boxes [left, top, right, bottom] in the
    coordinates of the page OCR read (``width`` x ``height``)."""

    page: int
    boxes: list[tuple[int, int, int, int]]
    width: int | None
    height: int | None
    image: bool = Field(description="a page image may be shown (fetch it from the page URL)")
    withheld: str | None = Field(default=None, description="why no image is shown")


class CitedSource(BaseModel):
    citation_id: str
    cited_snapshot: int | None = Field(description="the snapshot the citation names")
    snapshot_id: int = Field(description="the snapshot the text shown is read from")
    status: Status
    note: str
    passage: Passage | None = Field(description="None: removed since it was cited")
    before: list[Passage] = Field(default_factory=list)
    after: list[Passage] = Field(default_factory=list)
    document: SourceDocument | None = None
    page: PageRegion | None = None


def open_citation(
    conn: psycopg.Connection, info: CollectionInfo, readable: SnapshotInfo, citation_id: str,
    *, filters: Filters, cited: SnapshotInfo | None, cited_id: int | None = None,
    neighbours: int = 2,
) -> CitedSource:
    """``citation_id`` read from ``readable`` (the active snapshot, or the one an admin pinned)
    under ``filters``, compared with the text ``cited`` (the snapshot the link names, if it is
    still kept; ``cited_id`` is the number the link gave) holds."""
    cited_id = cited.snapshot_id if cited is not None else cited_id
    try:
        window = passage_window(conn, info, readable, citation_id, neighbours=neighbours,
                                filters=filters)
    except PgciteError:
        window = None
    then = (_body(conn, info, cited, citation_id, filters)
            if cited is not None and cited.snapshot_id != readable.snapshot_id else None)
    if window is None:
        if then is None:
            raise PassageNotFound(f"no passage {citation_id!r} here",
                                  hint="use a citation id exactly as an answer gave it")
        return CitedSource(citation_id=citation_id, cited_snapshot=cited_id,
                           snapshot_id=readable.snapshot_id, status="removed",
                           note=NOTES["removed"], passage=None)
    status = _status(readable, cited, cited_id, then, window.passage.body)
    version_pk = _version_of(conn, info, readable, citation_id)
    return CitedSource(
        citation_id=citation_id, cited_snapshot=cited_id, snapshot_id=readable.snapshot_id,
        status=status, note=NOTES[status], passage=window.passage, before=window.before,
        after=window.after, document=_document(conn, info, version_pk, window.passage, filters,
                                               readable),
        page=_page(conn, info, version_pk, window.passage, filters, readable))


def _status(readable: SnapshotInfo, cited: SnapshotInfo | None, cited_id: int | None,
            then: str | None, now: str) -> Status:
    if cited_id is None or cited_id == readable.snapshot_id:
        return "current" if readable.active else "pinned"
    if cited is None or then is None:
        return "unverified"  # gone by gc, or the passage was not in it (a wrong link)
    return "same" if then == now else "replaced"


_BODY = sql.SQL(
    "SELECT c.body FROM {s}.chunks c WHERE c.id = %(id)s AND {f} AND c.version_pk IN"
    " (SELECT version_pk FROM {s}.snapshot_members WHERE snapshot_id = %(snapshot_id)s)")
_VERSION = sql.SQL(
    "SELECT c.version_pk FROM {s}.chunks c WHERE c.id = %(id)s AND c.version_pk IN"
    " (SELECT version_pk FROM {s}.snapshot_members WHERE snapshot_id = %(snapshot_id)s)")
# The document as the filters let it be seen: only its passages that pass them count.
_DOCUMENT = sql.SQL(
    "SELECT min(c.date_start), max(c.date_end), count(*), v.source, v.created_at,"
    " min(c.corpus_version) FROM {s}.chunks c JOIN {s}.versions v USING (version_pk)"
    " WHERE c.version_pk = %(v)s AND {f} GROUP BY v.source, v.created_at")
# Passages on one page of one version that the filters would NOT let through.
_PAGE_HIDDEN = sql.SQL(
    "SELECT count(*) FROM {s}.chunks c WHERE c.version_pk = %(v)s"
    " AND c.metadata -> 'ocr' ->> 'page' = %(page)s AND NOT coalesce({f}, false)")


def _compiled(info: CollectionInfo, snapshot: SnapshotInfo,
              filters: Filters) -> tuple[sql.Composable, dict[str, Any]]:
    compiled = compile_filters(filters, snapshot.metadata_fields or {}, info.schema_id)
    return compiled.sql(), compiled.params


def _body(conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo,
          citation_id: str, filters: Filters) -> str | None:
    f, params = _compiled(info, snapshot, filters)
    row = conn.execute(_BODY.format(s=info.schema_id, f=f), {
        **params, "id": citation_id, "snapshot_id": snapshot.snapshot_id}).fetchone()
    return str(row[0]) if row else None


def _version_of(conn: psycopg.Connection, info: CollectionInfo, snapshot: SnapshotInfo,
                citation_id: str) -> int:
    row = conn.execute(_VERSION.format(s=info.schema_id),
                       {"id": citation_id, "snapshot_id": snapshot.snapshot_id}).fetchone()
    assert row is not None  # the window found it in this snapshot
    return int(row[0])


def _document(conn: psycopg.Connection, info: CollectionInfo, version_pk: int,
              passage: Passage, filters: Filters, snapshot: SnapshotInfo) -> SourceDocument:
    f, params = _compiled(info, snapshot, filters)
    row = conn.execute(_DOCUMENT.format(s=info.schema_id, f=f),
                       {**params, "v": version_pk}).fetchone()
    assert row is not None  # the passage itself passes the filters
    first, last, count, source, ingested_at, corpus_version = row
    return SourceDocument(
        document_id=passage.document_id, title=passage.title, author=passage.author,
        corpus=passage.corpus, date_start=first, date_end=last, source=source or passage.source,
        corpus_version=corpus_version, ingested_at=ingested_at, passages=count,
        metadata=passage.metadata)


def ocr_region(metadata: dict[str, Any]) -> tuple[int, list[tuple[int, int, int, int]],
                                                   tuple[int, int] | None] | None:
    """The page, boxes and page size OCR recorded for a passage (``metadata['ocr']``): one
    block's ``bbox``, or the ``boxes`` of a passage made of several; None if it was not read
    by OCR."""
    ocr = metadata.get("ocr")
    if not isinstance(ocr, dict) or not isinstance(ocr.get("page"), int):
        return None
    raw = ocr.get("boxes") or ([ocr["bbox"]] if ocr.get("bbox") else [])
    boxes = [tuple(int(v) for v in b) for b in raw
             if isinstance(b, list | tuple) and len(b) == 4]
    size = ocr.get("page_size")
    page_size = (int(size[0]), int(size[1])) if isinstance(size, list) and len(size) == 2 else None
    return int(ocr["page"]), boxes, page_size  # type: ignore[return-value]


def _page(conn: psycopg.Connection, info: CollectionInfo, version_pk: int, passage: Passage,
          filters: Filters, snapshot: SnapshotInfo) -> PageRegion | None:
    region = ocr_region(passage.metadata)
    if region is None:
        return None
    page, boxes, size = region
    withheld = page_withheld(conn, info, version_pk, page, filters, snapshot)
    return PageRegion(page=page, boxes=boxes, width=size[0] if size else None,
                      height=size[1] if size else None, image=withheld is None,
                      withheld=withheld)


def page_withheld(conn: psycopg.Connection, info: CollectionInfo, version_pk: int, page: int,
                  filters: Filters, snapshot: SnapshotInfo) -> str | None:
    """Why page ``page`` of a version may not be shown under ``filters`` (None: it may)."""
    if not has_page_image(conn, info, version_pk, page):
        return "no image of this page is stored (it was ingested before pgcite kept them)"
    f, params = _compiled(info, snapshot, filters)
    row = conn.execute(_PAGE_HIDDEN.format(s=info.schema_id, f=f),
                       {**params, "v": version_pk, "page": str(page)}).fetchone()
    if row and row[0]:
        return "the page also holds text outside what this view may show"
    return None


def cited_page(conn: psycopg.Connection, info: CollectionInfo, readable: SnapshotInfo,
               citation_id: str, *, filters: Filters) -> StoredPage:
    """The page image of ``citation_id``, if :func:`open_citation` would show it."""
    source = open_citation(conn, info, readable, citation_id, filters=filters, cited=None,
                           neighbours=0)
    if source.page is None or not source.page.image:
        reason = source.page.withheld if source.page else "the passage was not read from a scan"
        raise PassageNotFound(f"no page image for {citation_id!r}: {reason}")
    version_pk = _version_of(conn, info, readable, citation_id)
    stored = page_image(conn, info, version_pk, source.page.page)
    assert stored is not None  # page_withheld found it
    return stored
