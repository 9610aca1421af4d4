"""One search: embed the question, run the hybrid statement, shape the hits."""

from __future__ import annotations

import time
from typing import Any, Literal

import numpy as np
import psycopg
from psycopg import sql

from pgcite._errors import ConfigError, PgciteError
from pgcite.embed._base import Embedder
from pgcite.retrieve._answerability import signals_from_row
from pgcite.retrieve._filters import Filters, compile_filters
from pgcite.retrieve._hits import Hit, SearchResult
from pgcite.retrieve._query_text import parse_query
from pgcite.retrieve._sql import FUSIONS, Fusion, Mode, build_search_sql
from pgcite.store._collections import CollectionInfo
from pgcite.store._snapshots import SnapshotInfo

Ordering = Literal["score", "corpus"]
MODES = ("keyword", "vector", "hybrid")
# Measured, not assumed: on SciFact train (809 claims, MiniLM) convex fusion of min-max normalised
# leg scores gives nDCG@10 0.732 against RRF's 0.710 (k=60), at the same Recall@100; see
# bench/README.md. RRF stays available (fusion="rrf"): it is rank-only, so it needs no score
# normalisation, and its k defaults to 60.
DEFAULT_FUSION = "convex"
MIN_EF_SEARCH = 40


class SearchOptions:
    """Tunables with their defaults (documented in docs/retrieval.md)."""

    def __init__(
        self,
        *,
        top_k: int = 5,
        mode: str = "hybrid",
        fetch_multiplier: int = 3,
        rrf_k: int = 60,
        weights: tuple[float, float] = (1.0, 1.0),
        ef_search: int | None = None,
        ordering: Ordering = "score",
        fusion: str = DEFAULT_FUSION,
        term_depth: int | None = None,
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"unknown mode {mode!r}", hint="use keyword, vector or hybrid")
        counts = {"top_k": top_k, "fetch_multiplier": fetch_multiplier, "ef_search": ef_search,
                  "term_depth": term_depth}
        for name, value in counts.items():  # row counts go into the statement as literals
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigError(f"{name} must be a whole number, not {value!r}")
        if not 1 <= top_k <= 1000:
            raise ConfigError(f"top_k must be between 1 and 1000, not {top_k}")
        bad_ef = ef_search is not None and not 1 <= ef_search <= 1000
        if fetch_multiplier < 1 or rrf_k < 1 or bad_ef:
            raise ConfigError("fetch_multiplier and rrf_k must be >= 1, ef_search 1..1000")
        if fusion not in FUSIONS:
            raise ConfigError(f"unknown fusion {fusion!r}", hint="use rrf or convex")
        if ordering not in ("score", "corpus"):
            raise ConfigError(f"unknown ordering {ordering!r}", hint="use score or corpus")
        self.top_k = int(top_k)  # an int subclass (numpy's) becomes a plain int
        self.mode: Mode = mode  # type: ignore[assignment]
        self.fetch = int(max(top_k * fetch_multiplier, top_k))
        self.rrf_k = rrf_k
        self.weights = weights
        # Default: as broad as the candidates wanted, at least MIN_EF_SEARCH. On SciFact a
        # top-10 hybrid query took 4.1 ms p50 at ef 40 against 4.9 ms at a fixed 100, with the
        # same nDCG@10 (0.7309 vs 0.7308); iterative scans still fill a filtered LIMIT.
        self.ef_search = (ef_search if ef_search is not None
                          else min(max(MIN_EF_SEARCH, self.fetch), 1000))
        self.ordering: Ordering = ordering
        self.fusion: Fusion = fusion  # type: ignore[assignment]
        if term_depth is not None and term_depth < 1:
            raise ConfigError("term_depth must be >= 1 (or None for exact BM25)")
        # None: exact BM25. N: only each term's N highest-weighted postings count — faster on
        # big collections, approximate (SciFact: p50 3.7 vs 4.7 ms at N=500, nDCG@10 -0.007).
        self.term_depth = None if term_depth is None else int(term_depth)


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
    evidence: bool = True,
) -> tuple[sql.Composed, dict[str, Any]]:
    """The statement and its bound parameters for one search (also used to EXPLAIN it);
    ``evidence=False`` leaves out the answerability signals (to measure what they cost)."""
    compiled = compile_filters(filters, snapshot.metadata_fields or {})
    parsed = parse_query(query)
    params: dict[str, Any] = {
        **compiled.params, "snapshot_id": snapshot.snapshot_id,
        "ranking_text": parsed.ranking_text, "constraint": parsed.constraint,
        "rrf_k": float(options.rrf_k),
        "w_keyword": float(options.weights[0]), "w_vector": float(options.weights[1]),
    }
    if options.mode != "keyword":
        if query_vector is None:
            raise PgciteError("a vector search needs a query vector")
        params["query_vector"] = np.asarray(query_vector, dtype=np.float32)
    statement = build_search_sql(
        schema=info.schema_id, ts_config=info.ts_config, model_key=snapshot.embed_model,
        dim=snapshot.embed_dim, halfvec=info.settings.halfvec, mode=options.mode,
        filters=compiled.sql(), constraint=parsed.constraint is not None,
        filtered=bool(compiled.clauses), fusion=options.fusion, fetch=options.fetch,
        # explain and tier ordering need the candidates below top_k; plain searches do not
        limit=options.top_k if options.ordering == "score" and not explain else None,
        term_depth=options.term_depth, evidence=evidence,
    )
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
    """Search the given snapshot. ``query_vector`` skips embedding (benchmarks reuse vectors)."""
    if not query.strip():
        raise ConfigError("the question is empty")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    if options.mode != "keyword" and query_vector is None:
        if embedder is None:
            raise PgciteError("a vector search needs the snapshot's embedder")
        t0 = time.perf_counter()
        query_vector = embedder.embed_query(query)
        timings["embed"] = (time.perf_counter() - t0) * 1000
    statement, params = prepare_search(info, snapshot, query, filters=filters, options=options,
                                       query_vector=query_vector, explain=explain)
    t0 = time.perf_counter()
    # Pipeline mode sends BEGIN, the settings and the statement in one network round trip.
    with conn.pipeline(), conn.transaction(), conn.cursor(
            row_factory=psycopg.rows.dict_row) as cur:
        # SET LOCAL: these settings end with the transaction, never leak to the pool.
        cur.execute("SELECT set_config('hnsw.ef_search', %s, true),"
                    " set_config('hnsw.iterative_scan', 'strict_order', true)",
                    (str(options.ef_search),))
        cur.execute(statement, params)
        rows = cur.fetchall()
    timings["database"] = (time.perf_counter() - t0) * 1000
    rows = _order(rows, options.ordering)
    hits = [_hit(row, i + 1, options.mode) for i, row in enumerate(rows[: options.top_k])]
    dropped = [_hit(row, i + 1 + options.top_k, options.mode)
               for i, row in enumerate(rows[options.top_k:])] if explain else []
    timings["total"] = (time.perf_counter() - started) * 1000
    return SearchResult(
        query=query, mode=options.mode, collection=info.name, snapshot_id=snapshot.snapshot_id,
        embedding_model=snapshot.embed_model, hits=hits, dropped=dropped,
        confidence=rows[0]["best_similarity"] if rows else None,
        signals=signals_from_row(rows[0]) if rows else {}, timings_ms=timings,
    )
