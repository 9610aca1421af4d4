"""One search: embed the question, run the hybrid statement, shape the hits."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import psycopg
from psycopg import sql
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from pgcite._errors import ConfigError, PgciteError
from pgcite._inputs import MAX_QUERY_CHARS, check_text
from pgcite._types import DEFAULT_FUSION, Fusion, Mode
from pgcite.embed._base import Embedder
from pgcite.retrieve._answerability import names_text, signals_from_row
from pgcite.retrieve._filters import Filters, compile_filters
from pgcite.retrieve._hits import Hit, SearchResult
from pgcite.retrieve._query_text import parse_query
from pgcite.retrieve._sql import StatementShape, search_statement
from pgcite.store._collections import CollectionInfo, CollectionSettings
from pgcite.store._snapshots import SnapshotInfo

Ordering = Literal["score", "corpus"]
MIN_EF_SEARCH = 40


class SearchOptions(BaseModel):
    """How one search ranks: the tuning knobs, validated, beside :class:`Filters` (what it may
    return). ``None`` for ``fusion``, ``weights`` and ``term_depth`` means the collection's
    setting (see :meth:`resolved`); documented in docs/retrieval.md."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    top_k: StrictInt = Field(default=5, ge=1, le=1000, description="hits returned")
    mode: Mode = "hybrid"
    # Measured, not assumed: on SciFact train (809 claims, MiniLM) convex fusion of min-max
    # normalised leg scores gives nDCG@10 0.732 against RRF's 0.710 (k=60), at the same
    # Recall@100 (bench/README.md); the default is pgcite._types.DEFAULT_FUSION, via the
    # collection's settings. RRF is rank-only, so it needs no score normalisation.
    fusion: Fusion | None = None
    weights: tuple[float, float] | None = Field(
        default=None, description="(keyword, vector) leg weights in the fusion")
    rrf_k: StrictInt = Field(default=60, ge=1)
    fetch_multiplier: StrictInt = Field(default=3, ge=1, description="candidates per leg / top_k")
    # Default: as broad as the candidates wanted, at least MIN_EF_SEARCH. On SciFact a top-10
    # hybrid query took 4.1 ms p50 at ef 40 against 4.9 ms at a fixed 100, with the same
    # nDCG@10 (0.7309 vs 0.7308); iterative scans still fill a filtered LIMIT.
    ef_search: StrictInt | None = Field(default=None, ge=1, le=1000)
    ordering: Ordering = "score"
    # None: exact BM25. N: only each term's N highest-weighted postings count -- faster on big
    # collections, approximate (SciFact: p50 3.7 vs 4.7 ms at N=500, nDCG@10 -0.007).
    term_depth: StrictInt | None = Field(default=None, ge=1)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(f"bad search options: {_describe(exc)}",
                              hint="see docs/retrieval.md, 'Search options'") from None

    @classmethod
    def coerce(cls, value: SearchOptions | Mapping[str, Any] | None) -> SearchOptions:
        """``value`` as options (a mapping is validated like keyword arguments)."""
        if value is None:
            return cls()
        if isinstance(value, SearchOptions):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"search options must be an object, not {type(value).__name__}")
        return cls(**dict(value))

    def resolved(self, settings: CollectionSettings) -> SearchOptions:
        """These options with the collection's defaults filled in where unset."""
        return self.model_copy(update={
            "fusion": self.fusion or settings.fusion,
            "weights": self.weights if self.weights is not None else settings.weights,
            "term_depth": self.term_depth if self.term_depth is not None
            else settings.term_depth,
        })

    @property
    def fetch(self) -> int:
        """Candidates each leg fetches."""
        return max(self.top_k * self.fetch_multiplier, self.top_k)

    @property
    def hnsw_ef_search(self) -> int:
        """``ef_search``, or the default that follows the candidates wanted (capped at 1000)."""
        if self.ef_search is not None:
            return self.ef_search
        return min(max(MIN_EF_SEARCH, self.fetch), 1000)


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "options"
        if error["type"] == "literal_error":  # "unknown fusion 'borda' (use 'convex' or 'rrf')"
            expected = (error.get("ctx") or {}).get("expected", "")
            parts.append(f"unknown {where} {error.get('input')!r} (use {expected})")
            continue
        message = error["msg"]
        if error["type"] in ("int_type", "int_parsing", "int_from_float"):
            message = "must be a whole number"
        parts.append(f"{where} {message} (got {error.get('input')!r})")
    return "; ".join(parts)


def _hit(row: dict[str, Any], rank: int, mode: str) -> Hit:
    score = row["fused"]
    if mode == "keyword":
        score = row["kw_score"]
    elif mode == "vector":
        score = 1.0 - row["distance"]
    return Hit(
        id=row["id"], document_id=row["document_id"], citation=row["citation"],
        author=row["author"], corpus=row["corpus"], date_start=row["date_start"],
        date_end=row["date_end"], source=row["source"], locator=row["locator"],
        title=row["title"], body=row["body"], metadata=row["metadata"] or {},
        score=float(score), rank=rank,
        keyword_rank=row["kw_rank"], keyword_score=row["kw_score"],
        vector_rank=row["vec_rank"], vector_distance=row["distance"],
    )


def _order(rows: list[dict[str, Any]], ordering: Ordering) -> list[dict[str, Any]]:
    if ordering == "corpus":
        # Tier order (A, then B, then C …); undated tiers last; score order inside a tier.
        return sorted(rows, key=lambda r: (r["corpus"] is None, r["corpus"] or ""))
    return rows


def prepare_search(
    info: CollectionInfo,
    snapshot: SnapshotInfo,
    query: str,
    *,
    filters: Filters,
    options: SearchOptions,
    query_vector: np.ndarray | None,
    explain: bool = False,
) -> tuple[sql.SQL, dict[str, Any]]:
    """The statement and its bound parameters for one search (also used to EXPLAIN it)."""
    options = options.resolved(info.settings)
    weights = options.weights or (1.0, 1.0)  # resolved: never None
    compiled = compile_filters(filters, snapshot.metadata_fields or {}, info.schema_id)
    parsed = parse_query(query)
    params: dict[str, Any] = {
        **compiled.params, "snapshot_id": snapshot.snapshot_id,
        "ranking_text": parsed.ranking_text, "constraint": parsed.constraint,
        "names_text": names_text(parsed.ranking_text),
        "rrf_k": float(options.rrf_k),
        "w_keyword": float(weights[0]), "w_vector": float(weights[1]),
    }
    if options.mode != "keyword":
        if query_vector is None:
            raise PgciteError("a vector search needs a query vector")
        params["query_vector"] = np.asarray(query_vector, dtype=np.float32)
        params["ef_search"] = str(options.hnsw_ef_search)  # set by the statement (HNSW_KNOBS)
    statement = search_statement(StatementShape(
        schema=info.schema_name, ts_config=info.ts_config, model_key=snapshot.embed_model,
        dim=snapshot.embed_dim, halfvec=info.settings.halfvec, mode=options.mode,
        filters=compiled.sql().as_string(), constraint=parsed.constraint is not None,
        filtered=bool(compiled.clauses), fusion=options.fusion or DEFAULT_FUSION,
        fetch=options.fetch,
        # explain and tier ordering need the candidates below top_k; plain searches do not
        limit=options.top_k if options.ordering == "score" and not explain else None,
        term_depth=options.term_depth, snapshot_id=snapshot.snapshot_id,
        longest_list=snapshot.segment_chunks, deletions=snapshot.deleted_chunks != 0,
    ))
    return statement, params


def run_search(
    conn: psycopg.Connection,
    info: CollectionInfo,
    snapshot: SnapshotInfo,
    embedder: Embedder | None,
    query: str,
    *,
    filters: Filters,
    options: SearchOptions,
    explain: bool = False,
    query_vector: np.ndarray | None = None,
) -> SearchResult:
    """Search the given snapshot. ``query_vector`` skips embedding (benchmarks reuse vectors).
    A caller holding a pooled connection embeds first (:func:`embed_search_query`), then calls
    :func:`run_embedded`: that is what :class:`SearchView` does."""
    return run_embedded(conn, info, snapshot, query, filters=filters, options=options,
                        explain=explain,
                        embedded=embed_search_query(embedder, query, options, query_vector))


@dataclass(frozen=True)
class EmbeddedQuery:
    """A query ready to run: its vector (None in keyword mode), when the search began and
    what embedding it took."""

    vector: np.ndarray | None
    started: float
    timings: dict[str, float]


def embed_search_query(embedder: Embedder | None, query: str, options: SearchOptions,
                       query_vector: np.ndarray | None = None) -> EmbeddedQuery:
    """Embed ``query`` (unless keyword mode or ``query_vector`` given), before any connection
    is taken: embedding is CPU work (seconds on a loaded machine), and a pooled connection held
    through it is one every other request waits for -- past the pool's wait, a 503 for what
    was only slowness (bench/replicas.py, 32 clients on 2 cores)."""
    check_query(query)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    if options.mode != "keyword" and query_vector is None:
        if embedder is None:
            raise PgciteError("a vector search needs the snapshot's embedder")
        query_vector = embedder.embed_query(query)
        timings["embed"] = (time.perf_counter() - started) * 1000
    return EmbeddedQuery(query_vector, started, timings)


def run_embedded(
    conn: psycopg.Connection,
    info: CollectionInfo,
    snapshot: SnapshotInfo,
    query: str,
    *,
    filters: Filters,
    options: SearchOptions,
    embedded: EmbeddedQuery,
    explain: bool = False,
) -> SearchResult:
    """:func:`run_search` of a query embedded already (:func:`embed_search_query`)."""
    query_vector, started, timings = embedded.vector, embedded.started, dict(embedded.timings)
    statement, params = prepare_search(info, snapshot, query, filters=filters, options=options,
                                       query_vector=query_vector, explain=explain)
    t0 = time.perf_counter()
    planned = planned_ef_search(options)
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        if planned is None:  # one statement, one round trip
            rows = cur.execute(statement, params).fetchall()
        else:  # pipelined: BEGIN, the setting and the statement in one round trip
            with conn.pipeline(), conn.transaction():
                cur.execute(PLANNED_EF_SEARCH, (planned,))
                rows = cur.execute(statement, params).fetchall()
    timings["database"] = (time.perf_counter() - t0) * 1000
    return shape_result(rows, query, info, snapshot, options=options, explain=explain,
                        timings=timings, started=started)


def check_query(query: str) -> None:
    """A query no surface accepts (empty, over 2000 characters, a NUL or a lone surrogate) is
    refused before anything is embedded or run (pgcite/_inputs.py)."""
    check_text(query, "query", max_chars=MAX_QUERY_CHARS)


# pgvector's default ef_search: what PostgreSQL plans a search under when nothing sets it first.
PGVECTOR_EF_SEARCH = 40
PLANNED_EF_SEARCH = "SELECT set_config('hnsw.ef_search', %s, true)"


def planned_ef_search(options: SearchOptions) -> str | None:
    """The ef_search to set before a search's statement, so that PostgreSQL plans under it too
    (the statement sets it for the scan either way: HNSW_KNOBS), or None for pgvector's default.
    pgvector's cost estimate grows with ef_search, and at top-100 (ef_search 300) on SciFact and
    the Pepys diary PostgreSQL then sorts every chunk's exact distance: planned under the
    default it walked the index, faster (hybrid top-100 21.8 -> 15.5 ms) but approximate; at
    depth 100 the Pepys golden set's nDCG@10 fell 0.482 -> 0.477 for convex fusion and 0.456 ->
    0.445 for RRF, SciFact's default 0.733 -> 0.732 (bench/pepys.py, bench/scifact.py). A top-10
    search (ef_search 40) pays no extra round trip."""
    ef = options.hnsw_ef_search
    return None if ef == PGVECTOR_EF_SEARCH else str(ef)


def shape_result(rows: list[dict[str, Any]], query: str, info: CollectionInfo,
                 snapshot: SnapshotInfo, *, options: SearchOptions, explain: bool,
                 timings: dict[str, float], started: float) -> SearchResult:
    """The statement's rows as a :class:`SearchResult` (sync and async searches alike)."""
    rows = _order(rows, options.ordering)
    hits = [_hit(row, i + 1, options.mode) for i, row in enumerate(rows[: options.top_k])]
    dropped = [_hit(row, i + 1 + options.top_k, options.mode)
               for i, row in enumerate(rows[options.top_k:])] if explain else []
    timings["total"] = (time.perf_counter() - started) * 1000
    return SearchResult(
        query=query, mode=options.mode, collection=info.name, snapshot_id=snapshot.snapshot_id,
        embedding_model=snapshot.embed_model, hits=hits, dropped=dropped,
        confidence=rows[0]["best_similarity"] if rows else None,
        signals=signals_from_row(rows[0]) if rows else {},
        lexemes=list(rows[0]["lexemes"] or []) if rows else [], timings_ms=timings,
    )
