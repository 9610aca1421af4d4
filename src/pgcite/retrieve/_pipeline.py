"""Optional quality stages around one search: route → decompose | HyDE → retrieve → boost →
rerank → top_k.

Every stage is optional (configured per collection, overridable per request), bounded in time,
and can only fall back: a stage that fails or runs late leaves its input unchanged, and the
fallback is written to ``SearchResult.stages``, logged, and counted by the service's metrics.
Stages never touch filters: every retrieval goes through the same ``search`` callable, which
closes over the request's filters, so no stage can bring back a row outside them.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from pgcite._errors import ConfigError
from pgcite._types import Mode
from pgcite.embed._base import Embedder
from pgcite.llm import ChatModel, LLMError, call_bounded
from pgcite.retrieve._boost import BoostRule, apply_boosts
from pgcite.retrieve._decompose import split_heuristic, split_with_llm
from pgcite.retrieve._hits import Hit, SearchResult, StageEvent
from pgcite.retrieve._hyde import hyde_vector
from pgcite.retrieve._rerank import Reranker, RerankError, rerank_hits
from pgcite.retrieve._route import (
    ROUTES,
    Route,
    entity_question,
    heuristic_route,
    route_with_llm,
)

log = logging.getLogger("pgcite.stages")
RRF_K = 60
# Leg weights (keyword, vector) the keyword route gives its questions. The hyde route without
# an LLM searches with the collection's own weights: it had leaned on the vector leg (0.2/0.8),
# which lowered the long questions it catches on the Pepys sets, the held-out ones included
# (nDCG@10 0.600 -> 0.617 without the lean over 94 judged questions, paraphrase 0.272 -> 0.321,
# no kind lower; XQuAD en 0.988 -> 0.989; SciFact's claims never take the route; docs/retrieval.md).
KEYWORD_HEAVY = (0.8, 0.2)
# The entity boost the router gives entity questions (Stages.entity_boost "auto"): on the
# Pepys golden set it lowered no query kind and lifted the who/where set
# (bench/results/entities/report.md).
ROUTE_ENTITY_BOOST = 0.5
# Passages dated in the month or year a question names, among the top DATE_DEPTH: on the Pepys
# golden + extra sets nDCG@10 0.508 -> 0.532, fact 0.535 -> 0.576, paraphrase 0.215 -> 0.248,
# no kind lower; undated collections (XQuAD, SciFact) search exactly as before
# (bench/results/narrative/, docs/retrieval.md).
DATE_BOOST = 0.5
DATE_DEPTH = 50


class StageTimeouts(BaseModel):
    """Seconds each model-backed stage may take before its input is used instead."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    route: float = Field(default=1.5, gt=0, le=60)
    decompose: float = Field(default=2.5, gt=0, le=60)
    hyde: float = Field(default=2.5, gt=0, le=60)
    rerank: float = Field(default=5.0, gt=0, le=120)


class Stages(BaseModel):
    """Which optional stages run: the heuristic router by default, every model-backed stage
    off (bench/README.md has the evidence for each default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # On by default: the model-free router lifted Pepys nDCG@10 0.453 -> 0.492 (every query
    # kind up or level) and left SciFact level at 0.731 (bench/stages.py --no-llm).
    route: bool = Field(default=True, description="heuristic router (microseconds, no model)")
    route_llm: bool = Field(default=False, description="let the router ask the LLM when "
                            "unsure, and run HyDE on the hyde route (needs an LLM)")
    decompose: bool = Field(default=False, description="split multi-concept questions")
    hyde: bool = Field(default=False, description="embed an LLM-written passage, not the question")
    rerank: bool = Field(default=False, description="rerank the top rerank_depth candidates")
    rerank_depth: int = Field(default=50, ge=1, le=1000)
    boosts: list[BoostRule] = Field(default_factory=list, description="applied to fused scores")
    entity_boost: Annotated[float, Field(ge=0, le=10)] | Literal["auto"] = Field(
        default="auto", description="fused scores of passages that mention the entities the "
        "query names, times 1 + this x their idf share (0: off; needs entities stored at "
        "ingest). auto: the router applies ROUTE_ENTITY_BOOST to questions that ask who, "
        "where or how often, or that it routes keyword-heavy, and nothing to the others (a "
        "number applies to every question)")
    date_boost: float = Field(
        default=DATE_BOOST, ge=0, le=10, description="fused scores of passages dated in the "
        "month or year the question names ('in September 1666', '1665'), among the top "
        f"{DATE_DEPTH}, times 1 + this (0: off; a question naming no date, or a collection "
        "with no passage in that time, searches as without it)")
    timeouts: StageTimeouts = Field(default_factory=StageTimeouts)

    def merged(self, overrides: Stages | Mapping[str, Any] | None) -> Stages:
        """These settings with a request's overrides on top (validated like the settings)."""
        if overrides is None:
            return self
        if not isinstance(overrides, (Stages, Mapping)):
            raise ConfigError(f"stage options must be an object, not {type(overrides).__name__}",
                              hint='e.g. {"rerank": true}')
        update = (overrides.model_dump(exclude_unset=True) if isinstance(overrides, Stages)
                  else dict(overrides))
        try:
            return Stages.model_validate({**self.model_dump(), **update})
        except ValueError as exc:
            raise ConfigError(f"bad stage options: {exc}",
                              hint="see docs/retrieval.md, 'Quality stages'") from None

    @property
    def active(self) -> bool:
        return self.route or self.decompose or self.hyde or self.rerank or bool(self.boosts)


def entity_boost_for(stages: Stages, query: str) -> tuple[float, str | None]:
    """The entity boost this query gets and, when the router chose it, why: a number as set
    (every question), or with "auto" and the router on, ROUTE_ENTITY_BOOST for an entity
    question (:func:`entity_question`) and 0 for the others."""
    if stages.entity_boost != "auto":
        return float(stages.entity_boost), None
    why = entity_question(query) if stages.route else None
    return (ROUTE_ENTITY_BOOST, why) if why is not None else (0.0, None)


@dataclass
class StageModels:
    """The models stages may use; a stage whose model is missing is skipped, never faked."""

    chat: ChatModel | None = None
    reranker: Reranker | None = None
    embedder: Embedder | None = None


# search(text, depth, query_vector, weights) → one plain search under the request's filters
SearchFn = Callable[[str, int, np.ndarray | None, tuple[float, float] | None], SearchResult]


@dataclass
class StageRun:
    query: str
    stages: Stages
    models: StageModels
    vector_mode: bool
    events: list[StageEvent] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    weights: tuple[float, float] | None = None
    decompose: bool = False
    hyde: bool = False

    def note(self, stage: str, outcome: str, detail: str, started: float) -> None:
        ms = (time.perf_counter() - started) * 1000
        self.events.append(StageEvent(stage=stage, outcome=outcome,  # type: ignore[arg-type]
                                      detail=detail, ms=ms))
        self.timings[stage] = self.timings.get(stage, 0.0) + ms
        if outcome == "fallback":
            log.warning("stage %s fell back for %r: %s", stage, self.query[:80], detail)


@dataclass(frozen=True)
class Retrieval:
    """One retrieval a staged search makes: its text, depth, vector (None: embed the text, or
    the caller's vector for the question) and leg weights (None: the collection's)."""

    text: str
    depth: int
    vector: np.ndarray | None
    weights: tuple[float, float] | None


def staged_search(search: SearchFn, query: str, *, top_k: int, mode: Mode, stages: Stages,
                  models: StageModels, cutoff: dt.date | None = None) -> SearchResult:
    """One search with the configured stages around it (see module doc). ``search`` and
    ``models`` come from one :class:`~pgcite.retrieve._view.SearchView`: every retrieval here
    reads the same snapshot, and sub-queries are embedded by that snapshot's model.

    The steps are separate functions (:func:`plan_stages`, :func:`stage_retrievals`,
    :func:`combine_retrievals`, :func:`finish_stages`) so that the async search
    (:mod:`pgcite.retrieve._asearch`) runs the same stages and awaits only the retrievals."""
    started = time.perf_counter()
    run, depth = plan_stages(query, mode=mode, stages=stages, models=models, top_k=top_k)
    wanted = stage_retrievals(run, depth)
    if len(wanted) == 1:
        results = [search(wanted[0].text, wanted[0].depth, wanted[0].vector, wanted[0].weights)]
    else:  # decomposition: every query retrieved in parallel
        with cf.ThreadPoolExecutor(max_workers=min(4, len(wanted))) as pool:
            results = list(pool.map(lambda r: search(r.text, r.depth, r.vector, r.weights),
                                    wanted))
    return finish_stages(run, combine_retrievals(results), top_k=top_k, cutoff=cutoff,
                         started=started)


def plan_stages(query: str, *, mode: Mode, stages: Stages, models: StageModels,
                top_k: int) -> tuple[StageRun, int]:
    """The route (the heuristic one is pure; with ``route_llm`` it may ask the LLM, see
    :func:`plan_calls_model`) and the candidate depth each retrieval fetches."""
    run = StageRun(query, stages, models, vector_mode=mode != "keyword",
               decompose=stages.decompose, hyde=stages.hyde)
    if stages.route:
        _route(run)  # with routing on, the route decides on decomposition and HyDE
    depth = max(top_k, stages.rerank_depth) if stages.rerank or stages.boosts else top_k
    return run, depth


def plan_calls_model(stages: Stages, models: StageModels) -> bool:
    """Whether :func:`plan_stages` may call a model (so an event loop must not run it)."""
    return stages.route and stages.route_llm and models.chat is not None


def retrievals_call_model(run: StageRun) -> bool:
    """Whether :func:`stage_retrievals` may call a model (decomposition embeds its
    sub-queries; HyDE asks the LLM and embeds its passage)."""
    return run.decompose or run.hyde


def stage_retrievals(run: StageRun, depth: int) -> list[Retrieval]:
    """What to retrieve: the question, or the question and its concepts (each embedded here),
    or the question with HyDE's vector."""
    if run.decompose:
        concepts = _concepts(run)
        if concepts:
            embedder = run.models.embedder
            return [Retrieval(q, depth, embedder.embed_query(q)
                              if run.vector_mode and embedder is not None else None, run.weights)
                    for q in [run.query, *concepts]]
    vector = _hyde(run) if run.hyde else None
    return [Retrieval(run.query, depth, vector, run.weights)]


def combine_retrievals(results: Sequence[SearchResult]) -> SearchResult:
    """One retrieval's result, or several fused by RRF (decomposition)."""
    first = results[0]
    if len(results) == 1:
        return first
    confidences = [r.confidence for r in results if r.confidence is not None]
    return first.model_copy(update={
        "hits": fuse_lists([r.hits for r in results]),
        "confidence": max(confidences) if confidences else None,
    })


def finish_calls_model(run: StageRun) -> bool:
    """Whether :func:`finish_stages` may call a model (the reranker)."""
    return run.stages.rerank and run.models.reranker is not None


def finish_stages(run: StageRun, result: SearchResult, *, top_k: int, cutoff: dt.date | None,
                  started: float) -> SearchResult:
    """Boosts, the reranker, the cut to ``top_k``, and the stage events and timings."""
    hits = list(result.hits)
    if run.stages.boosts:
        boost_started = time.perf_counter()  # not `started`: that one times the whole search
        hits = apply_boosts(hits, run.stages.boosts, cutoff=cutoff)
        run.note("boost", "applied", f"{len(run.stages.boosts)} rule(s) on fused scores",
                 boost_started)
    if run.stages.rerank:
        hits = _rerank(run, hits)
    hits = [h.model_copy(update={"rank": i + 1}) for i, h in enumerate(hits[:top_k])]
    # "total" is the whole staged search (model calls included), not its first database call
    timings = {**result.timings_ms, **run.timings,
               "total": (time.perf_counter() - started) * 1000}
    return result.model_copy(update={"hits": hits, "stages": run.events, "timings_ms": timings})


def _route(run: StageRun) -> None:
    started = time.perf_counter()
    route = heuristic_route(run.query)
    how = "heuristic"
    llm = run.models.chat if run.stages.route_llm else None
    if not route.sure and llm is not None:
        route, how = _llm_route(run, route)
    # The route decides: decomposition only on the decompose route, HyDE only on the hyde
    # route (and only with route_llm and an LLM), whatever the decompose/hyde flags say.
    run.decompose = route.name == "decompose"
    run.hyde = route.name == "hyde" and llm is not None and run.vector_mode
    if route.name == "keyword":
        run.weights = KEYWORD_HEAVY
    outcome = "fallback" if how.startswith("heuristic (LLM") else "applied"
    detail = f"{route.name} ({how}): {route.reason}"
    if route.name == "hyde" and not run.hyde:  # said as what ran: no HyDE without its model
        why = ("no LLM configured" if run.models.chat is None else "HyDE on this route needs "
               "--route-llm" if not run.stages.route_llm else "no vector leg in this mode")
        detail = f"direct ({how}): {route.reason}; the plain hybrid, not HyDE ({why})"
    run.note("route", outcome, detail, started)
    _note_overruled(run, route.name, started)


def _note_overruled(run: StageRun, route: str, started: float) -> None:
    """A stage that was asked for but that the route left out says so (it is not silent)."""
    if run.stages.hyde and not run.hyde:
        if run.models.chat is None:
            why = "no LLM configured"
        elif not run.vector_mode:
            why = "no vector leg in this mode"
        elif route != "hyde":
            why = f"the router chose the {route} route (--no-route runs HyDE)"
        else:  # the hyde route runs HyDE only when the router may use the LLM
            why = "on the hyde route it needs --route-llm"
        run.note("hyde", "skipped", why, started)
    if run.stages.decompose and not run.decompose:
        run.note("decompose", "skipped",
                 f"the router chose the {route} route (--no-route decomposes)", started)


def _llm_route(run: StageRun, fallback: Route) -> tuple[Route, str]:
    chat = run.models.chat
    assert chat is not None
    try:
        name = call_bounded(lambda: route_with_llm(chat, run.query, routes=ROUTES),
                            run.stages.timeouts.route, "route")
    except LLMError as exc:
        return fallback, f"heuristic (LLM router failed: {exc})"
    return Route(name=name, reason=f"heuristic unsure ({fallback.reason})", sure=True), "LLM"


def _concepts(run: StageRun) -> list[str] | None:
    started = time.perf_counter()
    concepts = split_heuristic(run.query)
    if concepts is None:
        run.note("decompose", "skipped", "one concept", started)
        return None
    chat = run.models.chat
    if chat is None:
        run.note("decompose", "applied", f"heuristic: {concepts}", started)
        return concepts
    try:
        llm_concepts = split_with_llm(chat, run.query, timeout_s=run.stages.timeouts.decompose)
    except LLMError as exc:
        run.note("decompose", "fallback", f"LLM failed ({exc}); heuristic: {concepts}", started)
        return concepts
    run.note("decompose", "applied", f"LLM: {llm_concepts}", started)
    return llm_concepts


def fuse_lists(lists: Sequence[Sequence[Hit]], *, k: int = RRF_K) -> list[Hit]:
    """Reciprocal rank fusion of several hit lists by passage id (rank-only, scale-free)."""
    scores: dict[str, float] = {}
    first_seen: dict[str, Hit] = {}
    for hits in lists:
        for rank, hit in enumerate(hits, start=1):
            scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / (k + rank)
            first_seen.setdefault(hit.id, hit)
    ordered = sorted(scores, key=lambda i: -scores[i])
    return [first_seen[i].model_copy(update={"score": scores[i], "rank": n + 1})
            for n, i in enumerate(ordered)]


def _hyde(run: StageRun) -> np.ndarray | None:
    started = time.perf_counter()
    chat, embedder = run.models.chat, run.models.embedder
    if chat is None or embedder is None or not run.vector_mode:
        why = "no LLM configured" if chat is None else "no vector leg in this mode"
        run.note("hyde", "skipped", why, started)
        return None
    try:
        vector, passage = hyde_vector(chat, embedder, run.query,
                                      timeout_s=run.stages.timeouts.hyde)
    except LLMError as exc:
        run.note("hyde", "fallback", f"{exc}; embedded the question", started)
        return None
    run.note("hyde", "applied", f"embedded: {passage[:160]}", started)
    return vector


def _rerank(run: StageRun, hits: list[Hit]) -> list[Hit]:
    started = time.perf_counter()
    reranker = run.models.reranker
    if reranker is None:
        run.note("rerank", "skipped", "no reranker configured", started)
        return hits
    if not hits:
        run.note("rerank", "skipped", "nothing to rerank", started)
        return hits
    # the first rerank_depth candidates are rescored; any beyond (top_k > depth) keep their place
    head, tail = hits[:run.stages.rerank_depth], hits[run.stages.rerank_depth:]
    try:
        reranked = call_bounded(lambda: rerank_hits(reranker, run.query, head, len(head)),
                                run.stages.timeouts.rerank, f"rerank ({reranker.name})")
    except (LLMError, RerankError) as exc:
        run.note("rerank", "fallback", f"{exc}; kept the fused order", started)
        return hits
    run.note("rerank", "applied", f"{reranker.name} over {len(head)} candidates", started)
    return [*reranked, *tail]
