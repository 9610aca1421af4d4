"""The visitor role over HTTP: a visitor key is bound to one exhibit, and may ask that exhibit
questions and open its citations -- nothing else (docs/exhibits.md, "Visitor keys").

Who may do what is the one access rule's (service/_access.py, rule 5): a visitor key holds no
collection role, so every route that checks a reader or admin refuses it; :meth:`Grant.visiting`
is the one check of who may use an exhibit, and the collection is then opened under that grant
(:meth:`Grant.open`: the active snapshot only). This module adds the HTTP side: the dependency
of the exhibit routes, and the refusal on every other route (:func:`no_visitors`).

What a visitor's request may carry is the other half: the exhibit routes take a question, a
citation id and the snapshot its answer named, never a cutoff, corpora or a snapshot to read
(service/_exhibits.py); the exhibit's settings supply all of those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path, Request
from pydantic import AfterValidator

from pgcite import AccessDenied, CollectionInfo, CollectionNotFound, Exhibit, ExhibitNotFound
from pgcite._inputs import clean_text
from pgcite.service._access import Grant
from pgcite.service._auth import principal
from pgcite.service._errors import ApiError
from pgcite.service._state import ServiceState, get_state
from pgcite.store import adirectory_collection, aget_exhibit


async def no_visitors(who: Annotated[Grant, Depends(principal)]) -> None:
    """Every route but an exhibit's: a visitor key is refused here, before the route runs (its
    collection checks would refuse it too; the list of collections would answer with nothing,
    and still answer)."""
    if who.visitor_of is not None:
        raise AccessDenied("a visitor key may only ask its exhibit",
                           hint=f"its exhibit is {who.visitor_of!r}")


ExhibitPath = Annotated[str, Path(min_length=1, max_length=63, description="exhibit name"),
                        AfterValidator(clean_text)]


@dataclass(frozen=True)
class ExhibitAccess:
    exhibit: Exhibit  # over the collection's read-only role, opened for the exhibit
    info: CollectionInfo
    grant: Grant  # the caller's, visiting the exhibit


# What a visitor's request may carry in its query string (a source: the citation and the
# snapshot its answer named); anything else is refused, not ignored.
VISITOR_QUERY = frozenset({"id", "snapshot"})


async def exhibit_access(
    request: Request,
    exhibit: ExhibitPath,
    state: Annotated[ServiceState, Depends(get_state)],
    who: Annotated[Grant, Depends(principal)],
) -> ExhibitAccess:
    """The exhibit a request names, if the caller may visit it; an unknown exhibit and one the
    key may not visit are the same 404 (a visitor key of another exhibit is refused before any
    lookup). 422 for a query parameter no exhibit route takes (a cutoff, corpora …): it would
    not apply, and is said so."""
    unknown = sorted(set(request.query_params) - VISITOR_QUERY)
    if unknown:
        raise ApiError(422, f"an exhibit's request takes no {', '.join(unknown)[:100]}",
                       hint="the exhibit's settings decide cutoff, corpora and snapshot")
    try:
        if who.visitor_of not in (None, exhibit):
            raise ExhibitNotFound(f"no exhibit named {exhibit!r}")
        async with (await state.async_client()).connection() as conn:
            collection = await adirectory_collection(conn, exhibit)
        grant = who.visiting(collection, exhibit)
        info = await state.alookup(collection)
        async with (await state.async_client()).connection() as conn:
            stored = await aget_exhibit(conn, info, exhibit)
    except (ExhibitNotFound, CollectionNotFound):
        raise ApiError(404, f"no exhibit named {exhibit!r}") from None
    assert state.roles is not None
    reader = (state.reader(info, grant) if state.roles.ready(info)  # else: its role's grants
              else await state.offload(lambda: state.reader(info, grant)))
    return ExhibitAccess(exhibit=Exhibit(reader, stored), info=info, grant=grant)
