"""Ingest: load sources, chunk them by natural unit, embed, store as a snapshot."""

from typing import TYPE_CHECKING

from pgcite._lazy import lazy_exports
from pgcite._types import ChunkDraft, Document, Unit
from pgcite.ingest._loaders import SUPPORTED_SUFFIXES, FieldMapping, Overrides, iter_documents
from pgcite.ingest._pipeline import Failure, IngestReport, ingest
from pgcite.ingest._provenance import FieldChange

if TYPE_CHECKING:
    from pgcite.ingest._reembed import reembed

__getattr__ = lazy_exports(__name__, {"reembed": "._reembed"})

__all__ = [
    "SUPPORTED_SUFFIXES", "ChunkDraft", "Document", "Failure", "FieldChange", "FieldMapping",
    "IngestReport", "Overrides", "Unit", "ingest", "iter_documents", "reembed",
]
