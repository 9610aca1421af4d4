"""Who is calling: an API key (``Authorization: Bearer pgc_…`` or ``X-API-Key: pgc_…``) scoped
to one collection and role; or, with auth off (loopback only), anyone may do anything."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from pgcite.service._errors import ApiError
from pgcite.service._keys import ApiKey, Role, aauthenticate
from pgcite.service._state import ServiceState, get_state
from pgcite.store._collections import CollectionInfo

_bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer pgc_…")
NO_KEY_HINT = ("send 'Authorization: Bearer <token>'; create one with "
               "`pgcite key create --collection NAME --role reader`")
_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="X-API-Key: pgc_…")


@dataclass(frozen=True)
class Principal:
    key: ApiKey | None  # None: auth is off

    def allows(self, collection: str, role: Role) -> bool:
        return self.key is None or self.key.allows(collection, role)


async def principal(
    state: Annotated[ServiceState, Depends(get_state)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    header: Annotated[str | None, Depends(_header)],
) -> Principal:
    if not state.config.auth:
        return Principal(key=None)
    token = bearer.credentials if bearer else header
    if not token:
        raise ApiError(401, "an API key is required", hint=NO_KEY_HINT,
                       headers={"WWW-Authenticate": "Bearer"})
    async with (await state.async_client()).connection() as conn:
        key = await aauthenticate(conn, token)
    if key is None:
        raise ApiError(401, "unknown or revoked API key", headers={"WWW-Authenticate": "Bearer"})
    return Principal(key=key)


CollectionPath = Annotated[str, Path(min_length=1, max_length=100,
                                     description="collection name")]


@dataclass(frozen=True)
class Access:
    info: CollectionInfo
    principal: Principal


async def _access(role: Role, state: ServiceState, who: Principal, collection: str) -> Access:
    info = await state.alookup(collection)  # 404 before 403: an unknown name is unknown to everyone
    if not who.allows(info.name, role):
        raise ApiError(403, f"this API key may not {'read' if role == 'reader' else 'administer'}"
                       f" collection {collection!r}")
    return Access(info=info, principal=who)


async def reader_access(
    collection: CollectionPath,
    state: Annotated[ServiceState, Depends(get_state)],
    who: Annotated[Principal, Depends(principal)],
) -> Access:
    return await _access("reader", state, who, collection)


async def admin_access(
    collection: CollectionPath,
    state: Annotated[ServiceState, Depends(get_state)],
    who: Annotated[Principal, Depends(principal)],
) -> Access:
    return await _access("admin", state, who, collection)
