"""Searchers over a pgcite collection's view (one snapshot, one set of models), for the harness:
one per retrieval configuration."""

from __future__ import annotations

import platform
import subprocess
import time
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path

import numpy as np
from psycopg import sql

from pgcite._errors import PgciteError
from pgcite._types import Fusion, Mode
from pgcite.evaluate._driver import Searcher, SearchOutcome
from pgcite.evaluate._golden import GoldenQuery, GoldenSet
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._pipeline import Stages
from pgcite.retrieve._search import SearchOptions, prepare_search
from pgcite.retrieve._view import SearchView

DEFAULT_DEPTH = 100  # documents wanted per query: enough for Recall@100
# Judgments name documents, hits are chunks: several chunks of one document collapse into one
# ranked document, so ask for more chunks than the documents wanted.
CHUNKS_PER_DOCUMENT = 2


def collection_searcher(
    view: SearchView,
    *,
    mode: Mode,
    depth: int = DEFAULT_DEPTH,
    vectors: Mapping[str, np.ndarray] | None = None,
    fusion: Fusion | None = None,
    weights: tuple[float, float] | None = None,
    term_depth: int | None = None,
    stages: Stages | Mapping[str, object] | None = None,
) -> Searcher:
    """A Searcher over ``view`` (one snapshot, one set of models: ``Collection.view()``) with
    the query's cutoff as a hard filter; the other options as in ``Collection.search``.

    ``vectors`` (query id -> embedding) lets several configurations share one embedding per
    query; the embedding time is then reported once, by whoever computed it.
    """
    options = SearchOptions(top_k=depth * CHUNKS_PER_DOCUMENT, mode=mode, fusion=fusion,
                            weights=weights, term_depth=term_depth)

    def search(query: GoldenQuery) -> SearchOutcome:
        vector = vectors.get(query.id) if vectors is not None else None
        result = view.search(query.text, filters=Filters(cutoff=query.cutoff), options=options,
                             stages=stages, query_vector=vector)
        return SearchOutcome(
            hits=result.hits, confidence=result.confidence, timings_ms=result.timings_ms
        )

    return search


def embed_queries(view: SearchView, golden: GoldenSet) -> tuple[dict[str, np.ndarray], list[float]]:
    """Embed every query once with the view's (its snapshot's) model; returns vectors and ms
    each."""
    embedder = view.embedder
    if embedder is None:
        raise PgciteError("embed_queries needs a view with its embedder (Collection.view())")
    vectors: dict[str, np.ndarray] = {}
    timings: list[float] = []
    for query in golden.queries:
        started = time.perf_counter()
        vectors[query.id] = embedder.embed_query(query.text)
        timings.append((time.perf_counter() - started) * 1000)
    return vectors, timings


def run_metadata(view: SearchView, extra: Mapping[str, object] | None = None) -> dict[str, object]:
    """What a result must record to be reproduced: model, versions, snapshot, commit."""
    snapshot = view.snapshot
    with view.connection() as conn:
        server = conn.execute("SHOW server_version").fetchone()
        vector = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
    return {
        "collection": view.info.name,
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


def index_usage(view: SearchView, query: str) -> dict[str, object]:
    """Which indexes each leg's plan uses for ``query`` (EXPLAIN ANALYZE, the real planner
    choice, nothing forced). A tiny collection may rightly prefer a sequential scan."""
    embedder = view.embedder
    if embedder is None:
        raise PgciteError("index_usage needs a view with its embedder (Collection.view())")
    vector = embedder.embed_query(query)
    out: dict[str, object] = {}
    legs: tuple[Mode, ...] = ("keyword", "vector")
    for leg in legs:
        statement, params = prepare_search(
            view.info, view.snapshot, query, filters=Filters(),
            options=SearchOptions(mode=leg, top_k=10), query_vector=vector)
        with view.connection() as conn:  # the statement sets the HNSW scan's knobs itself
            row = conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) {}").format(statement),
                               params).fetchone()
        plan: object = row[0][0] if row else {}
        top = plan if isinstance(plan, dict) else {}
        out[leg] = {"indexes": sorted(_index_names(top.get("Plan", {}))),
                    "execution_ms": round(float(top.get("Execution Time", 0.0)), 3)}
    return out


def _index_names(node: object) -> set[str]:
    """The index names anywhere in an EXPLAIN (FORMAT JSON) plan node (JSON: checked, not
    trusted)."""
    if not isinstance(node, dict):
        return set()
    name = node.get("Index Name")
    names = {name} if isinstance(name, str) else set()
    children = node.get("Plans", [])
    for child in children if isinstance(children, list) else []:
        names |= _index_names(child)
    return names
