"""Where each of a document's fields came from, and which value a re-ingest keeps.

Nothing changes without the user's word. A value the user gave -- a flag (``--date``,
``--author``, ``--corpus``), a catalogue row, a JSONL key chosen with ``--map`` -- stays until
the user gives another; a value read from inside a file (front matter, HTML or PDF metadata, a
JSONL record's own keys, a heading, a date in the file name) never replaces it. Between values
read from files the one of the higher source wins, as within one run (:data:`RANK`): an edited
front matter date replaces the old one, a heading never replaces a front matter title.

Every version records its document-level values and their sources (``versions.provenance``), so
a later run can tell a catalogue's date from a PDF's own and report, per document, what changed:
``date 1851-05-02 -> 1851-06-01 (catalogue)``. Versions stored before provenance was recorded
have values but no sources; for them a re-run keeps a stored value only where it gives none
(what pgcite did before).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Literal

import psycopg
from pydantic import BaseModel

from pgcite._types import UNIT_METADATA_KEYS, Document
from pgcite.ingest._dates import DateRange
from pgcite.store._collections import CollectionInfo
from pgcite.store._snapshots import document_attributes

Source = Literal["flag", "catalogue", "map", "file", "heading", "name", "timestamp"]
# Precedence, lowest first: a file's timestamp (only with --dates-from-timestamps), a date or
# title from its name, a heading, what the file says about itself, then the user's sources.
RANK: dict[str, int] = {"timestamp": 0, "name": 1, "heading": 2, "file": 3, "map": 4,
                        "catalogue": 5, "flag": 6}
USER_SOURCES = frozenset({"map", "catalogue", "flag"})
FIELDS = ("dates", "title", "author", "corpus")
# The user-facing name of each field (one name for a document's date on every surface).
LABELS = {"dates": "date", "title": "title", "author": "author", "corpus": "corpus"}
METADATA = "metadata."  # provenance key prefix of a metadata key
MAPPED = "mapped."  # provenance key prefix of the JSONL key --map chose for a field


class Stored(BaseModel):
    """What the live version of a document says: its fields, and where each came from (``None``
    for a version stored before sources were recorded)."""

    dates: DateRange | None = None
    title: str | None = None
    author: str | None = None
    corpus: str | None = None
    metadata: dict[str, Any] = {}
    sources: dict[str, str] | None = None
    # False where the value cannot be known (an old version's title, read from a chunk that a
    # heading titled): never kept, never reported as changed
    title_known: bool = True


class FieldChange(BaseModel):
    """One field of one document that this ingest changes."""

    document_id: str
    field: Literal["date", "title", "author", "corpus"]
    old: str | None
    new: str | None
    source: str | None  # where the new value came from (None: it was cleared by nothing)


def document_dates(doc: Document) -> DateRange | None:
    """The document's dates when all its units share one range, else ``None``."""
    ranges = {(u.date_start, u.date_end or u.date_start) for u in doc.units}
    if len(ranges) != 1:
        return None
    start, end = ranges.pop()
    return (start, end) if start is not None and end is not None else None


def record(doc: Document) -> dict[str, Any]:
    """The JSON a version stores: the document-level values and their sources."""
    dates = document_dates(doc)
    return {
        "dates": [d.isoformat() for d in dates] if dates is not None else None,
        "title": doc.title, "author": doc.author, "corpus": doc.corpus,
        "metadata": doc.metadata, "sources": dict(sorted(doc.provenance.items())),
    }


def from_record(data: dict[str, Any]) -> Stored:
    """A version's stored provenance (:func:`record`) read back."""
    dates = data.get("dates")
    return Stored(
        dates=(dt.date.fromisoformat(dates[0]), dt.date.fromisoformat(dates[1])) if dates
        else None,
        title=data.get("title"), author=data.get("author"), corpus=data.get("corpus"),
        metadata=data.get("metadata") or {}, sources=dict(data.get("sources") or {}),
    )


def _keeps_stored(new: str | None, old: str | None, legacy: bool, has_old: bool) -> bool:
    """Whether the stored value stays over this run's (``new``/``old``: their sources)."""
    if new in USER_SOURCES:
        return False  # the user's word now
    if new is None:
        return has_old  # this run says nothing: what was stored stays
    if legacy or old is None:
        return False  # an old version (no sources) or a value of no known source
    return old in USER_SOURCES or RANK[new] < RANK[old]


def settle(doc: Document, stored: Stored) -> Document:
    """``doc`` with the stored values that this run may not replace (see the module doc)."""
    legacy = stored.sources is None
    old_sources = stored.sources or {}
    update: dict[str, Any] = {}
    sources = dict(doc.provenance)
    for field in FIELDS:
        old_value = getattr(stored, field)
        # a cleared title, author or corpus is a value too (None, given by a flag); a date
        # is never cleared, and the dates of a document whose units differ are not kept
        has_old = old_value is not None or (field != "dates" and field in old_sources)
        if field == "title" and not stored.title_known:
            continue
        if field == "title" and legacy and doc.provenance.get("title") == "name" \
                and all(u.title is None for u in doc.units):
            new_source: str | None = None  # before: a stored title replaced a file-name one
        else:
            new_source = doc.provenance.get(field)
        if not _keeps_stored(new_source, old_sources.get(field), legacy, has_old):
            continue
        update[field] = old_value
        for name in (field, MAPPED + field):
            if name in old_sources:
                sources[name] = old_sources[name]
            else:
                sources.pop(name, None)
    metadata = dict(doc.metadata)
    for field in FIELDS:  # a kept --map value: its key is the field's, not metadata
        if (key := sources.get(MAPPED + field)) is not None and key in metadata \
                and doc.provenance.get(MAPPED + field) is None:
            del metadata[key]
            sources.pop(METADATA + key, None)
    for key in stored.metadata:
        name = METADATA + key
        new_source = doc.provenance.get(name) if key in doc.metadata else None
        if not _keeps_stored(new_source, old_sources.get(name), legacy, True):
            continue
        metadata[key] = stored.metadata[key]
        if name in old_sources:
            sources[name] = old_sources[name]
    if metadata != doc.metadata:
        update["metadata"] = metadata
    if not update and sources == doc.provenance:
        return doc
    return _with(doc, update, sources)


def _with(doc: Document, update: dict[str, Any], sources: dict[str, str]) -> Document:
    fields: dict[str, Any] = {k: v for k, v in update.items() if k != "dates"}
    if "dates" in update:
        start, end = update["dates"] if update["dates"] is not None else (None, None)
        fields["units"] = [u.model_copy(update={"date_start": start, "date_end": end})
                           for u in doc.units]
    if "title" in fields:
        # The text before a first heading carries the document's title: it follows.
        units = fields.get("units", doc.units)
        fields["units"] = [u.model_copy(update={"title": fields["title"]})
                           if u.locator is None and u.title is not None and u.title == doc.title
                           else u for u in units]
    return doc.model_copy(update={**fields, "provenance": sources})


def changes(doc: Document, stored: Stored) -> list[FieldChange]:
    """The fields this ingest changes of a document the live snapshot holds."""
    out: list[FieldChange] = []
    for field in FIELDS:
        if field == "title" and not stored.title_known:
            continue
        old = getattr(stored, field)
        new = document_dates(doc) if field == "dates" else getattr(doc, field)
        if old != new:
            out.append(FieldChange(
                document_id=doc.document_id, field=LABELS[field],  # type: ignore[arg-type]
                old=_text(old), new=_text(new), source=doc.provenance.get(field)))
    return out


def _text(value: Any) -> str | None:
    """A field's value as a report shows it: a date range as ``start/end`` (one day: the day)."""
    if isinstance(value, tuple):
        start, end = value
        return start.isoformat() if start == end else f"{start.isoformat()}/{end.isoformat()}"
    return None if value is None else str(value)


def stored_documents(conn: psycopg.Connection, info: CollectionInfo, snapshot_id: int,
                     document_ids: Sequence[str]) -> dict[str, Stored]:
    """What the versions of these documents in a snapshot recorded (documents it lacks are
    left out). A version stored before provenance was recorded is read from its chunks."""
    rows = document_attributes(conn, info, snapshot_id, document_ids)
    return {doc: from_record(row["provenance"]) if row["provenance"] is not None
            else _from_chunks(row) for doc, row in rows.items()}


def _from_chunks(row: dict[str, Any]) -> Stored:
    """An old version's fields, as its first chunk carries them: its title is the document's
    unless that chunk is a section (titled by its heading path, which is also its locator); the
    keys its unit added to the metadata (an OCR region, a figure) are not the document's."""
    metadata = {k: v for k, v in (row["metadata"] or {}).items() if k not in UNIT_METADATA_KEYS}
    return Stored(dates=row["dates"], title=row["title"], author=row["author"],
                  corpus=row["corpus"], metadata=metadata,
                  title_known=row["locator"] is None or row["title"] != row["locator"])
