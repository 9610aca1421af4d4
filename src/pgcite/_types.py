"""The types every layer shares: what loaders produce and the chunker consumes (documents,
units, chunk drafts), the retrieval modes and fusions (the gate's settings: _gate_settings.py).

This module imports nothing of pgcite's but ``_modes``: store, retrieve and the lifecycle meet
here instead of importing each other.

A :class:`Document` is one source document (a diary entry, a file, a JSONL record) made of one or
more natural :class:`Unit` s (the entry itself, a Markdown section, a PDF page). Units never share a
chunk: a chunk belongs to exactly one unit, so it carries exactly one date and one locator.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# The retrieval modes and fusions, re-exported: spelled out in _modes, which the CLI's help reads
# without loading pydantic's models.
from pgcite._modes import DEFAULT_FUSION as DEFAULT_FUSION
from pgcite._modes import FUSIONS as FUSIONS
from pgcite._modes import MODES as MODES
from pgcite._modes import Fusion as Fusion
from pgcite._modes import Mode as Mode
from pgcite._modes import parse_fusion as parse_fusion
from pgcite._modes import parse_mode as parse_mode

# What the embedder reads before a chunk's body: its title (``off``), or a one-line header of its
# document context -- title, locator, dates, author (``header``). The stored body never changes.
Contextual = Literal["off", "header", "llm"]

# The metadata keys units set (OCR region and confidence, an HTML figure): chunks carry them
# beside the document's metadata, so they are not document metadata when read back.
UNIT_METADATA_KEYS: frozenset[str] = frozenset({"ocr", "figure"})


class PageImage(BaseModel):
    """A scanned page as stored with its document (downscaled, re-encoded: ingest's
    ``_page_images``), with the size of the image OCR read, whose coordinates its boxes use."""

    model_config = ConfigDict(frozen=True)

    media_type: str
    width: int
    height: int
    ocr_width: int
    ocr_height: int
    data: bytes = Field(repr=False)


class OcrPage(BaseModel):
    """How one page read by OCR: reported per page, so a poor or empty one is never silent."""

    model_config = ConfigDict(frozen=True)

    page: int
    confidence: float | None  # mean word confidence 0-100; None when no word was recognised
    words: int
    low: bool  # below ``_ocr.LOW_CONFIDENCE``, or nothing recognised
    error: str | None = None  # why the page was not read (OCR unavailable here)
    blank: bool = False  # no ink on it: not sent to Tesseract (``_ocr.is_blank``)
    # The page as read, to store with the document (None: not kept, or not read).
    image: PageImage | None = Field(default=None, exclude=True, repr=False)


class Unit(BaseModel):
    """A natural unit of a document: the smallest thing that has its own date and locator."""

    model_config = ConfigDict(frozen=True)

    text: str
    title: str | None = None
    locator: str | None = None  # page number, section path, record ordinal …
    date_start: dt.date | None = None
    date_end: dt.date | None = None  # = date_start unless the unit covers a range
    # Per-unit facts its chunks carry in their metadata (OCR confidence and region). Left out of
    # dumps when empty, so content hashes of documents without any stay as they were.
    metadata: dict[str, Any] = Field(default_factory=dict, exclude_if=lambda v: not v)


class Document(BaseModel):
    """One source document with the fields every chunk of it inherits."""

    model_config = ConfigDict(frozen=True)

    document_id: str = Field(min_length=1)
    source: str  # file name or edition
    units: list[Unit]
    title: str | None = None
    author: str | None = None
    corpus: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Where each field came from (``ingest._provenance``: "flag", "catalogue", "map", "file",
    # "heading", "name", "timestamp"), keyed by field ("dates", "title", "author", "corpus") or
    # "metadata.KEY": what the user gave stays on a re-ingest. Not content: excluded from dumps,
    # so it leaves version hashes as they were.
    provenance: dict[str, str] = Field(default_factory=dict, exclude=True)
    # How each OCR-read page read (``_ocr.OcrPage``), for the ingest report's low-confidence
    # list. Not content either: the text it produced is in the units.
    ocr_pages: list[OcrPage] = Field(default_factory=list, exclude=True)


class ChunkDraft(BaseModel):
    """A chunk before it is embedded and stored: the unit of citation."""

    model_config = ConfigDict(frozen=True)

    id: str  # stable citation id, e.g. pepys-entry-1666-9-12-a
    document_id: str
    ordinal: int  # position within the document, from 0
    body: str
    title: str | None
    locator: str | None
    date_start: dt.date | None
    date_end: dt.date | None
    author: str | None
    corpus: str | None
    source: str
    citation: str  # caption-ready string
    metadata: dict[str, Any]
    context: str | None = None  # the LLM's situating sentence (contextual = "llm")
