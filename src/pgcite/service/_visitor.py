"""The visitor role, on top of the service's keys: a visitor key is bound to one exhibit, and may
ask that exhibit questions and open its citations -- nothing else (docs/exhibits.md, "Visitor
keys").

Two rules, each in one place:

* :meth:`ApiKey.allows` (``_keys.py``) refuses a visitor key for every collection role, so
  every route, MCP tool and inspector call that checks a reader or admin refuses it;
* :func:`may_visit` here says who may use an exhibit: its visitor keys, and the readers and
  admins of its collection (to preview it); with auth off (loopback), anyone.

What a visitor's request may carry is the other half: the exhibit routes take a question, a
citation id and the snapshot its answer named, never a cutoff, corpora or a snapshot to read
(service/_exhibits.py); the exhibit's settings supply all of those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path, Request

from pgcite._errors import ExhibitNotFound
from pgcite._exhibits import Exhibit
from pgcite.service._auth import Principal, principal
from pgcite.service._errors import ApiError
from pgcite.service._keys import ApiKey
from pgcite.service._state import ServiceState, get_state
from pgcite.store._collections import CollectionInfo
from pgcite.store._exhibits import ExhibitInfo, adirectory_collection, aget_exhibit


def may_visit(key: ApiKey | None, exhibit: ExhibitInfo) -> bool:
    """Whether ``key`` (None: auth is off) may ask ``exhibit`` and open its citations."""
    if key is None:
        return True
    if key.role == "visitor":
        return (key.revoked_at is None and key.exhibit == exhibit.name
                and key.collection == exhibit.collection)
    return key.allows(exhibit.collection, "reader")


async def no_visitors(who: Annotated[Principal, Depends(principal)]) -> None:
    """Every route but an exhibit's: a visitor key is refused here, before the route runs (its
    collection checks would refuse it too; a list would answer with nothing, and still answer)."""
    if who.key is not None and who.key.role == "visitor":
        raise ApiError(403, "a visitor key may only ask its exhibit",
                       hint=f"use /v1/exhibits/{who.key.exhibit}/…")


ExhibitPath = Annotated[str, Path(min_length=1, max_length=63, description="exhibit name")]


@dataclass(frozen=True)
class ExhibitAccess:
    exhibit: Exhibit  # over the collection's read-only role
    info: CollectionInfo
    principal: Principal


# What a visitor's request may carry in its query string (a source: the citation and the
# snapshot its answer named); anything else is refused, not ignored.
VISITOR_QUERY = frozenset({"id", "snapshot"})


async def exhibit_access(
    request: Request,
    exhibit: ExhibitPath,
    state: Annotated[ServiceState, Depends(get_state)],
    who: Annotated[Principal, Depends(principal)],
) -> ExhibitAccess:
    """The exhibit a request names, if its key may visit it: 404 for an unknown name (to
    everyone), 403 for a key of another exhibit or collection; 422 for a query parameter no
    exhibit route takes (a cutoff, corpora …): it would not apply, and is said so."""
    unknown = sorted(set(request.query_params) - VISITOR_QUERY)
    if unknown:
        raise ApiError(422, f"an exhibit's request takes no {', '.join(unknown)[:100]}",
                       hint="the exhibit's settings decide cutoff, corpora and snapshot")
    try:
        async with (await state.async_client()).connection() as conn:
            collection = await adirectory_collection(conn, exhibit)
        info = await state.alookup(collection)
        async with (await state.async_client()).connection() as conn:
            stored = await aget_exhibit(conn, info, exhibit)
    except ExhibitNotFound as exc:
        raise ApiError(404, exc.message) from None
    if not may_visit(who.key, stored):
        raise ApiError(403, f"this API key may not visit exhibit {exhibit!r}")
    assert state.roles is not None
    reader = (state.reader(info) if state.roles.ready(info)  # else: its role's grants, once
              else await state.offload(lambda: state.reader(info)))
    return ExhibitAccess(exhibit=Exhibit(reader, stored), info=info, principal=who)
