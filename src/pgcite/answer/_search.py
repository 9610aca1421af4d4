"""What the answer pipeline needs from above it, as plain values: a search function already
bound to one snapshot and one set of models, and the few collection settings an answer uses.

The caller (``Collection.answer``) resolves the snapshot once per request and builds both, so
nothing in this package reaches up to the client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from pgcite._types import Mode
from pgcite.retrieve._entities import EntityEvidence
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._hits import Hit, SearchResult


class SearchFn(Protocol):
    """One retrieval over the request's snapshot: query text and per-call knobs in, hits out."""

    def __call__(self, query: str, *, top_k: int, mode: Mode, filters: Filters,
                 stages: Mapping[str, Any] | None) -> SearchResult: ...


class EntityEvidenceFn(Protocol):
    """The entity graph over the same snapshot as the search, under the same filters: for a
    who/where/how-often question, its anchor entity and the entities named with it, each with
    citation ids (``prefer``'s first), or None (:meth:`pgcite.retrieve._view.SearchView.entity_evidence`)."""

    def __call__(self, question: str, *, filters: Filters,
                 prefer: Sequence[str]) -> EntityEvidence | None: ...


class NeighboursFn(Protocol):
    """The passages beside each of ``passage_ids`` in its document (up to ``n`` either side, in
    document order), from the same snapshot as the search and under the same ``filters``:
    a neighbour outside them is never returned (:meth:`pgcite.retrieve._view.SearchView.neighbours`)."""

    def __call__(self, passage_ids: Sequence[str], *, filters: Filters,
                 n: int) -> Mapping[str, list[Hit]]: ...


class AnswerSettings(BaseModel):
    """The collection settings an answer depends on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    persona_author: str | None = None
    # The collection's PostgreSQL text-search configuration: it tells the sentence selector
    # which language's stop words and stemming apply (others get language-neutral words).
    language: str = "english"
    # The collection's fitted answerability models by embedding model (``id@version``), as
    # ``pgcite eval --fit-abstention`` stored them: the one for the snapshot's model decides.
    abstention: dict[str, dict[str, Any]] = Field(default_factory=dict)
