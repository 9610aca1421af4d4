"""Searchers over a pgcite collection, for the harness: one per retrieval configuration."""

from __future__ import annotations

import hashlib
import platform
import subprocess
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from pgcite.evaluate._driver import Searcher, SearchOutcome
from pgcite.evaluate._golden import GoldenQuery, GoldenSet

DEFAULT_DEPTH = 100  # documents wanted per query: enough for Recall@100
# Judgments name documents, hits are chunks: several chunks of one document collapse into one
# ranked document, so ask for more chunks than the documents wanted.
CHUNKS_PER_DOCUMENT = 2


def collection_searcher(
    collection: Any,
    *,
    mode: str,
    depth: int = DEFAULT_DEPTH,
    vectors: Mapping[str, np.ndarray] | None = None,
    **options: Any,
) -> Searcher:
    """A Searcher running ``collection.search`` with the query's cutoff as a hard filter.

    ``vectors`` (query id -> embedding) lets several configurations share one embedding per
    query; the embedding time is then reported once, by whoever computed it.
    """

    def search(query: GoldenQuery) -> SearchOutcome:
        vector = vectors.get(query.id) if vectors is not None else None
        result = collection.search(
            query.text,
            top_k=depth * CHUNKS_PER_DOCUMENT,
            mode=mode,
            cutoff=query.cutoff,
            query_vector=vector,
            **options,
        )
        return SearchOutcome(
            hits=result.hits, confidence=result.confidence, timings_ms=result.timings_ms
        )

    return search


def embed_queries(collection: Any, golden: GoldenSet) -> tuple[dict[str, np.ndarray], list[float]]:
    """Embed every query once with the collection's active model; returns vectors and ms each."""
    import time

    from pgcite.embed._registry import embedder_for_key

    embedder = embedder_for_key(collection.active_snapshot().embed_model)
    vectors: dict[str, np.ndarray] = {}
    timings: list[float] = []
    for query in golden.queries:
        started = time.perf_counter()
        vectors[query.id] = embedder.embed_query(query.text)
        timings.append((time.perf_counter() - started) * 1000)
    return vectors, timings


def run_metadata(collection: Any, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a result must record to be reproduced: model, versions, snapshot, commit."""
    snapshot = collection.active_snapshot()
    with collection.client.connection() as conn:
        server = conn.execute("SHOW server_version").fetchone()
        vector = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
    return {
        "collection": collection.name,
        "snapshot_id": snapshot.snapshot_id,
        "embedding_model": snapshot.embed_model,
        "ts_config": snapshot.ts_config,
        "chunks": snapshot.n_chunks,
        "documents": snapshot.n_documents,
        "pgcite": version("pgcite"),
        "postgres": server[0] if server else None,
        "pgvector": vector[0] if vector else None,
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {_cpus()} CPUs",
        "git_commit": git_commit(),
        **(extra or {}),
    }


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def index_usage(collection: Any, query: str) -> dict[str, Any]:
    """Which indexes each leg's plan uses for ``query`` (EXPLAIN ANALYZE, the real planner
    choice, nothing forced). A tiny collection may rightly prefer a sequential scan."""
    from psycopg import sql

    from pgcite.embed._registry import embedder_for_key
    from pgcite.retrieve._filters import Filters
    from pgcite.retrieve._search import SearchOptions, prepare_search

    snapshot = collection.active_snapshot()
    vector = embedder_for_key(snapshot.embed_model).embed_query(query)
    out: dict[str, Any] = {}
    for leg in ("keyword", "vector"):
        statement, params = prepare_search(
            collection.info, snapshot, query, filters=Filters(),
            options=SearchOptions(mode=leg, top_k=10), query_vector=vector)
        with collection.client.connection() as conn, conn.transaction():
            conn.execute("SELECT set_config('hnsw.iterative_scan', 'strict_order', true)")
            row = conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) {}").format(statement),
                               params).fetchone()
        plan = row[0][0] if row else {}
        out[leg] = {"indexes": sorted(_index_names(plan.get("Plan", {}))),
                    "execution_ms": round(float(plan.get("Execution Time", 0.0)), 3)}
    return out


def _index_names(node: dict[str, Any]) -> set[str]:
    names = {node["Index Name"]} if "Index Name" in node else set()
    for child in node.get("Plans", []):
        names |= _index_names(child)
    return names
