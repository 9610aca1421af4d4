"""What every retriever adapter shares: the search a retriever runs and the metadata each passage
carries, so LangChain and LlamaIndex see the same passages described the same way."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pgcite import Collection, Filters, Hit, MetadataPredicate, Mode, SearchResult
from pgcite.retrieve import merge_filters


class SearchParams(BaseModel):
    """The ``Collection.search`` arguments a retriever fixes for every query it runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    top_k: int = Field(default=5, ge=1, le=1000)
    mode: Mode = "hybrid"
    cutoff: dt.date | None = Field(
        default=None, description="hard: no passage dated after it is ever returned")
    corpora: list[str] | None = None
    metadata: list[MetadataPredicate] = Field(default_factory=list)
    filters: Filters | None = None
    snapshot_id: int | None = Field(default=None, description="None: the active snapshot")
    stages: dict[str, Any] | None = None


def run(collection: Collection, query: str, params: SearchParams) -> SearchResult:
    """One ``Collection.search`` call with the retriever's parameters (no other search path)."""
    return collection.search(
        query, top_k=params.top_k, mode=params.mode,
        filters=merge_filters(params.filters, params.cutoff, params.corpora,
                              params.metadata or None),
        snapshot_id=params.snapshot_id, stages=params.stages,
        snippets=False,  # a retriever hands over passages; nobody reads a snippet
    )


def _iso(day: dt.date | None) -> str | None:
    return day.isoformat() if day is not None else None


def hit_metadata(hit: Hit, result: SearchResult) -> dict[str, Any]:
    """A passage's metadata as plain JSON values: the citation id first (``citation_id``, the id
    an answer must cite), dates as ISO strings, every score, and the document's own metadata
    under ``fields`` so that no document key can shadow one of pgcite's."""
    return {
        "citation_id": hit.id,
        "citation": hit.citation,
        "document_id": hit.document_id,
        "collection": result.collection,
        "snapshot_id": result.snapshot_id,
        "author": hit.author,
        "corpus": hit.corpus,
        "date": _iso(hit.date_start),
        "date_end": _iso(hit.date_end),
        "date_start": _iso(hit.date_start),  # the name before: kept for existing filters
        "source": hit.source,
        "locator": hit.locator,
        "title": hit.title,
        "score": hit.score,
        "rank": hit.rank,
        "keyword_rank": hit.keyword_rank,
        "keyword_score": hit.keyword_score,
        "vector_rank": hit.vector_rank,
        "vector_distance": hit.vector_distance,
        "fields": dict(hit.metadata),
    }
