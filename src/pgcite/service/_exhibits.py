"""Exhibits over HTTP (docs/exhibits.md).

The admin plane defines them on a collection and makes their visitor keys; the visitor plane
(``/v1/exhibits/{exhibit}/…``) asks an exhibit and opens its citations, under its settings
only: a visitor's body is a question, a source request a citation id and the snapshot its
answer named. Any other field is a 422 (``extra="forbid"``), so a cutoff, corpora or a
snapshot to read cannot even be sent. Readers of a collection open its citations through
``/v1/collections/{c}/source`` (the inspector does), under the filters they pass.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from pgcite import (
    Answer,
    CitedSource,
    Exhibit,
    ExhibitExists,
    ExhibitInfo,
    ExhibitNotFound,
    ExhibitSettings,
    Filters,
    PassageNotFound,
    citation_page,
    citation_source,
)
from pgcite._inputs import MAX_LIST_ITEMS, CleanStr, Name
from pgcite.service._auth import Access, admin_access, reader_access
from pgcite.service._errors import ApiError
from pgcite.service._keys import NewKey, create_key
from pgcite.service._routes import ERRORS, _observe_answer
from pgcite.service._state import ServiceState, get_state
from pgcite.service._stream import sse_answer
from pgcite.service._visitor import ExhibitAccess, ExhibitPath, exhibit_access

router = APIRouter()
State = Annotated[ServiceState, Depends(get_state)]
Reader = Annotated[Access, Depends(reader_access)]
Admin = Annotated[Access, Depends(admin_access)]
Visit = Annotated[ExhibitAccess, Depends(exhibit_access)]
MAX_VISITOR_QUESTION = 500  # a visitor types a question, not a document

CitationId = Annotated[CleanStr, Query(alias="id", min_length=1, max_length=500,
                                       description="the citation id, as the answer gave it")]
CitedSnapshot = Annotated[int | None, Query(
    alias="snapshot", ge=1, le=2**31 - 1, description="the snapshot the answer came from "
    "(``snapshotId``): says whether the text is still the text cited")]


@contextmanager
def _http_errors() -> Iterator[None]:
    try:
        yield
    except (ExhibitNotFound, PassageNotFound) as exc:
        raise ApiError(404, exc.message, hint=exc.hint) from None
    except ExhibitExists as exc:
        raise ApiError(409, exc.message, hint=exc.hint) from None


# --- the admin plane -------------------------------------------------------------------------


class VisitorKeyBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: Annotated[CleanStr, Field(max_length=200)] | None = None


@router.get("/v1/collections/{collection}/exhibits", response_model=list[ExhibitInfo],
            tags=["exhibits"], responses=ERRORS)
def list_route(access: Reader, state: State) -> Any:
    """The exhibits defined on the collection, each with the version in force."""
    return Exhibit.list(state.reader(access.info, access.grant))


@router.put("/v1/collections/{collection}/exhibits/{exhibit}", response_model=ExhibitInfo,
            tags=["exhibits"], responses={**ERRORS, 409: ERRORS[400]})
def define_route(exhibit: ExhibitPath, settings: ExhibitSettings, access: Admin, state: State) -> Any:
    """Define the exhibit, or a new version of it (its visitor keys stay bound to it)."""
    with _http_errors():
        return Exhibit.create(state.client.collection(access.info.name), exhibit, settings,
                              replace=True).info


@router.get("/v1/collections/{collection}/exhibits/{exhibit}", response_model=ExhibitInfo,
            tags=["exhibits"], responses=ERRORS)
def show_route(exhibit: ExhibitPath, access: Reader, state: State) -> Any:
    with _http_errors():
        return Exhibit.open(state.reader(access.info, access.grant), exhibit).info


@router.delete("/v1/collections/{collection}/exhibits/{exhibit}", response_model=ExhibitInfo,
               tags=["exhibits"], responses=ERRORS)
def delete_route(exhibit: ExhibitPath, access: Admin, state: State) -> Any:
    """Retire the exhibit (its versions stay on record) and delete its visitor keys."""
    with _http_errors():
        return Exhibit.open(state.client.collection(access.info.name), exhibit).delete()


@router.post("/v1/collections/{collection}/exhibits/{exhibit}/keys", response_model=NewKey,
             status_code=201, tags=["exhibits"], responses=ERRORS)
def key_route(exhibit: ExhibitPath, body: VisitorKeyBody, access: Admin, state: State) -> Any:
    """A visitor key for the exhibit: it may ask the exhibit and open its citations, nothing
    else. The token is in this response only."""
    with _http_errors(), state.client.db.transaction() as conn:
        return create_key(conn, access.info.name, "visitor", body.note, exhibit=exhibit)


# --- what readers open: any citation of their collection, under their filters ------------


@router.get("/v1/collections/{collection}/source", response_model=CitedSource,
            tags=["query"], responses=ERRORS)
def source_route(
    access: Reader, state: State, citation_id: CitationId, snapshot: CitedSnapshot = None,
    cutoff: Annotated[dt.date | None, Query()] = None,
    corpora: Annotated[list[Name] | None, Query(max_length=MAX_LIST_ITEMS)] = None,
    neighbours: Annotated[int, Query(ge=0, le=10)] = 2,
) -> Any:
    """A citation opened: its passage in its document with ``neighbours`` either side (under
    ``cutoff``/``corpora``), the document's dates, author, title and provenance, and for a
    scan the page region. Read from the active snapshot (an admin key: the one named), and
    compared with the snapshot the citation names (``status``)."""
    pin = snapshot is not None and access.grant.allows(access.info.name, "admin")
    with _http_errors():
        return citation_source(state.reader(access.info, access.grant), citation_id,
                               cited_snapshot=snapshot, filters=Filters(cutoff=cutoff, corpora=corpora), pin=pin,
                               neighbours=neighbours)


@router.get("/v1/collections/{collection}/page", tags=["query"], response_class=Response,
            responses={**ERRORS, 200: {"content": {"image/jpeg": {}}}})
def page_route(
    access: Reader, state: State, citation_id: CitationId, snapshot: CitedSnapshot = None,
    cutoff: Annotated[dt.date | None, Query()] = None,
    corpora: Annotated[list[Name] | None, Query(max_length=MAX_LIST_ITEMS)] = None,
) -> Response:
    """The scanned page a passage was read from (shown only when every passage on the page
    passes ``cutoff``/``corpora``). ``snapshot``: an admin key's other snapshot (a reader's
    key may name the active one only: service/_access.py)."""
    with _http_errors():
        stored = citation_page(state.reader(access.info, access.grant), citation_id,
                               snapshot_id=snapshot,
                               filters=Filters(cutoff=cutoff, corpora=corpora))
    return _image(stored.data, stored.media_type)


def _image(data: bytes, media_type: str) -> Response:
    return Response(data, media_type=media_type, headers={"Cache-Control": "private, no-store"})


# --- the visitor plane -----------------------------------------------------------------------


class ExhibitOut(BaseModel):
    """What a visitor's page shows of an exhibit (not its attribution texts' mechanics)."""

    name: str
    version: int
    title: str
    persona: str | None
    greeting: str | None
    questions: list[str]
    language: str
    direction: str
    cutoff: dt.date | None
    labels: dict[str, str]


class QuestionBody(BaseModel):
    """A visitor's question: nothing else can be sent (the exhibit decides the rest)."""

    model_config = ConfigDict(extra="forbid")

    question: Annotated[CleanStr, Field(min_length=1, max_length=MAX_VISITOR_QUESTION)]
    stream: bool = Field(default=False, description="answer as server-sent events "
                         "(docs/http-api.md, 'Streamed answers')")


def exhibit_out(info: ExhibitInfo) -> ExhibitOut:
    s = info.settings
    return ExhibitOut(name=info.name, version=info.version, title=info.title,
                      persona=s.persona, greeting=s.greeting, questions=s.questions,
                      language=s.language, direction=s.resolved_direction(), cutoff=s.cutoff,
                      labels=s.labels)


@router.get("/v1/exhibits/{exhibit}", response_model=ExhibitOut, tags=["visitors"],
            responses=ERRORS)
def exhibit_route(visit: Visit) -> Any:
    """The exhibit as its page shows it: title, greeting, suggested questions, language."""
    return exhibit_out(visit.exhibit.info)


@router.post("/v1/exhibits/{exhibit}/answer", response_model=Answer, tags=["visitors"],
             responses=ERRORS)
async def answer_route(body: QuestionBody, visit: Visit, state: State) -> Any:
    """The exhibit's answer, in the persona's voice, under its cutoff and corpora, from the
    active snapshot (``snapshotId``: what its citation links name)."""
    options: dict[str, Any] = dict(
        top_k=5, generator=state.generator, filters=visit.exhibit.filters(),
        options=visit.exhibit.answer_options(threshold=state.config.threshold))
    reader = await state.areader(visit.info, visit.grant)
    if body.stream:
        return await sse_answer(reader, body.question, options,
                                on_final=lambda result: _observe_answer(state, result))
    result = await reader.answer(body.question, **options)
    _observe_answer(state, result)
    return result


@router.get("/v1/exhibits/{exhibit}/source", response_model=CitedSource, tags=["visitors"],
            responses=ERRORS)
def exhibit_source_route(visit: Visit, citation_id: CitationId,
                         snapshot: CitedSnapshot = None) -> Any:
    """A citation of the exhibit opened, under its cutoff and corpora (a neighbour after the
    cutoff is not shown): read from the active snapshot, compared with ``snapshot``."""
    with _http_errors():
        return visit.exhibit.source(citation_id, snapshot_id=snapshot)


@router.get("/v1/exhibits/{exhibit}/page", tags=["visitors"], response_class=Response,
            responses={**ERRORS, 200: {"content": {"image/jpeg": {}}}})
def exhibit_page_route(visit: Visit, citation_id: CitationId) -> Response:
    """The scanned page a cited passage was read from, when every passage on it is within
    the exhibit's cutoff and corpora (else 404)."""
    with _http_errors():
        stored = visit.exhibit.page_image(citation_id)
    return _image(stored.data, stored.media_type)

