"""Documents over HTTP: list them (reader), delete some (admin).

A delete builds a NEW, inactive snapshot (as an upload does) that goes live through
``…/snapshots/{id}/activate``, i.e. through the gate.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from pgcite import DocumentInfo, DocumentsRemoved
from pgcite.service._auth import Access, admin_access, reader_access
from pgcite.service._errors import ApiError
from pgcite.service._models import SnapshotQuery
from pgcite.service._routes import ERRORS
from pgcite.service._state import ServiceState, get_state

MAX_DOCUMENTS_PAGE = 1000
MAX_DELETE_IDS = 100

router = APIRouter(tags=["documents"])
State = Annotated[ServiceState, Depends(get_state)]
Reader = Annotated[Access, Depends(reader_access)]
Admin = Annotated[Access, Depends(admin_access)]


@router.get("/v1/collections/{collection}/documents", response_model=list[DocumentInfo],
            responses=ERRORS)
def documents(
    access: Reader, state: State, snapshot: SnapshotQuery = None,
    limit: Annotated[int, Query(ge=1, le=MAX_DOCUMENTS_PAGE)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> Any:
    """The documents of the active snapshot (or ``snapshot``), oldest first: id, title, dates,
    author, corpus, source and chunk count. Page with ``limit`` and ``offset``."""
    return state.reader(access.info, access.grant).documents(snapshot_id=snapshot, limit=limit,
                                                             offset=offset)


@router.delete("/v1/collections/{collection}/documents", response_model=DocumentsRemoved,
               status_code=201, responses=ERRORS)
def delete_documents(
    access: Admin, state: State,
    ids: Annotated[list[str], Query(alias="id", min_length=1, max_length=MAX_DELETE_IDS,
                                    description="document ids (repeat: ?id=a&id=b)")],
) -> Any:
    """Build a NEW, inactive snapshot: the active one without these documents (nothing stored
    is erased). Activate it with ``POST …/snapshots/{id}/activate``, through the gate. An id
    the active snapshot does not hold is a 400, and nothing is built."""
    if any("\x00" in i or len(i) > 1000 for i in ids):
        raise ApiError(400, "a document id must be at most 1000 characters, without NUL")
    return state.client.collection(access.info.name).delete_documents(ids, activate=False)
