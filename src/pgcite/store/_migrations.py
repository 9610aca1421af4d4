"""Schema versions, recorded in ``pgcite.schema_migrations`` (docs/architecture.md, "The
database").

The registry (``migrations/registry``, applied once per database by :meth:`Database.open`) and
each collection's schema. A NEW collection gets the squashed baseline
(``migrations/collection/baseline.sql``, with the keyword index's tables of
``pgcite/index/schema.sql``), which is version BASELINE, and then every step numbered above it.
An EXISTING collection is brought up by :func:`upgrade_collection` only (``pgcite collection
upgrade``), one step at a time, each in its own transaction: the steps numbered above its
version, from ``migrations/collection`` (the store's tables) and ``pgcite/index/upgrades`` (the
keyword index's), in version order. Until then it is refused with a message naming that
command (:func:`check_version`): an upgrade may rewrite a large collection's index, takes its
tables' locks while it runs, and is the user's to start.

To add a table or column to every collection: one file ``NNNN_what.sql`` numbered after the
highest step, in the folder of the package that owns the table. It runs on new collections
(after the baseline) and on existing ones (at their upgrade) alike; nothing else changes.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

import psycopg
from psycopg import sql

from pgcite._camel import CamelModel
from pgcite._errors import CollectionOutdated, PgciteError

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_LOCK_KEY = 0x70676369  # "pgci": serialises concurrent registry migrators
# The collection version migrations/collection/baseline.sql creates: every step numbered up to
# it is in it (tests/test_upgrade.py checks that an upgraded collection's schema equals it).
BASELINE = 13


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    text: str


def _read(folder: Traversable) -> Iterator[Migration]:
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            yield Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8"))


def load_migrations(kind: str) -> list[Migration]:
    """The migrations of one kind, in version order: ``registry``, or ``collection`` (the
    store's steps and the keyword index's, merged: one version sequence per collection)."""
    folder = resources.files("pgcite.store") / "migrations" / kind
    found = list(_read(folder))
    if kind == "collection":
        found += _read(resources.files("pgcite.index") / "upgrades")
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"two {kind} migrations share a version: {sorted(versions)}")
    return sorted(found, key=lambda m: m.version)


@functools.cache
def latest_version() -> int:
    """The collection schema version this pgcite writes and reads."""
    return max([BASELINE, *(m.version for m in load_migrations("collection"))])


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


def migrate_registry(conn: psycopg.Connection) -> list[int]:
    """Apply the registry's missing migrations inside the caller's transaction; returns the
    versions applied now."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
    _bootstrap(conn)
    done = applied_versions(conn, "registry")
    applied = []
    for migration in load_migrations("registry"):
        if migration.version not in done:
            # Migration files are trusted package data, not user input.
            conn.execute(sql.SQL(migration.text))  # type: ignore[arg-type]
            _record(conn, "registry", migration.version, migration.name)
            applied.append(migration.version)
    return applied


def _record(conn: psycopg.Connection, component: str, version: int, name: str) -> None:
    conn.execute(
        "INSERT INTO pgcite.schema_migrations (component, version, name) VALUES (%s, %s, %s)",
        (component, version, name))


def _component(collection: str) -> str:
    return f"collection:{collection}"


def _template(text: str, schema_name: str, ts_config: str) -> sql.Composed:
    """A collection migration with its identifiers and literals filled in by psycopg.sql."""
    return sql.SQL(text).format(  # type: ignore[arg-type]
        schema=sql.Identifier(schema_name), tsconfig=sql.Literal(ts_config))


def create_schema(conn: psycopg.Connection, collection: str, schema_name: str,
                  ts_config: str) -> None:
    """A new collection's schema, in the caller's transaction: the baseline, with the keyword
    index's tables, then every later step."""
    folder = resources.files("pgcite.store") / "migrations" / "collection"
    index = (resources.files("pgcite.index") / "schema.sql").read_text(encoding="utf-8")
    baseline = (folder / "baseline.sql").read_text(encoding="utf-8")
    conn.execute(sql.SQL(baseline).format(  # type: ignore[arg-type]
        schema=sql.Identifier(schema_name), tsconfig=sql.Literal(ts_config),
        index=_template(index, schema_name, ts_config)))
    _record(conn, _component(collection), BASELINE, "baseline")
    for step in load_migrations("collection"):
        if step.version > BASELINE:
            conn.execute(_template(step.text, schema_name, ts_config))
            _record(conn, _component(collection), step.version, step.name)


def drop_versions(conn: psycopg.Connection, collection: str) -> None:
    conn.execute("DELETE FROM pgcite.schema_migrations WHERE component = %s",
                 (_component(collection),))


# A collection's version, read with its registry row (one index lookup).
VERSION = sql.SQL("(SELECT coalesce(max(m.version), 0) FROM pgcite.schema_migrations m"
                  " WHERE m.component = 'collection:' || collections.name)")


def check_version(collection: str, version: int) -> None:
    """Refuse a collection whose schema this pgcite does not read: older ones need
    ``pgcite collection upgrade``, newer ones a newer pgcite."""
    latest = latest_version()
    if version < latest:
        raise CollectionOutdated(
            f"collection {collection!r} has schema version {version}; this pgcite reads "
            f"version {latest}",
            hint=f"run `pgcite collection upgrade {collection}` (once; it says what it does)")
    if version > latest:
        raise CollectionOutdated(
            f"collection {collection!r} has schema version {version}, newer than this "
            f"pgcite's {latest}", hint="upgrade pgcite")


class UpgradeStep(CamelModel):
    """One step applied to one collection."""

    collection: str
    version: int
    name: str
    seconds: float


def upgrade_collection(
    transaction: Callable[[], AbstractContextManager[psycopg.Connection]],
    collection: str,
    *,
    on_step: Callable[[str, int, str], None] | None = None,
) -> list[UpgradeStep]:
    """Apply the collection's pending steps, each in its own transaction (``transaction()``
    opens one) under the collection's upgrade lock: a second upgrader waits, then finds
    nothing left. ``on_step(collection, version, name)`` is told of each step before it runs.
    Returns what was done."""
    done: list[UpgradeStep] = []
    while True:
        with transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                         (f"pgcite:upgrade:{collection}",))
            row = conn.execute(sql.SQL(
                "SELECT schema_name, ts_config, {} FROM pgcite.collections WHERE name = %s"
            ).format(VERSION), (collection,)).fetchone()
            if row is None:
                return done  # dropped meanwhile
            schema_name, ts_config, version = row
            step = next((m for m in load_migrations("collection") if m.version > version), None)
            if step is None:
                return done
            if on_step is not None:
                on_step(collection, step.version, step.name)
            started = time.monotonic()
            try:
                conn.execute(_template(step.text, schema_name, ts_config))
            except psycopg.Error as exc:
                raise PgciteError(
                    f"upgrading {collection!r}: step {step.version} ({step.name}) failed:"
                    f" {str(exc).strip().splitlines()[0]}; the collection stays at version"
                    f" {version}", hint="nothing of that step was kept; fix the cause and run"
                    " `pgcite collection upgrade` again") from exc
            _record(conn, _component(collection), step.version, step.name)
        done.append(UpgradeStep(collection=collection, version=step.version, name=step.name,
                                seconds=round(time.monotonic() - started, 3)))
