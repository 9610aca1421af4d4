"""Per-collection database roles for the query plane.

Each collection gets ``pgcite_read_<name>`` (NOLOGIN): USAGE on its own schema and SELECT on its
tables, nothing else — not the registry, not the API keys, not another collection's schema. The
service keeps ONE pool connected as the owning role and, for each query, runs the work inside a
transaction that starts with ``SET LOCAL ROLE pgcite_read_<name>``.

Why SET LOCAL ROLE on a shared pool rather than a login (and a pool) per collection: one pool
serves any number of collections without a password per role; LOCAL ends with the transaction
(commit, rollback or error), so a role can never leak into the next request that borrows the
connection. What it guards against is a bug that points a request at the wrong schema; it is not
a barrier against SQL injection (the session user may RESET ROLE), which is ruled out instead by
never building SQL from request text. Admin work (snapshots, uploads, activation) runs as the
owning role, i.e. the role pgcite itself connects as.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import psycopg
from psycopg import AsyncConnection, sql

from pgcite import AsyncClient, Client, CollectionInfo

READ_ROLE_PREFIX = "pgcite_read_"
_ROLE_LOCK = 0x70676372  # "pgcr": serialises concurrent GRANTs (they can otherwise collide)


def read_role(info: CollectionInfo) -> str:
    """The role name: the collection name is already checked against ^[a-z][a-z0-9_]{0,47}$."""
    return READ_ROLE_PREFIX + info.name


def ensure_read_role(conn: psycopg.Connection, info: CollectionInfo) -> str:
    """Create the collection's read role if missing and (re)grant it read access to the
    collection's schema only; run in the caller's transaction, as the owning role."""
    role = sql.Identifier(read_role(info))
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ROLE_LOCK,))
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s",
                          (read_role(info),)).fetchone()
    if not exists:
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(role))
    schema = info.schema_id
    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, role))
    conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(schema, role))
    conn.execute(sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA {} GRANT SELECT ON TABLES TO {}")
                 .format(schema, role))
    superuser = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    row = superuser.fetchone()
    if not (row and row[0]):  # a superuser may SET ROLE to anyone; others need membership
        conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(role))
    return read_role(info)


class RoleCache:
    """Which collections' roles this process has ensured (keyed by creation time, so that a
    dropped and re-created collection gets its grants again)."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._done: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def ready(self, info: CollectionInfo) -> bool:
        """Whether ``info``'s role is ensured already (so :meth:`ensure` does no I/O)."""
        with self._lock:
            return (info.name, info.created_at.isoformat()) in self._done

    def ensure(self, info: CollectionInfo) -> str:
        key = (info.name, info.created_at.isoformat())
        with self._lock:
            if key not in self._done:
                with self._client.db.transaction() as conn:
                    ensure_read_role(conn, info)
                self._done.add(key)
        return read_role(info)


class RoleScopedConnection:
    """Connections from the client's pool, each in a transaction under ``SET LOCAL ROLE``: the
    connection factory of a collection the service reads (``Collection(..., connection=...)``).

    Only the connection is scoped: the client -- its pool, its models (the LLM and the
    reranker are built once per process), its active-pointer cache -- stays the shared one.
    """

    def __init__(self, client: Client, role: str) -> None:
        self._client = client
        self.role = role

    @contextmanager
    def __call__(self) -> Iterator[psycopg.Connection]:
        with self._client.connection() as conn, conn.transaction():
            conn.execute(_set_role(self.role))
            yield conn


class AsyncRoleScopedConnection:
    """:class:`RoleScopedConnection` on the async pool: the async API's connection factory
    for a collection the service reads."""

    def __init__(self, client: AsyncClient, role: str) -> None:
        self._client = client
        self.role = role

    @asynccontextmanager
    async def __call__(self) -> AsyncIterator[AsyncConnection]:
        async with self._client.connection() as conn, conn.transaction():
            await conn.execute(_set_role(self.role))
            yield conn


def _set_role(role: str) -> sql.Composed:
    return sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role))
