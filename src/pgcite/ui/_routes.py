"""The inspector's page and its one query endpoint, under the service's keys: a reader key may
inspect its collection; snapshots and their gate evaluations come from the admin API
(``GET /v1/collections/{c}/snapshots``), so they need an admin key, as they do there.

``POST /ui/api/collections/{c}/inspect`` runs ``Collection.search`` with ``explain`` (each
leg's ranks, and the candidates fusion ranked below ``top_k``) on the chosen snapshot, and
optionally ``Collection.answer`` pinned to the same snapshot: nothing here searches on its own.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import HTMLResponse, Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from pgcite import Answer, Collection, Filters, Generator, Hit, StageEvent
from pgcite._inputs import (
    MAX_NAME_CHARS,
    MAX_PREDICATES,
    MAX_VALUE_CHARS,
    Names,
    QueryText,
    clean_text,
)
from pgcite.retrieve import filters_from_args
from pgcite.service import ERRORS, Access, ServiceState, get_state, reader_access
from pgcite.ui._assets import asset, static_response
from pgcite.ui._exhibit import router as exhibit_router

# `key>=value` as the CLI's --filter: a key and a value, each within the API's bounds
FilterArg = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS + MAX_VALUE_CHARS + 8),
                      AfterValidator(clean_text)]


class InspectBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: QueryText
    snapshot_id: int | None = Field(default=None, ge=1, le=2**31 - 1,
                                    description="None: the active snapshot; another one needs "
                                    "an admin key")
    top_k: int = Field(default=10, ge=1, le=50)
    mode: Literal["hybrid", "keyword", "vector"] = "hybrid"
    cutoff: dt.date | None = None
    corpora: Names | None = None
    filters: list[FilterArg] = Field(default_factory=list, max_length=MAX_PREDICATES,
                                     description="as `pgcite search --filter`: key=value, "
                                     "key>=1665")
    answer: bool = False


class InspectOut(BaseModel):
    collection: str
    snapshot_id: int
    query: str
    mode: str
    fused: list[Hit] = Field(description="what the search returns, in order")
    keyword: list[Hit] = Field(description="the keyword (BM25) leg's candidates, by its rank")
    vector: list[Hit] = Field(description="the vector leg's candidates, by its rank")
    dropped: list[str] = Field(description="candidate ids fusion ranked below top_k")
    stages: list[StageEvent]
    timings_ms: dict[str, float]
    confidence: float | None
    answer: Answer | None


def _filters(col: Collection, body: InspectBody) -> Filters:
    return filters_from_args(body.filters,
                             lambda: col.snapshot(body.snapshot_id).metadata_fields or {},
                             corpora=body.corpora or None, cutoff=body.cutoff)


def _leg(candidates: list[Hit], rank: str) -> list[Hit]:
    found = [h for h in candidates if getattr(h, rank) is not None]
    return sorted(found, key=lambda h: getattr(h, rank))


def inspect(col: Collection, body: InspectBody, generator: Generator | None = None
            ) -> InspectOut:
    filters = _filters(col, body)
    result = col.search(body.query, top_k=body.top_k, mode=body.mode, filters=filters,
                        snapshot_id=body.snapshot_id, explain=True, snippets=True)
    candidates = [*result.hits, *result.dropped]
    answer = None
    if body.answer:
        # the same snapshot as the lists, under the same (role-scoped) collection
        answer = col.answer(body.query, top_k=min(body.top_k, 10), mode=body.mode,
                            filters=filters, generator=generator,
                            snapshot_id=result.snapshot_id)
    return InspectOut(
        collection=col.name, snapshot_id=result.snapshot_id, query=body.query, mode=body.mode,
        fused=result.hits, keyword=_leg(candidates, "keyword_rank"),
        vector=_leg(candidates, "vector_rank"), dropped=[h.id for h in result.dropped],
        stages=result.stages, timings_ms=result.timings_ms, confidence=result.confidence,
        answer=answer)


router = APIRouter(tags=["inspector"])


@router.get("/ui", response_class=HTMLResponse, include_in_schema=False)
def page() -> HTMLResponse:
    """The inspector (no data in it: every datum comes from the keyed API)."""
    return HTMLResponse(asset("index.html"), headers={"Cache-Control": "no-store"})


@router.get("/ui/static/{name}", include_in_schema=False)
def static(name: str) -> Response:
    return static_response(name)


@router.get("/ui/source", response_class=HTMLResponse, include_in_schema=False)
def source_page() -> HTMLResponse:
    """A citation's source, opened from the inspector (``?collection=…&id=…&snapshot=…``)."""
    return HTMLResponse(asset("source.html"), headers={"Cache-Control": "no-store"})


@router.post("/ui/api/collections/{collection}/inspect", response_model=InspectOut,
             responses=ERRORS)
def inspect_route(body: InspectBody, access: Annotated[Access, Depends(reader_access)],
                  state: Annotated[ServiceState, Depends(get_state)]) -> Any:
    """Each leg's list, the fused list, what fusion dropped, the stages; optionally the answer
    (on the same snapshot, with the same filters). A snapshot other than the active one needs
    an admin key (service/_access.py)."""
    return inspect(state.reader(access.info, access.grant), body, state.generator)


def mount_ui(app: FastAPI) -> None:
    """Serve the inspector at ``/ui`` and the visitors' exhibit pages at ``/exhibit/{name}`` of
    a ``create_app()`` application."""
    app.include_router(router)
    app.include_router(exhibit_router)
