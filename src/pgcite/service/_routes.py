"""The query plane (collections, search, answer) and the operational endpoints."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import psycopg
from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from pgcite import Answer, DatabaseError, EntitiesResult, Filters, Hit, SearchResult
from pgcite._inputs import MAX_LIST_ITEMS, Name
from pgcite.retrieve import Kind
from pgcite.service._access import Grant
from pgcite.service._auth import Access, principal, reader_access
from pgcite.service._metrics import answer_outcomes
from pgcite.service._models import (
    AnswerBody,
    CollectionOut,
    ErrorOut,
    SearchBody,
    SearchHit,
    SearchResponse,
    SnapshotQuery,
)
from pgcite.service._state import ServiceState, get_state
from pgcite.service._stream import sse_answer
from pgcite.store import active_snapshot, list_collections

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut} for code in (400, 401, 403, 404, 413, 422)
}
router = APIRouter()
State = Annotated[ServiceState, Depends(get_state)]
Reader = Annotated[Access, Depends(reader_access)]


def _search_hit(hit: Hit) -> SearchHit:
    return SearchHit(
        id=hit.id, rank=hit.rank, citation=hit.citation, source=hit.source, locator=hit.locator,
        title=hit.title, author=hit.author, corpus=hit.corpus,
        date=hit.date_start.isoformat() if hit.date_start else None,
        date_end=hit.date_end.isoformat() if hit.date_end else None, score=hit.score,
        distance=hit.vector_distance, keyword_rank=hit.keyword_rank,
        vector_rank=hit.vector_rank, text=hit.body, metadata=hit.metadata,
        snippet=hit.snippet, highlights=hit.highlights,
    )


def _search_response(result: SearchResult) -> SearchResponse:
    return SearchResponse(
        query=result.query, mode=result.mode, collection=result.collection,
        snapshot_id=result.snapshot_id, embedding_model=result.embedding_model,
        confidence=result.confidence, hits=[_search_hit(h) for h in result.hits],
        timings_ms=result.timings_ms, stages=result.stages,
        undated_excluded=result.undated_excluded,
    )


@router.get("/v1/collections", response_model=list[CollectionOut], tags=["query"],
            responses=ERRORS)
def collections(state: State, who: Annotated[Grant, Depends(principal)]) -> Any:
    """The collections this key may read."""
    out = []
    with state.client.connection() as conn:
        for info in list_collections(conn):
            if not who.allows(info.name, "reader"):
                continue
            snap = active_snapshot(conn, info)
            out.append(CollectionOut(
                name=info.name, language=info.ts_config, embedding_model=info.embedder.model_key,
                persona_author=info.settings.persona_author,
                active_snapshot=snap.snapshot_id if snap else None))
    return out


@router.post("/v1/collections/{collection}/search", response_model=SearchResponse,
             tags=["query"], responses=ERRORS)
async def search(body: SearchBody, access: Reader, state: State) -> Any:
    """Cited passages: BM25 + vector, fused; filters hold in SQL. Optional stages (route,
    decompose, hyde, rerank, boosts) say what they did in ``stages``."""
    # a snapshot other than the active one: the collection refuses it for a reader key
    arguments: dict[str, Any] = dict(top_k=body.top_k, mode=body.mode,
                                     filters=body.to_filters(), stages=body.stage_overrides(),
                                     snapshot_id=body.snapshot, snippets=body.snippets)
    if state.replicated:  # the sync path routes reads to replicas
        result = await run_in_threadpool(
            lambda: state.reader(access.info, access.grant).search(body.query, **arguments))
    else:
        reader = await state.areader(access.info, access.grant)
        result = await reader.search(body.query, **arguments)
    state.metrics.observe_stages(result.timings_ms)
    state.metrics.observe_outcomes([(e.stage, e.outcome) for e in result.stages])
    state.metrics.observe_routes(result.stages)
    return _search_response(result)


@router.get("/v1/collections/{collection}/entities", response_model=EntitiesResult,
            tags=["query"], responses=ERRORS)
def entities(
    access: Reader, state: State,
    near: Annotated[Name | None, Query(description="an entity in any spelling, e.g. "
                                       "'Sir W. Penn': rank those named with it")] = None,
    kind: Annotated[Kind, Query(description="any, person, place or organisation")] = "any",
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
    citations: Annotated[int, Query(ge=1, le=100)] = 5,
    edges: Annotated[int, Query(ge=0, le=1000)] = 0,
    cutoff: Annotated[dt.date | None, Query(description="nothing dated after it counts")] = None,
    corpora: Annotated[list[Name] | None, Query(max_length=MAX_LIST_ITEMS)] = None,
    snapshot: SnapshotQuery = None,
) -> Any:
    """Who, where, how often: entities ranked by the passages that mention them (with
    ``near``, together with that entity), each with supporting citation ids, under the same
    hard filters as a search."""
    return state.reader(access.info, access.grant).entities(
        near=near, kind=kind, limit=limit, citations=citations, edges=edges,
        filters=Filters(cutoff=cutoff, corpora=corpora), snapshot_id=snapshot)


@router.post("/v1/collections/{collection}/answer", response_model=Answer, tags=["query"],
             responses=ERRORS)
async def answer(body: AnswerBody, access: Reader, state: State) -> Any:
    """A grounded answer: every citation is one of its sources, or it abstains. Optional
    self-checks (grade, corrective, sufficiency) leave their steps in ``trace``."""
    generator = None if body.generator == "extractive" else state.generator  # None: default
    threshold = body.threshold if body.threshold is not None else state.config.threshold
    how = dict(token_budget=body.token_budget, threshold=threshold,
               self_check=body.self_check.model_dump() if body.self_check else None,
               entity_facts=body.entity_facts, neighbours=body.neighbours)
    options: dict[str, Any] = dict(
        top_k=body.top_k, mode=body.mode, filters=body.to_filters(), generator=generator,
        stages=body.stage_overrides(), snapshot_id=body.snapshot,
        options={k: v for k, v in how.items() if v is not None})
    if state.replicated and not body.stream:  # the sync path routes reads to replicas
        result = await run_in_threadpool(
            lambda: state.reader(access.info, access.grant).answer(body.question, **options))
        _observe_answer(state, result)
        return result
    reader = await state.areader(access.info, access.grant)
    if body.stream:  # on the primary, also with replicas (docs/scale-out.md)
        return await sse_answer(reader, body.question, options,
                                on_final=lambda result: _observe_answer(state, result))
    result = await reader.answer(body.question, **options)
    _observe_answer(state, result)
    return result


def _observe_answer(state: ServiceState, result: Answer) -> None:
    state.metrics.observe_stages(result.timings_ms)
    state.metrics.observe_outcomes([(e.stage, e.outcome) for e in result.stages]
                                   + answer_outcomes(result))
    state.metrics.observe_routes(result.stages)
    state.metrics.answers.labels(result.generator, str(result.abstained).lower()).inc()


ops = APIRouter(tags=["operations"])


@ops.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@ops.get("/readyz", responses={503: {"model": ErrorOut}})
def readyz(state: State) -> Any:
    """The database answers (a fresh connection, 2 s timeout). The embedded server is looked at
    first: a dead postmaster is restarted from here, so a load balancer that calls only this
    endpoint sees the service recover (no keyed request needed)."""
    try:
        state.client.db.check_alive()  # starts the restart of a dead embedded server
        with psycopg.connect(state.client.db.url, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except DatabaseError as exc:
        return JSONResponse({"detail": f"database unavailable: {exc.message}",
                             "hint": exc.hint or "retry in a few seconds"},
                            status_code=503, headers={"Retry-After": "2"})
    except psycopg.Error as exc:
        return JSONResponse({"detail": f"database unreachable: {type(exc).__name__}"},
                            status_code=503, headers={"Retry-After": "2"})
    return {"status": "ready"}


@ops.get("/metrics", response_class=Response)
def metrics(state: State) -> Response:
    """Prometheus text format."""
    return Response(state.metrics.render(), media_type="text/plain; version=0.0.4")
