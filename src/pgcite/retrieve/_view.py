"""One request's collection: the snapshot it reads and the models it uses, resolved once.

A request (a search, an answer with its self-check re-searches, a gate evaluation) builds one
:class:`SearchView` and passes it down. Every sub-search of a staged search -- decomposition's
sub-queries, HyDE's passage, the route's tilted weights -- and every re-search of an answer runs
through it, so all of them read the same snapshot and embed with that snapshot's model, even if an
activation moves the active pointer (or switches the model) mid-request.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

from pgcite._errors import EmbedderError
from pgcite.embed._base import Embedder
from pgcite.retrieve._entities import EntityEvidence, boost_hits, entity_evidence, recognise
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._hits import Hit, SearchResult, StageEvent
from pgcite.retrieve._passages import neighbour_passages
from pgcite.retrieve._pipeline import (
    DATE_DEPTH,
    Retrieval,
    StageModels,
    Stages,
    entity_boost_for,
    staged_search,
)
from pgcite.retrieve._search import SearchOptions, embed_search_query, run_embedded
from pgcite.retrieve._when import asked_periods, overlaps
from pgcite.store._collections import CollectionInfo
from pgcite.store._snapshots import SnapshotInfo

# A pooled connection for one unit of work (the service's is role-scoped; see service/_roles.py)
# Candidates the entity boost reorders (at least): a boost inside top_k = 5 could hardly help.
ENTITY_DEPTH = 50
ConnectionFactory = Callable[[], AbstractContextManager[psycopg.Connection]]


@dataclass(frozen=True)
class SearchView:
    """A collection as one request sees it: ``snapshot``, the ``models`` (the snapshot's
    embedder -- None only when no query needs one -- and the stage models), and where
    connections come from."""

    info: CollectionInfo
    snapshot: SnapshotInfo
    models: StageModels
    connection: ConnectionFactory

    @property
    def embedder(self) -> Embedder | None:
        return self.models.embedder

    def search(
        self,
        query: str,
        *,
        filters: Filters | None = None,
        options: SearchOptions | None = None,
        stages: Stages | Mapping[str, Any] | None = None,
        query_vector: np.ndarray | None = None,
        explain: bool = False,
    ) -> SearchResult:
        """One search of this view's snapshot, with the collection's stages (``stages``
        overrides them for this query)."""
        filters = filters or Filters()
        given = options or SearchOptions()
        requested, options, plan = self.plan(given, stages)
        if plan.date_boost > 0 and asked_periods(query):
            return self._date_boosted(query, filters, given, plan, query_vector, explain)
        weight, why = entity_boost_for(plan, query)
        if weight > 0:  # options as given, unresolved: the route may still tilt the weights
            return self._entity_boosted(query, filters, given, plan, query_vector, explain,
                                        weight=weight, why=why)
        if not plan.active:
            return self.search_once(query, filters=filters, options=options,
                                    query_vector=query_vector, explain=explain)

        def one(text: str, depth: int, vector: np.ndarray | None,
                legs: tuple[float, float] | None) -> SearchResult:
            vector, wanted = self.retrieval(Retrieval(text, depth, vector, legs), query=query,
                                            query_vector=query_vector, requested=requested,
                                            options=options)
            return self.search_once(text, filters=filters, query_vector=vector,
                                    explain=explain, options=wanted)

        return staged_search(one, query, top_k=options.top_k, mode=options.mode, stages=plan,
                             models=self.models, cutoff=filters.cutoff)

    def plan(self, options: SearchOptions | None,
             stages: Stages | Mapping[str, Any] | None,
             ) -> tuple[tuple[float, float] | None, SearchOptions, Stages]:
        """The weights the request asked for (None: the collection's, which a route may tilt),
        the options with the collection's defaults, and the stages that run (the collection's,
        with ``stages`` on top). Shared by the sync and the async search."""
        options = options or SearchOptions()
        plan = Stages.model_validate(self.info.settings.stages).merged(stages)
        return options.weights, options.resolved(self.info.settings), plan

    def retrieval(self, wanted: Retrieval, *, query: str, query_vector: np.ndarray | None,
                  requested: tuple[float, float] | None,
                  options: SearchOptions) -> tuple[np.ndarray | None, SearchOptions]:
        """One staged retrieval's vector (the caller's for the question itself) and options
        (its depth, its route-tilted weights)."""
        vector = query_vector if wanted.vector is None and wanted.text == query else wanted.vector
        weights = self._tilt(requested, wanted.weights)
        return vector, options.model_copy(update={"top_k": wanted.depth, "weights": weights})

    def _entity_boosted(self, query: str, filters: Filters, options: SearchOptions,
                        plan: Stages, query_vector: np.ndarray | None, explain: bool, *,
                        weight: float, why: str | None) -> SearchResult:
        """The search with the entity boost on fused scores: the candidates are fetched at
        least ENTITY_DEPTH deep (so there is something to reorder), the first ENTITY_DEPTH
        boosted and re-sorted, then cut to top_k. ``why``: the router's reason when it chose
        the boost ("auto"); then a query that names no known entity leaves no trace (nothing
        was asked for), while a boost set by hand says it was skipped."""
        started = time.perf_counter()
        with self.connection() as conn:
            entities = recognise(conn, self.info, self.snapshot, query, filters)
        rest = plan.model_copy(update={"entity_boost": 0.0})
        if not entities:
            result = self.search(query, filters=filters, options=options, stages=rest,
                                 query_vector=query_vector, explain=explain)
            if why is not None:
                return result
            event = StageEvent(stage="entities", outcome="skipped",
                               detail="the query names no entity the passages know",
                               ms=(time.perf_counter() - started) * 1000)
            return result.model_copy(update={"stages": [*result.stages, event]})
        deep = options.model_copy(update={"top_k": max(options.top_k, ENTITY_DEPTH)})
        result = self.search(query, filters=filters, options=deep, stages=rest,
                             query_vector=query_vector, explain=explain)
        # the first ENTITY_DEPTH are reordered, whatever top_k: the same top 10 for top_k 5 or
        # 500 (as rerank_depth does for the reranker)
        head, tail = result.hits[:ENTITY_DEPTH], result.hits[ENTITY_DEPTH:]
        with self.connection() as conn:
            hits = [*boost_hits(conn, self.info, self.snapshot, head, entities, weight), *tail]
        event = StageEvent(
            stage="entities", outcome="applied",
            detail=(f"router ({why}): " if why else "")
            + f"x(1 + {weight:g} x share) for "
            + ", ".join(f"{e.text!r} -> {e.key} ({e.chunks} passages)" for e in entities),
            ms=(time.perf_counter() - started) * 1000)
        return result.model_copy(update={"hits": hits[: options.top_k],
                                         "stages": [*result.stages, event]})

    def _date_boosted(self, query: str, filters: Filters, options: SearchOptions,
                      plan: Stages, query_vector: np.ndarray | None,
                      explain: bool) -> SearchResult:
        """The search with the date boost: the candidates DATE_DEPTH deep, those dated in a
        period the question names times (1 + date_boost), re-sorted, cut to top_k. When none is
        dated in it, the search as without the boost (the deeper list is not used, so an
        undated collection gets exactly its usual hits)."""
        started = time.perf_counter()
        periods = asked_periods(query)
        rest = plan.model_copy(update={"date_boost": 0.0})
        top_k = options.top_k
        deep = options.model_copy(update={"top_k": max(top_k, DATE_DEPTH)})
        result = self.search(query, filters=filters, options=deep, stages=rest,
                             query_vector=query_vector, explain=explain)
        inside = [overlaps(periods, h.date_start, h.date_end) for h in result.hits]
        if not any(inside):
            return self.search(query, filters=filters, options=options, stages=rest,
                               query_vector=query_vector, explain=explain)
        factor = 1 + plan.date_boost
        order = sorted(range(len(result.hits)),
                       key=lambda i: -result.hits[i].score * (factor if inside[i] else 1.0))
        hits = [result.hits[i].model_copy(update={
                    "rank": n + 1, "score": result.hits[i].score * (factor if inside[i] else 1)})
                for n, i in enumerate(order[:top_k])]
        event = StageEvent(
            stage="dates", outcome="applied",
            detail=f"x{factor:g} for {sum(inside)} of the top {len(inside)} dated in "
                   + ", ".join(f"{a.isoformat()}..{b.isoformat()}" for a, b in periods),
            ms=(time.perf_counter() - started) * 1000)
        return result.model_copy(update={"hits": hits, "stages": [*result.stages, event]})

    def entity_evidence(self, question: str, *, filters: Filters | None = None,
                        prefer: Sequence[str] = (), limit: int = 5,
                        citations: int = 2) -> EntityEvidence | None:
        """For a who/where/how-often question (:func:`pgcite.retrieve._route.entity_ask`),
        what this view's snapshot says under ``filters``, exactly as a search would see it:
        the question's anchor entity, the entities of the asked kind named with it (ranked by
        passages, each with ``citations`` ids of passages naming both, ``prefer``'s first) and
        those passages (None: no such question, or no entity of it known)."""
        with self.connection() as conn:
            return entity_evidence(conn, self.info, self.snapshot, question,
                                   filters=filters or Filters(), prefer=prefer, limit=limit,
                                   citations=citations)

    def neighbours(self, passage_ids: Sequence[str], *, filters: Filters | None = None,
                   n: int = 1) -> dict[str, list[Hit]]:
        """For each of ``passage_ids``, the passages up to ``n`` before and after it in its
        document, in document order, from this view's snapshot and within ``filters`` exactly
        as a search sees them (:func:`pgcite.retrieve._passages.neighbour_passages`). They are
        hits no search ranked: score 0, rank 0 (the caller places them)."""
        with self.connection() as conn:
            found = neighbour_passages(conn, self.info, self.snapshot, list(passage_ids),
                                       neighbours=n, filters=filters)
        return {target: [Hit(**p.model_dump(exclude={"ordinal"}), score=0.0, rank=0)
                         for p in passages] for target, passages in found.items()}

    def searcher(
        self,
        *,
        filters: Filters | None = None,
        options: SearchOptions | Mapping[str, Any] | None = None,
        stages: Stages | Mapping[str, Any] | None = None,
    ) -> Callable[..., SearchResult]:
        """A search function bound to this view and a request's filters, options and stages,
        for callers that take one (the answer pipeline, its self-checks): ``fn(query, *,
        top_k=None, filters=None)``; ``filters`` given to ``fn`` replace the bound ones."""
        base_filters, base_options = filters or Filters(), SearchOptions.coerce(options)

        def search(query: str, *, top_k: int | None = None,
                   filters: Filters | None = None) -> SearchResult:
            wanted = (base_options if top_k is None
                      else base_options.model_copy(update={"top_k": top_k}))
            return self.search(query, filters=filters or base_filters, options=wanted,
                               stages=stages)

        return search

    def search_once(
        self,
        query: str,
        *,
        filters: Filters,
        options: SearchOptions,
        query_vector: np.ndarray | None = None,
        explain: bool = False,
    ) -> SearchResult:
        """One plain search (no stages) of this view's snapshot."""
        # embedded before the connection is taken, never while holding it (embed_search_query)
        embedded = embed_search_query(self.query_embedder(options, query_vector), query, options,
                                      query_vector)
        with self.connection() as conn:
            return run_embedded(conn, self.info, self.snapshot, query, filters=filters,
                                options=options, explain=explain, embedded=embedded)

    def query_embedder(self, options: SearchOptions,
                       query_vector: np.ndarray | None) -> Embedder | None:
        """The model that embeds the query (None: keyword mode, or a vector given), after
        checking that the vector will match the snapshot's dimensions."""
        embedder = None if options.mode == "keyword" or query_vector is not None else (
            self.embedder)
        self._check_query_dim(embedder, query_vector)
        return embedder

    def _tilt(self, requested: tuple[float, float] | None,
              route: tuple[float, float] | None) -> tuple[float, float] | None:
        """The leg weights of one retrieval: weights given with the request win; otherwise the
        route tilts the collection's weights (for the default 1:1, to the route's own)."""
        if requested is not None or route is None:
            return requested or self.info.settings.weights
        base = self.info.settings.weights
        return (base[0] * route[0], base[1] * route[1])

    def _check_query_dim(self, embedder: Embedder | None,
                         query_vector: np.ndarray | None) -> None:
        snapshot = self.snapshot
        dim = embedder.spec.dim if embedder is not None else (
            int(np.asarray(query_vector).size) if query_vector is not None else None)
        if dim is not None and dim != snapshot.embed_dim:
            raise EmbedderError(
                f"the query vector has {dim} dimensions but snapshot {snapshot.snapshot_id} "
                f"holds {snapshot.embed_dim}-dim vectors from {snapshot.embed_model}",
                hint="embed the query with the snapshot's model (leave query_vector unset)",
            )
