"""Versioned schema migrations, applied idempotently and recorded in ``pgcite.schema_migrations``.

Two kinds: the registry (``migrations/registry``, applied once per database) and the per-collection
schema (``migrations/collection``, templates applied to each collection's own schema).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg import sql

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_LOCK_KEY = 0x70676369  # "pgci": serialises concurrent migrators


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    text: str


def load_migrations(kind: str) -> list[Migration]:
    """The migrations of one kind (``registry`` or ``collection``), in version order."""
    folder = resources.files("pgcite.store") / "migrations" / kind
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


def _bootstrap(conn: psycopg.Connection) -> None:
    conn.execute("CREATE SCHEMA IF NOT EXISTS pgcite")
    conn.execute(
        """CREATE TABLE IF NOT EXISTS pgcite.schema_migrations (
               component  text NOT NULL,
               version    integer NOT NULL,
               name       text NOT NULL,
               applied_at timestamptz NOT NULL DEFAULT now(),
               PRIMARY KEY (component, version))"""
    )


def applied_versions(conn: psycopg.Connection, component: str) -> set[int]:
    rows = conn.execute(
        "SELECT version FROM pgcite.schema_migrations WHERE component = %s", (component,)
    ).fetchall()
    return {row[0] for row in rows}


def migrate(
    conn: psycopg.Connection,
    kind: str,
    *,
    component: str,
    params: dict[str, sql.Composable] | None = None,
) -> list[int]:
    """Apply the missing migrations of ``kind`` inside the caller's transaction.

    ``params`` fills the ``{placeholders}`` of collection templates (identifiers and literals made
    with psycopg.sql). Returns the versions applied now.
    """
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
    _bootstrap(conn)
    done = applied_versions(conn, component)
    applied = []
    for migration in load_migrations(kind):
        if migration.version in done:
            continue
        # Migration files are trusted package data, not user input.
        template = sql.SQL(migration.text)  # type: ignore[arg-type]
        conn.execute(template.format(**params) if params is not None else template)
        conn.execute(
            "INSERT INTO pgcite.schema_migrations (component, version, name) VALUES (%s, %s, %s)",
            (component, migration.version, migration.name),
        )
        applied.append(migration.version)
    return applied


def migrate_collections(conn: psycopg.Connection) -> None:
    """Bring every collection's schema up to the newest collection migration."""
    latest = max((m.version for m in load_migrations("collection")), default=0)
    rows = conn.execute(
        "SELECT c.name, c.schema_name, c.ts_config FROM pgcite.collections c"
        " WHERE coalesce((SELECT max(version) FROM pgcite.schema_migrations m"
        "                 WHERE m.component = 'collection:' || c.name), 0) < %s",
        (latest,),
    ).fetchall()
    for name, schema_name, ts_config in rows:
        migrate(conn, "collection", component=f"collection:{name}", params={
            "schema": sql.Identifier(schema_name), "tsconfig": sql.Literal(ts_config)})
