"""Ingest: load sources, chunk them by natural unit, embed, store as a snapshot."""

from pgcite._types import ChunkDraft, Document, Unit
from pgcite.ingest._loaders import FieldMapping, Overrides, iter_documents
from pgcite.ingest._pipeline import IngestReport, ingest
from pgcite.ingest._provenance import FieldChange

__all__ = [
    "ChunkDraft", "Document", "FieldChange", "FieldMapping", "IngestReport", "Overrides", "Unit", "ingest",
    "iter_documents",
]
