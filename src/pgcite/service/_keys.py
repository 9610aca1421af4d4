"""API keys: ``pgc_<key_id>_<secret>`` tokens, stored as sha256, scoped to a collection and a
role. ``reader`` may search and ask; ``admin`` may also list, upload and activate snapshots;
``visitor`` may only ask one exhibit (service/_access.py, rule 5), so it satisfies neither."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import secrets
from typing import Literal

import psycopg
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from pgcite import PgciteError
from pgcite.store import directory_collection, get_collection

Role = Literal["reader", "admin", "visitor"]
ROLES: tuple[str, ...] = ("reader", "admin", "visitor")
_TOKEN = re.compile(r"^pgc_([0-9a-f]{12})_[A-Za-z0-9_-]{40,60}$")


class ApiKey(BaseModel):
    """A key as listed: never its token or hash."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, serialize_by_alias=True,
                              validate_by_name=True)

    key_id: str
    collection: str
    role: Role
    note: str | None
    created_at: dt.datetime
    revoked_at: dt.datetime | None = None
    exhibit: str | None = None  # a visitor key's exhibit

    def allows(self, collection: str, role: Role) -> bool:
        return (self.revoked_at is None and self.collection == collection
                and self.role != "visitor" and (role == "reader" or self.role == "admin"))


class NewKey(BaseModel):
    """A key just created, with its token: the only time the token exists outside the caller."""

    key: ApiKey
    token: str


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


_COLUMNS = "key_id, collection, role, note, created_at, revoked_at, exhibit"


def _key(row: tuple[object, ...]) -> ApiKey:
    return ApiKey.model_validate(dict(zip(ApiKey.model_fields, row, strict=True)))


def create_key(conn: psycopg.Connection, collection: str, role: str,
               note: str | None = None, *, exhibit: str | None = None) -> NewKey:
    """A new key for ``collection`` (which must exist) with ``role``; a visitor key names the
    ``exhibit`` (on that collection) it is bound to."""
    if role not in ROLES:
        raise PgciteError(f"unknown role {role!r}", hint="use reader, admin or visitor")
    if (role == "visitor") != (exhibit is not None):
        raise PgciteError("a visitor key is bound to one exhibit, and only a visitor key is",
                          hint="pgcite key create --exhibit NAME")
    get_collection(conn, collection)  # a clear error for an unknown collection
    if exhibit is not None and directory_collection(conn, exhibit) != collection:
        raise PgciteError(f"exhibit {exhibit!r} is not on collection {collection!r}")
    key_id = secrets.token_hex(6)
    token = f"pgc_{key_id}_{secrets.token_urlsafe(32)}"
    row = conn.execute(
        f"INSERT INTO pgcite.api_keys (key_id, key_sha256, collection, role, note, exhibit)"  # noqa: S608
        f" VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
        (key_id, token_digest(token), collection, role, note, exhibit),
    ).fetchone()
    assert row is not None
    return NewKey(key=_key(row), token=token)


def list_keys(conn: psycopg.Connection, collection: str | None = None) -> list[ApiKey]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM pgcite.api_keys"  # noqa: S608
        " WHERE %(c)s::text IS NULL OR collection = %(c)s ORDER BY created_at, key_id",
        {"c": collection},
    ).fetchall()
    return [_key(row) for row in rows]


def revoke_key(conn: psycopg.Connection, key_id: str) -> ApiKey:
    row = conn.execute(
        f"UPDATE pgcite.api_keys SET revoked_at = coalesce(revoked_at, now())"  # noqa: S608
        f" WHERE key_id = %s RETURNING {_COLUMNS}", (key_id,),
    ).fetchone()
    if row is None:
        raise PgciteError(f"no API key {key_id!r}", hint="see `pgcite key list`")
    return _key(row)


def authenticate(conn: psycopg.Connection, token: str) -> ApiKey | None:
    """The live key this token belongs to, or None (malformed, unknown or revoked)."""
    if not _TOKEN.fullmatch(token):
        return None  # never reaches the database
    row = conn.execute(_AUTHENTICATE, (token_digest(token),)).fetchone()
    return _key(row) if row else None


async def aauthenticate(conn: psycopg.AsyncConnection, token: str) -> ApiKey | None:
    """:func:`authenticate` on an async connection."""
    if not _TOKEN.fullmatch(token):
        return None  # never reaches the database
    row = await (await conn.execute(_AUTHENTICATE, (token_digest(token),))).fetchone()
    return _key(row) if row else None


_AUTHENTICATE = (f"SELECT {_COLUMNS} FROM pgcite.api_keys"  # noqa: S608
                 " WHERE key_sha256 = %s AND revoked_at IS NULL")
