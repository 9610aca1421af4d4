"""What one source of metadata says about a file -- its front matter, its HTML ``<meta>``, a row
of a sidecar catalogue, a date in its name, the ``--date`` flag -- and how the sources combine.

Precedence, highest first (applied in that order by the loaders, with :func:`apply`): an
explicit flag (``--date``, ``--author``, ``--corpus``) > the sidecar catalogue > what the file
says itself (front matter, HTML meta/time, PDF metadata, a JSONL record's own keys) > a date in
the file name > the file's timestamp (only when asked for). Each value a source sets is recorded
with that source (``Document.provenance``), which decides what a re-ingest keeps
(``_provenance``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pgcite._types import Document
from pgcite.ingest._dates import DateError, DateRange, parse_dates
from pgcite.ingest._provenance import METADATA, Source

# Keys with a meaning of their own; every other key of a front matter block or catalogue row is
# kept as metadata (searchable with --filter).
DATE_KEYS = ("date", "date_start")
KNOWN_KEYS = frozenset((*DATE_KEYS, "date_end", "title", "author", "corpus"))


class Attributes(BaseModel):
    """Document fields one source gives for a file; ``None`` (or empty) means it does not say."""

    model_config = ConfigDict(frozen=True)

    dates: DateRange | None = None
    title: str | None = None
    author: str | None = None
    corpus: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: Source = "file"  # where these values come from (``_provenance.RANK``)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: Source = "file") -> Attributes:
        """From front matter or a catalogue row; raises ``ValueError`` naming a bad field."""
        start = next((data[k] for k in DATE_KEYS if data.get(k) not in (None, "")), None)
        try:
            dates = parse_dates(start)
            end = parse_dates(data.get("date_end"))
        except DateError as exc:
            raise ValueError(f"bad date: {exc}") from exc
        if end is not None:
            if dates is None:
                raise ValueError("date_end without a date")
            if end[1] < dates[0]:
                raise ValueError(f"date_end {end[1]} is before date {dates[0]}")
            dates = dates[0], end[1]
        return cls(
            dates=dates,
            title=_text(data, "title"), author=_text(data, "author"),
            corpus=_text(data, "corpus"),
            metadata={str(k): jsonable(v) for k, v in data.items()
                      if k not in KNOWN_KEYS and v not in (None, "")},
            source=source,
        )


def _text(data: Mapping[str, Any], key: str) -> str | None:
    """A scalar as text; a list of scalars (``author: [A, B]``) joined; nested data is an error."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        value = "; ".join(str(v) for v in value)
    if isinstance(value, dict | list):
        raise ValueError(f"{key!r} must be text, got {type(value).__name__}")
    return str(value).strip() or None


def jsonable(value: Any) -> Any:
    """YAML values as JSON ones: dates become ISO text, unknown scalars their text."""
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def apply(doc: Document, attrs: Attributes, *, fill: bool = False) -> Document:
    """``doc`` with ``attrs`` laid over it: a higher-precedence source replaces what the document
    says (an empty text clears it); a lower one (``fill``) only fills what it leaves empty (units
    without a date, fields that are ``None``, metadata keys it lacks). Every value it sets is
    recorded in ``provenance`` with ``attrs.source``."""
    units = doc.units
    sources = dict(doc.provenance)
    if attrs.dates is not None:
        start, end = attrs.dates
        units = [u if fill and u.date_start is not None
                 else u.model_copy(update={"date_start": start, "date_end": end})
                 for u in doc.units]
        if units != doc.units:
            sources["dates"] = attrs.source
    update: dict[str, Any] = {"units": units}
    for field in ("title", "author", "corpus"):
        value = getattr(attrs, field)
        if value is not None and not (fill and getattr(doc, field) is not None):
            update[field] = value or None  # a flag given as "" clears the field
            sources[field] = attrs.source
    if "title" in update:
        # The text before a Markdown/HTML document's first heading (no locator) carries the
        # document's title: it takes the new one, not the one a higher source replaced.
        update["units"] = [u.model_copy(update={"title": update["title"]})
                           if u.locator is None and u.title is not None and u.title == doc.title
                           else u for u in update["units"]]
    if attrs.metadata:
        given = [k for k in attrs.metadata if not (fill and k in doc.metadata)]
        sources.update((METADATA + k, attrs.source) for k in given)
        update["metadata"] = ({**attrs.metadata, **doc.metadata} if fill
                              else {**doc.metadata, **attrs.metadata})
    return doc.model_copy(update={**update, "provenance": sources})
