"""Who is calling: an API key (``Authorization: Bearer pgc_…`` or ``X-API-Key: pgc_…``) scoped
to one collection and role; or, with auth off (loopback only), anyone may do anything."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from pgcite import CollectionInfo
from pgcite.service._access import UNKNOWN_KEY, Grant
from pgcite.service._errors import ApiError
from pgcite.service._keys import Role, aauthenticate
from pgcite.service._state import ServiceState, get_state

_bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer pgc_…")
NO_KEY_HINT = ("send 'Authorization: Bearer <token>'; create one with "
               "`pgcite key create --collection NAME --role reader`")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="X-API-Key: pgc_…")


async def principal(
    state: Annotated[ServiceState, Depends(get_state)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> Grant:
    """The caller's :class:`Grant` (service/_access.py: the one access rule)."""
    if not state.config.auth:
        return Grant()
    token = bearer.credentials if bearer else header
    if not token:
        raise ApiError(401, "an API key is required", hint=NO_KEY_HINT,
                       headers={"WWW-Authenticate": "Bearer"})
    async with (await state.async_client()).connection() as conn:
        key = await aauthenticate(conn, token)
    if key is None:
        raise ApiError(401, UNKNOWN_KEY, headers={"WWW-Authenticate": "Bearer"})
    return Grant(key)


CollectionPath = Annotated[str, Path(min_length=1, max_length=100,
                                     description="collection name")]


@dataclass(frozen=True)
class Access:
    info: CollectionInfo
    grant: Grant


async def _access(role: Role, state: ServiceState, who: Grant, collection: str) -> Access:
    # the rule first, then the lookup: a name outside the key's scope is never looked up, and
    # gets the answer an unknown name gets (404, same message)
    who.require(collection, role)
    return Access(info=await state.alookup(collection), grant=who)


async def reader_access(
    collection: CollectionPath,
    state: Annotated[ServiceState, Depends(get_state)],
    who: Annotated[Grant, Depends(principal)],
) -> Access:
    return await _access("reader", state, who, collection)


async def admin_access(
    collection: CollectionPath,
    state: Annotated[ServiceState, Depends(get_state)],
    who: Annotated[Grant, Depends(principal)],
) -> Access:
    return await _access("admin", state, who, collection)
