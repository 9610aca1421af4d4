"""Request and response bodies of the HTTP API, with the input limits enforced at the boundary.

Every string in a request is checked to be valid UTF-8 without NUL (PostgreSQL stores neither),
lists and lengths are bounded, and filters are flat (no nesting: the only structure is a list of
metadata predicates), so a malformed request is a 422 before any work is done. The rules are
pgcite/_inputs.py's, the same for every surface.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from pgcite import Filters, MetadataPredicate, Mode, StageEvent
from pgcite._inputs import (
    MAX_ENTITIES,
    MAX_IN_VALUES,
    MAX_PREDICATES,
    Finite,
    Name,
    Names,
    QueryText,
    Scalar,
)
from pgcite.retrieve import DEFAULT_SNIPPETS, merge_filters

MAX_TOP_K = 100
SnapshotQuery = Annotated[int | None, Query(
    ge=1, le=2**31 - 1, description="a snapshot id (default: the active one); a snapshot that "
    "is not active needs an admin key")]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PredicateBody(_Body):
    """A metadata predicate: ``{"key": "year", "op": "gte", "value": 1665}``."""

    key: Name
    op: Literal["eq", "in", "lt", "lte", "gt", "gte", "exists"] = "eq"
    value: Scalar | Annotated[list[Scalar], Field(max_length=MAX_IN_VALUES)] | None = None


class FiltersBody(_Body):
    """Hard filters, applied in SQL: every field narrows, none widens."""

    corpora: Names | None = None
    cutoff: dt.date | None = None
    authors: Names | None = None
    sources: Names | None = None
    metadata: Annotated[list[PredicateBody], Field(max_length=MAX_PREDICATES)] = Field(
        default_factory=list)
    entity: Annotated[list[Name], Field(max_length=MAX_ENTITIES)] | None = Field(
        default=None, description="only passages that mention all these entities (any "
        "spelling the collection's aliases know), e.g. [\"Sir W. Penn\"]")


class BoostBody(_Body):
    """``{"kind": "field", "field": "corpus", "equals": "A", "multiplier": 1.5}`` or
    ``{"kind": "recency", "half_life_days": 365}``: applied to fused scores."""

    kind: Literal["field", "recency"]
    field: Name | None = None
    equals: Scalar | Annotated[list[Scalar], Field(max_length=100)] | None = None
    multiplier: float | None = Field(default=None, gt=0, le=100)
    half_life_days: float | None = Field(default=None, gt=0, le=1e6)
    floor: float | None = Field(default=None, ge=0, le=1)


class StagesBody(_Body):
    """Per-request overrides of the collection's optional stages (null = its setting)."""

    route: bool | None = None
    route_llm: bool | None = None
    decompose: bool | None = None
    hyde: bool | None = None
    rerank: bool | None = None
    rerank_depth: int | None = Field(default=None, ge=1, le=200)
    boosts: Annotated[list[BoostBody], Field(max_length=10)] | None = None
    entity_boost: Annotated[float, Field(ge=0, le=10)] | Literal["auto"] | None = Field(
        default=None, description="auto: the router boosts entity questions; a number: that "
        "weight on every question (0: off)")
    date_boost: float | None = Field(
        default=None, ge=0, le=10, description="passages dated in the month or year the "
        "question names: fused score times 1 + this (0: off)")


class SelfCheckBody(_Body):
    """Self-correcting steps of an answer (need an LLM configured on the server)."""

    grade: bool = False
    corrective: bool = False
    sufficiency: bool = False
    budget_s: float = Field(default=30.0, gt=0, le=120)


class QueryBody(_Body):
    mode: Mode = "hybrid"
    top_k: int = Field(default=5, ge=1, le=MAX_TOP_K)
    cutoff: dt.date | None = Field(default=None, description="only passages dated on or before")
    corpora: Names | None = None
    filters: FiltersBody | None = None
    rerank: bool | None = Field(
        default=None, description="shorthand for stages.rerank (needs a reranker configured "
        "on the server, else the stage reports 'skipped')")
    stages: StagesBody | None = None
    snapshot: int | None = Field(
        default=None, ge=1, le=2**31 - 1, description="query this snapshot instead of the "
        "active one; a snapshot that is not active needs an admin key")

    def stage_overrides(self) -> dict[str, Any] | None:
        """The request's overrides of the collection's stage settings."""
        overrides = self.stages.model_dump(exclude_none=True) if self.stages else {}
        if self.rerank is not None:
            overrides.setdefault("rerank", self.rerank)
        return overrides or None

    def to_filters(self) -> Filters:
        """The body's filters, with ``cutoff``/``corpora`` shorthands merged in (they narrow)."""
        base = self.filters or FiltersBody()
        # merge_filters: a value Filters refuses (an entity that is only a title) is a
        # FilterError, a 400 -- never pydantic's exception, a 500
        return merge_filters(dict(
            corpora=self.corpora if self.corpora is not None else base.corpora,
            cutoff=_earliest(self.cutoff, base.cutoff),
            authors=base.authors, sources=base.sources,
            metadata=[MetadataPredicate(key=p.key, op=p.op, value=p.value)
                      for p in base.metadata],
            entity=base.entity,
        ), None, None, None)


def _earliest(a: dt.date | None, b: dt.date | None) -> dt.date | None:
    return min(a, b) if a and b else (a or b)


class SearchBody(QueryBody):
    query: QueryText
    # bool first: true stays true (every hit), not the number 1
    snippets: bool | Annotated[int, Field(ge=0, le=MAX_TOP_K)] = Field(
        default=DEFAULT_SNIPPETS, description=(
            "how many of the first hits get a snippet with highlights: a number, true for "
            f"every hit, false for none (default {DEFAULT_SNIPPETS}: a snippet costs a parse of "
            "the whole passage)"))


class AnswerBody(QueryBody):
    question: QueryText
    token_budget: int = Field(default=4000, ge=100, le=16000)
    threshold: Annotated[Finite, Field(ge=-1, le=1)] | None = Field(
        default=None, description="abstain below this best cosine similarity")
    generator: Literal["extractive"] | None = Field(
        default=None, description="force the extractive generator; null = the server's")
    self_check: SelfCheckBody | None = None
    entity_facts: bool = Field(default=True, description=(
        "for who/where/how-often questions, state the entity graph's facts (people or places "
        "named with the question's entity, citing passages that name both) before the quotes; "
        "they are in the answer's `entities`"))
    neighbours: int | None = Field(default=None, ge=0, le=5, description=(
        "give the answerer, after each retrieved passage, this many passages before and after "
        "it in its document, within the same filters (null: the default, 1; 0: none)"))
    stream: bool = Field(default=False, description=(
        "answer as server-sent events: `delta` events with text as it is generated, then one "
        "`final` event with the checked answer (docs/http-api.md, 'Streamed answers')"))


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, serialize_by_alias=True,
                              validate_by_name=True)


class SearchHit(_Camel):
    id: str
    rank: int
    citation: str
    source: str | None
    locator: str | None
    title: str | None
    author: str | None
    corpus: str | None
    date: str | None
    date_end: str | None
    score: float
    distance: float | None
    keyword_rank: int | None
    vector_rank: int | None
    text: str
    metadata: dict[str, Any]
    snippet: str | None = Field(default=None, description="a window of text around the "
                                "words that matched")
    highlights: list[tuple[int, int]] = Field(
        default_factory=list, description="[start, end) of each matched word in snippet, in "
        "Unicode code points")


class SearchResponse(_Camel):
    query: str
    mode: str
    collection: str
    snapshot_id: int
    embedding_model: str
    confidence: float | None
    hits: list[SearchHit]
    timings_ms: dict[str, float]
    stages: list[StageEvent] = Field(default_factory=list)
    undated_excluded: int | None = Field(
        default=None, description="with a cutoff: undated passages it left out")


class CollectionOut(_Camel):
    name: str
    language: str
    embedding_model: str
    persona_author: str | None
    active_snapshot: int | None


class SnapshotOut(_Camel):
    snapshot_id: int
    state: str
    active: bool
    embedding_model: str
    corpus_version: str | None
    created_at: dt.datetime
    documents: int | None
    chunks: int | None
    note: str | None
    evaluation: dict[str, Any] | None


class ActivationOut(_Camel):
    collection: str
    active_snapshot: int
    previous_snapshot: int | None


class UploadOut(_Camel):
    collection: str
    snapshot_id: int | None
    activated: bool
    files: list[str]
    report: dict[str, Any]


class ErrorItem(BaseModel):
    """One validation error: where and which rule (never the value that broke it)."""

    loc: list[str | int]
    msg: str
    type: str


class ErrorOut(BaseModel):
    detail: str
    hint: str | None = None
    errors: list[ErrorItem] | None = Field(
        default=None, description="422 only: the first 10 validation errors")
