"""What a search returns: passages with their citation ids and how each leg ranked them.

JSON is camelCase (:mod:`pgcite._camel`), and a hit's passage text, first day and cosine
distance are ``text``, ``date`` and ``distance`` -- the names of the HTTP API's hits. ``date``
is a passage's or document's first day on every surface (``Hit.date``, ``DocumentInfo.date``,
the MCP tools, the integrations' metadata); ``date_start`` stays as its Python name too.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import AliasChoices, ConfigDict, Field

from pgcite._camel import CAMEL, CamelModel


class Hit(CamelModel):
    """One passage. ``id`` is the stable citation id to cite it by."""

    model_config = ConfigDict(**CAMEL, frozen=True)

    id: str
    document_id: str
    citation: str
    author: str | None
    corpus: str | None
    # JSON names of the HTTP API's hits (read back by these names or the Python ones)
    date_start: dt.date | None = Field(serialization_alias="date",
                                       validation_alias=AliasChoices("date"))
    date_end: dt.date | None
    source: str | None
    locator: str | None
    title: str | None
    body: str = Field(serialization_alias="text", validation_alias=AliasChoices("text"))
    metadata: dict[str, Any] = Field(default_factory=dict)
    score: float = Field(description="fused score (RRF), or the leg's own score in one-leg modes")
    rank: int = Field(description="1-based rank in the returned list")
    keyword_rank: int | None = None
    keyword_score: float | None = Field(default=None, description="BM25 score")
    vector_rank: int | None = None
    vector_distance: float | None = Field(
        default=None, description="cosine distance", serialization_alias="distance",
        validation_alias=AliasChoices("distance"))
    snippet: str | None = Field(default=None, description="a window of the passage around "
                                "the words that matched (None: not computed)")
    highlights: list[tuple[int, int]] = Field(
        default_factory=list, description="[start, end) of each matched word in snippet, "
        "in Unicode code points")

    @property
    def date(self) -> dt.date | None:
        """The passage's first day (JSON ``date``; ``date_start`` is the same)."""
        return self.date_start


class StageEvent(CamelModel):
    """What one optional stage (route, decompose, hyde, boost, rerank) did for this query."""

    model_config = ConfigDict(**CAMEL, frozen=True)

    stage: str
    outcome: Literal["applied", "skipped", "fallback"] = Field(
        description="fallback: the stage failed or ran out of time; its input was kept")
    detail: str
    ms: float = 0.0


class SearchResult(CamelModel):
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
        "answers the query: cosine, coverage, best_coverage, agreement, gap, unknown_names, "
        "terms (docs/answers.md, "
        "\"Abstention\"); empty when nothing was found")
    lexemes: list[str] = Field(
        default_factory=list, description="the query's words as the keyword index reads them "
        "(the lexemes of the collection's text-search config): what the snippets mark; empty "
        "when nothing was found")
    timings_ms: dict[str, float] = Field(default_factory=dict)
    stages: list[StageEvent] = Field(
        default_factory=list, description="the optional stages and what each did")
    undated_excluded: int | None = Field(
        default=None, description="with a cutoff: undated passages it left out (they cannot be "
        "shown to be before it); null without one")
