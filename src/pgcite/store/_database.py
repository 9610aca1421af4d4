"""Connecting to PostgreSQL: the embedded server by default, or any server named by URL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from pgvector.psycopg import register_vector

from pgcite._errors import DatabaseError
from pgcite.config import Settings
from pgcite.store._migrations import migrate_registry
from pgcite.store._server import embedded_server
from pgcite.store._supervisor import Supervisor

MIN_PGVECTOR = (0, 8)


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


class Database:
    """A PostgreSQL server with pgvector ≥ 0.8 and pgcite's registry schema."""

    def __init__(self, url: str, *, embedded: bool, supervisor: Supervisor | None = None) -> None:
        self.url = url
        self.embedded = embedded
        self.supervisor = supervisor  # the embedded server's; None for a server named by URL

    @classmethod
    def open(cls, settings: Settings | None = None) -> Database:
        """Resolve the server (starting the embedded one if needed), check it, and bring its
        registry up to date. Collections are upgraded by `pgcite collection upgrade` only
        (store._migrations)."""
        settings = settings or Settings()
        if settings.database_url is None:
            server = embedded_server(settings.data_dir, settings.embedded_shared_buffers,
                                     settings.server_idle_s)
            db = cls(server.get_uri(), embedded=True, supervisor=Supervisor(server))
        else:
            db = cls(str(settings.database_url), embedded=False)
        with db.connect(register=False) as conn:
            db._check_pgvector(conn)
            migrate_registry(conn)
        return db

    def connect(self, *, autocommit: bool = False, register: bool = True) -> psycopg.Connection:
        """A new connection with the pgvector types registered."""
        self.check_alive()
        try:
            conn = psycopg.connect(self.url, autocommit=autocommit)
        except psycopg.OperationalError as exc:
            where = "the embedded server" if self.embedded else redact(self.url)
            raise DatabaseError(
                f"cannot connect to {where}: {str(exc).strip().splitlines()[0]}",
                hint="check PGCITE_DATABASE_URL, or unset it to use the embedded server",
            ) from exc
        if register:
            register_vector(conn)
        return conn

    def check_alive(self) -> None:
        """Raise DatabaseError at once if the embedded server died (it is being restarted)."""
        if self.supervisor is not None:
            self.supervisor.check()

    @property
    def generation(self) -> int:
        """How many times the embedded server was restarted: older connections are dead."""
        return self.supervisor.generation if self.supervisor is not None else 0

    def backend_cpu_s(self, conn: psycopg.Connection) -> float | None:
        """CPU seconds the server process behind ``conn`` has used so far, or None where it
        cannot be read: only the embedded server runs on this machine (a server by URL may
        be another one, where the pid means nothing here)."""
        if not self.embedded:
            return None
        import psutil

        try:
            times = psutil.Process(conn.info.backend_pid).cpu_times()
        except psutil.Error:
            return None
        return float(times.user + times.system)

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """A connection inside one transaction: committed on success, rolled back on error."""
        with self.connect() as conn, conn.transaction():
            yield conn

    def _check_pgvector(self, conn: psycopg.Connection) -> None:
        row = conn.execute(
            "SELECT default_version, installed_version FROM pg_available_extensions"
            " WHERE name = 'vector'"
        ).fetchone()
        if row is None:
            raise DatabaseError(
                f"pgvector is not installed on {redact(self.url)}",
                hint="install pgvector >= 0.8 on that server (e.g. the postgresql-18-pgvector "
                "package), or unset PGCITE_DATABASE_URL to use the embedded server",
            )
        available = row[1] or row[0]
        if _version_tuple(available) < MIN_PGVECTOR:
            raise DatabaseError(
                f"pgvector {available} on {redact(self.url)} is too old: pgcite needs >= 0.8",
                hint="ALTER EXTENSION vector UPDATE after upgrading the pgvector package",
            )


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)
