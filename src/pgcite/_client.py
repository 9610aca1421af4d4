"""The Python API: ``pgcite.connect()`` → :class:`Client` → :class:`Collection`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from pgcite._errors import PgciteError
from pgcite.config import Settings
from pgcite.embed._registry import DEFAULT_EMBEDDER, embedder_for_key, load_embedder
from pgcite.ingest._loaders import FieldMapping, Overrides
from pgcite.ingest._pipeline import IngestReport, ingest
from pgcite.retrieve._filters import Filters, MetadataPredicate
from pgcite.retrieve._hits import SearchResult
from pgcite.retrieve._search import Ordering, SearchOptions, run_search
from pgcite.store._collections import (
    CollectionInfo,
    CollectionSettings,
    collection_stats,
    create_collection,
    drop_collection,
    get_collection,
    list_collections,
)
from pgcite.store._database import Database
from pgcite.store._snapshots import SnapshotInfo, active_snapshot, list_snapshots


def _configure(conn: psycopg.Connection) -> None:
    register_vector(conn)
    conn.autocommit = True


class Client:
    """A connection to a pgcite database (embedded by default)."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.db = Database.open(self.settings)
        self._pool: ConnectionPool | None = None

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled connection (autocommit; use ``conn.transaction()`` for more)."""
        if self._pool is None:
            self._pool = ConnectionPool(
                self.db.url, min_size=1, max_size=8, configure=_configure, open=True,
                kwargs={"autocommit": True},
            )
        with self._pool.connection() as conn:
            yield conn

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def collections(self) -> list[CollectionInfo]:
        with self.connection() as conn:
            return list_collections(conn)

    def create_collection(
        self,
        name: str,
        *,
        language: str = "english",
        embedder: str = DEFAULT_EMBEDDER,
        settings: CollectionSettings | None = None,
    ) -> Collection:
        spec = load_embedder(embedder, self.settings).spec
        with self.db.transaction() as conn:
            create_collection(conn, name, language=language, embedder=spec, settings=settings)
        return self.collection(name)

    def drop_collection(self, name: str) -> None:
        with self.db.transaction() as conn:
            drop_collection(conn, name)

    def collection(self, name: str) -> Collection:
        with self.connection() as conn:
            info = get_collection(conn, name)
        return Collection(self, info)


class Collection:
    """One collection: ingest into it, search it."""

    def __init__(self, client: Client, info: CollectionInfo) -> None:
        self.client = client
        self.info = info

    @property
    def name(self) -> str:
        return self.info.name

    def stats(self) -> dict[str, Any]:
        with self.client.connection() as conn:
            return collection_stats(conn, self.info)

    def snapshots(self) -> list[SnapshotInfo]:
        with self.client.connection() as conn:
            return list_snapshots(conn, self.info)

    def active_snapshot(self) -> SnapshotInfo:
        with self.client.connection() as conn:
            snapshot = active_snapshot(conn, self.info)
        if snapshot is None:
            raise PgciteError(
                f"collection {self.name!r} has no active snapshot yet",
                hint=f"ingest documents first: pgcite ingest {self.name} PATH",
            )
        return snapshot

    def ingest(
        self,
        paths: Sequence[str | Path],
        *,
        mapping: FieldMapping | None = None,
        overrides: Overrides | None = None,
        corpus_version: str | None = None,
        replace: bool = False,
        activate: bool = True,
        progress: bool = False,
    ) -> IngestReport:
        return ingest(
            self.client.db, self.name, [Path(p) for p in paths], mapping=mapping,
            overrides=overrides, corpus_version=corpus_version, replace=replace,
            activate=activate, progress=progress, settings=self.client.settings,
        )

    def search(
        self,
        query: str,
        *,
        top_k: int = 5,
        mode: str = "hybrid",
        filters: Filters | dict[str, Any] | None = None,
        cutoff: dt.date | str | None = None,
        corpora: Sequence[str] | None = None,
        metadata: Sequence[MetadataPredicate] | None = None,
        explain: bool = False,
        ordering: Ordering = "score",
        fetch_multiplier: int = 3,
        rrf_k: int = 60,
        weights: tuple[float, float] = (1.0, 1.0),
        ef_search: int = 100,
        query_vector: np.ndarray | None = None,
        snapshot_id: int | None = None,
    ) -> SearchResult:
        """Passages for ``query`` with citation ids, filtered in SQL.

        ``cutoff``, ``corpora`` and ``metadata`` are shorthands merged into ``filters``.
        """
        merged = _merge_filters(filters, cutoff, corpora, metadata)
        options = SearchOptions(
            top_k=top_k, mode=mode, fetch_multiplier=fetch_multiplier, rrf_k=rrf_k,
            weights=weights, ef_search=ef_search, ordering=ordering,
        )
        snapshot = self._snapshot(snapshot_id)
        embedder = None
        if mode != "keyword" and query_vector is None:
            embedder = embedder_for_key(snapshot.embed_model, self.client.settings)
        with self.client.connection() as conn:
            return run_search(
                conn, self.info, snapshot, embedder, query, filters=merged, options=options,
                explain=explain, query_vector=query_vector,
            )

    def _snapshot(self, snapshot_id: int | None) -> SnapshotInfo:
        if snapshot_id is None:
            return self.active_snapshot()
        for snap in self.snapshots():
            if snap.snapshot_id == snapshot_id:
                return snap
        raise PgciteError(f"collection {self.name!r} has no snapshot {snapshot_id}")


def _merge_filters(
    filters: Filters | dict[str, Any] | None,
    cutoff: dt.date | str | None,
    corpora: Sequence[str] | None,
    metadata: Sequence[MetadataPredicate] | None,
) -> Filters:
    base = filters if isinstance(filters, Filters) else Filters.model_validate(filters or {})
    update: dict[str, Any] = {}
    if cutoff is not None:
        update["cutoff"] = dt.date.fromisoformat(cutoff) if isinstance(cutoff, str) else cutoff
    if corpora is not None:
        update["corpora"] = list(corpora)
    if metadata:
        update["metadata"] = [*base.metadata, *metadata]
    return Filters.model_validate({**base.model_dump(), **update}) if update else base


def connect(
    database_url: str | None = None, *, data_dir: str | Path | None = None
) -> Client:
    """Open pgcite: the embedded PostgreSQL by default, or the server at ``database_url``."""
    overrides: dict[str, Any] = {}
    if database_url is not None:
        overrides["database_url"] = database_url
    if data_dir is not None:
        overrides["data_dir"] = Path(data_dir)
    return Client(Settings(**overrides))
