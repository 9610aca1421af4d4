"""The collection registry: one PostgreSQL schema per collection.

A collection name is checked against ``^[a-z][a-z0-9_]{0,47}$`` and reaches SQL only through
``psycopg.sql.Identifier`` (as part of its schema name ``pgc_<name>``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from typing import Any, Literal

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, Field, field_validator

from pgcite._errors import CollectionExists, CollectionNotFound, ConfigError
from pgcite._gate_settings import GateSettings
from pgcite._types import DEFAULT_FUSION, Fusion
from pgcite.embed._base import EmbedderSpec
from pgcite.store._migrations import VERSION, check_version, create_schema, drop_versions

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
SCHEMA_PREFIX = "pgc_"
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
MAX_VECTOR_INDEX_DIM = 2000  # pgvector's HNSW limit for vector; halfvec goes to 4000


class CollectionSettings(BaseModel):
    """Per-collection options (stored as jsonb, so new options need no migration)."""

    model_config = ConfigDict(extra="forbid")

    halfvec: bool = Field(default=False, description="index embeddings as halfvec (half size)")
    chunk_tokens: int = Field(default=350, ge=32, le=8192)
    persona_author: str | None = None
    golden: str | None = Field(
        default=None, description="golden set that gates activation (None: no gate)")
    gate: GateSettings = Field(default_factory=GateSettings)
    fusion: Fusion = Field(
        default=DEFAULT_FUSION, description="default fusion of the hybrid mode")
    weights: tuple[float, float] = Field(
        default=(1.0, 1.0), description="default (keyword, vector) leg weights in the fusion")
    contextual: Literal["off", "header", "llm"] = Field(
        default="header", description="what the embedder reads before each chunk: its title (off), "
        "or a one-line header of title, locator, dates and author (header); the stored body, "
        "citations and keyword index are the same either way. Changing it re-embeds every "
        "document at the next ingest")
    entities: Literal["auto", "off"] = Field(
        default="auto", description="named entities per chunk at ingest (auto: when a spaCy "
        "pipeline for the collection's language is installed, the `entities` extra; off: never)")
    term_depth: int | None = Field(
        default=None, ge=1, description="BM25 postings counted per query term (None: exact); "
        "1000 keeps a 1M-chunk collection's hybrid query near 8 ms p50")

    stages: dict[str, Any] = Field(
        default_factory=dict, description="optional quality stages (validated as "
        "pgcite.retrieve.Stages: route, decompose, hyde, rerank, rerank_depth, boosts, timeouts)")
    abstention: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="fitted answerability models keyed by the embedding "
        "model (id@version) they were fitted for (validated as "
        "pgcite.retrieve._answerability.AnswerabilityModel; written by "
        "`pgcite eval --fit-abstention`)")

    @field_validator("weights")
    @classmethod
    def _positive(cls, value: tuple[float, float]) -> tuple[float, float]:
        if min(value) < 0 or sum(value) <= 0:
            raise ValueError("leg weights must be >= 0 and not both 0")
        return value


class CollectionInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    schema_name: str
    ts_config: str
    embedder: EmbedderSpec
    settings: CollectionSettings
    created_at: dt.datetime
    schema_version: int  # of its schema (store._migrations)

    @property
    def schema_id(self) -> sql.Identifier:
        return sql.Identifier(self.schema_name)


def validate_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(
            f"invalid collection name {name!r}",
            hint="use 1-48 characters: a lowercase letter, then lowercase letters, digits or _",
        )
    return name


def _row_to_info(row: tuple[Any, ...]) -> CollectionInfo:
    name, schema_name, ts_config, embedder, settings, created_at, schema_version = row
    return CollectionInfo(
        name=name,
        schema_name=schema_name,
        ts_config=ts_config,
        embedder=EmbedderSpec.model_validate(embedder),
        # Collections stored before the contextual setting existed were embedded without the
        # header: they keep "off" (changing it would re-embed them at their next ingest).
        settings=CollectionSettings.model_validate({"contextual": "off", **settings}),
        created_at=created_at,
        schema_version=schema_version,
    )


_COLUMNS = sql.SQL("name, schema_name, ts_config, embedder, settings, created_at, {}").format(
    VERSION)
_SELECT = sql.SQL("SELECT {} FROM pgcite.collections").format(_COLUMNS)


def get_collection(conn: psycopg.Connection, name: str, *,
                   any_version: bool = False) -> CollectionInfo:
    """The collection's registry row; one whose schema this pgcite does not read (an older
    version: ``pgcite collection upgrade``) is refused, unless ``any_version``."""
    validate_name(name)
    row = conn.execute(_SELECT + sql.SQL(" WHERE name = %s"), (name,)).fetchone()
    if row is None:
        known = [r[0] for r in conn.execute("SELECT name FROM pgcite.collections ORDER BY name")]
        raise CollectionNotFound(
            f"no collection named {name!r}",
            hint=("existing: " + ", ".join(known)) if known else "create one with "
            "`pgcite collection create NAME`",
        )
    info = _row_to_info(row)
    if not any_version:
        check_version(info.name, info.schema_version)
    return info


async def aget_collection(conn: psycopg.AsyncConnection, name: str) -> CollectionInfo:
    """:func:`get_collection` on an async connection (the service's request path); an unknown
    name raises without the list of known ones (the service never shows it)."""
    validate_name(name)
    row = await (await conn.execute(_SELECT + sql.SQL(" WHERE name = %s"), (name,))).fetchone()
    if row is None:
        raise CollectionNotFound(f"no collection named {name!r}")
    info = _row_to_info(row)
    check_version(info.name, info.schema_version)
    return info


def list_collections(conn: psycopg.Connection) -> list[CollectionInfo]:
    return [_row_to_info(row) for row in conn.execute(_SELECT + sql.SQL(" ORDER BY name"))]


def check_ts_config(conn: psycopg.Connection, language: str) -> str:
    configs = [r[0] for r in conn.execute("SELECT cfgname FROM pg_ts_config ORDER BY cfgname")]
    if language not in configs:
        raise ConfigError(
            f"unknown text-search language {language!r}",
            hint="choose one of: " + ", ".join(configs),
        )
    return language


def vector_type(dim: int, halfvec: bool) -> Literal["halfvec", "vector"]:
    """The type a model's embeddings are indexed (and queried) as: the one place it is decided.
    HNSW indexes vector up to 2000 dims; above that only halfvec fits."""
    return "halfvec" if halfvec or dim > MAX_VECTOR_INDEX_DIM else "vector"


def vector_expression(dim: int, halfvec: bool) -> sql.Composable:
    """The indexed expression: the query's ORDER BY must use exactly the same one."""
    return sql.SQL("(embedding::{}({}))").format(sql.SQL(vector_type(dim, halfvec)),
                                                 sql.Literal(dim))


def vector_opclass(dim: int, halfvec: bool) -> sql.Composable:
    return sql.SQL(f"{vector_type(dim, halfvec)}_cosine_ops")


def vector_index_name(model_key: str) -> str:
    """The name of a model's partial HNSW index (a hash: model keys are not identifiers)."""
    return f"chunks_hnsw_{hashlib.sha1(model_key.encode()).hexdigest()[:10]}"


def ensure_vector_index(
    conn: psycopg.Connection, schema_name: str, spec: EmbedderSpec, halfvec: bool
) -> None:
    """An HNSW index (cosine) over this model's embeddings only: a partial index per model lets
    embeddings of different dimensions live in one table during a model switch."""
    conn.execute(
        sql.SQL(
            "CREATE INDEX IF NOT EXISTS {name} ON {schema}.chunks USING hnsw ({expr} {ops})"
            " WITH (m = {m}, ef_construction = {efc}) WHERE embed_model = {model}"
        ).format(
            name=sql.Identifier(vector_index_name(spec.model_key)),
            schema=sql.Identifier(schema_name),
            expr=vector_expression(spec.dim, halfvec),
            ops=vector_opclass(spec.dim, halfvec),
            m=sql.Literal(HNSW_M),
            efc=sql.Literal(HNSW_EF_CONSTRUCTION),
            model=sql.Literal(spec.model_key),
        )
    )


def update_settings(
    conn: psycopg.Connection, name: str, settings: CollectionSettings
) -> CollectionInfo:
    """Replace a collection's settings (validated by the model before they reach the row)."""
    row = conn.execute(
        sql.SQL("UPDATE pgcite.collections SET settings = %s WHERE name = %s"
                " RETURNING {}").format(_COLUMNS),
        (Jsonb(settings.model_dump(mode="json")), validate_name(name)),
    ).fetchone()
    if row is None:
        return get_collection(conn, name)  # raises CollectionNotFound with the usual hint
    return _row_to_info(row)


def set_embedder(conn: psycopg.Connection, name: str, spec: EmbedderSpec) -> None:
    """Record the collection's embedder: only ever called when a snapshot embedded with
    ``spec`` becomes active, so the record always names the model that serves queries."""
    conn.execute(
        "UPDATE pgcite.collections SET embedder = %s WHERE name = %s",
        (Jsonb(spec.model_dump()), validate_name(name)),
    )


def create_collection(
    conn: psycopg.Connection,
    name: str,
    *,
    language: str,
    embedder: EmbedderSpec,
    settings: CollectionSettings | None = None,
) -> CollectionInfo:
    """Register the collection and create its schema, in the caller's transaction."""
    validate_name(name)
    check_ts_config(conn, language)
    settings = settings or CollectionSettings()
    schema_name = SCHEMA_PREFIX + name
    row = conn.execute(
        "INSERT INTO pgcite.collections (name, schema_name, ts_config, embedder, settings)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING RETURNING name",
        (name, schema_name, language, Jsonb(embedder.model_dump()), Jsonb(settings.model_dump())),
    ).fetchone()
    if row is None:
        raise CollectionExists(
            f"collection {name!r} exists already",
            hint="ingest into it, or drop it first with `pgcite collection drop`",
        )
    create_schema(conn, name, schema_name, language)
    ensure_vector_index(conn, schema_name, embedder, settings.halfvec)
    return get_collection(conn, name)


def drop_collection(conn: psycopg.Connection, name: str) -> None:
    info = get_collection(conn, name, any_version=True)  # an outdated one can go too
    conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(info.schema_id))
    conn.execute("DELETE FROM pgcite.collections WHERE name = %s", (name,))
    drop_versions(conn, name)


def collection_stats(conn: psycopg.Connection, info: CollectionInfo) -> dict[str, Any]:
    """Counts for `collection show`: what is live, and what is stored."""
    query = sql.SQL(
        """SELECT
             (SELECT snapshot_id FROM {s}.active),
             (SELECT count(*) FROM {s}.snapshots),
             (SELECT count(DISTINCT document_id) FROM {s}.versions),
             (SELECT count(*) FROM {s}.versions),
             (SELECT count(*) FROM {s}.chunks)"""
    ).format(s=info.schema_id)
    active, snapshots, documents, versions, chunks = conn.execute(query).fetchone() or (
        None, 0, 0, 0, 0)
    live: dict[str, Any] = {}
    if active is not None:
        row = conn.execute(
            sql.SQL(
                "SELECT n_documents, n_chunks, corpus_version, finalized_at FROM {s}.snapshots"
                " WHERE snapshot_id = %s"
            ).format(s=info.schema_id),
            (active,),
        ).fetchone()
        if row:
            live = {"documents": row[0], "chunks": row[1], "corpus_version": row[2],
                    "since": row[3].isoformat() if row[3] else None}
    return {
        "active_snapshot": active,
        "snapshots": snapshots,
        "live": live,
        "stored": {"documents": documents, "versions": versions, "chunks": chunks},
    }
