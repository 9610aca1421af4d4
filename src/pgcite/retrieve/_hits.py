"""What a search returns: passages with their citation ids and how each leg ranked them."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Hit(BaseModel):
    """One passage. ``id`` is the stable citation id to cite it by."""

    model_config = ConfigDict(frozen=True)

    id: str
    document_id: str
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
    score: float = Field(description="fused score (RRF), or the leg's own score in one-leg modes")
    rank: int = Field(description="1-based rank in the returned list")
    keyword_rank: int | None = None
    keyword_score: float | None = Field(default=None, description="BM25 score")
    vector_rank: int | None = None
    vector_distance: float | None = Field(default=None, description="cosine distance")


class StageEvent(BaseModel):
    """What one optional stage (route, decompose, hyde, boost, rerank) did for this query."""

    model_config = ConfigDict(frozen=True)

    stage: str
    outcome: Literal["applied", "skipped", "fallback"] = Field(
        description="fallback: the stage failed or ran out of time; its input was kept")
    detail: str
    ms: float = 0.0


class SearchResult(BaseModel):
    """Hits plus what produced them."""

    query: str
    mode: str
    collection: str
    snapshot_id: int
    embedding_model: str
    hits: list[Hit]
    dropped: list[Hit] = Field(
        default_factory=list, description="candidates a leg found that fusion ranked below top_k"
    )
    confidence: float | None = Field(
        default=None, description="best cosine similarity among candidates (for abstention)"
    )
    signals: dict[str, float | None] = Field(
        default_factory=dict, description="what retrieval knows about whether the collection "
        "answers the query: cosine, coverage, best_coverage, agreement, gap (docs/answers.md, "
        "\"Abstention\"); empty when nothing was found")
    timings_ms: dict[str, float] = Field(default_factory=dict)
    stages: list[StageEvent] = Field(
        default_factory=list, description="the optional stages and what each did")
