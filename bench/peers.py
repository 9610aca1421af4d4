"""SciFact (BEIR), train claims: pgcite's hybrid search beside the Haystack pgvector hybrid pipeline
that a Haystack user would build, on the same PostgreSQL server, over the same chunk texts and the
same MiniLM vectors, with the same precomputed query vectors (retrieval is measured, not embedding).

Haystack side: ``PgvectorDocumentStore`` (its own table ``haystack_scifact``, HNSW, cosine) filled
from pgcite's active snapshot, then ``PgvectorKeywordRetriever`` + ``PgvectorEmbeddingRetriever`` ->
``DocumentJoiner(join_mode="reciprocal_rank_fusion")``. A third baseline is the hybrid query one
would write by hand: one statement, an OR ``ts_rank`` keyword leg and an HNSW leg fused with RRF,
over pgcite's own chunk table. Quality: the harness (ranx); latency: interleaved sequential loops.

    PGCITE_DATA_DIR=/tmp/pgcbench python bench/peers.py   # writes bench/results/peers/
    python bench/peers.py --limit 50                       # smoke run on the first 50 queries
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import numpy as np
import psycopg
from _common import DATA, client, write
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import dict_row

import pgcite
from pgcite.evaluate import (
    GoldenQuery,
    GoldenSet,
    ScoredHit,
    Searcher,
    SearchOutcome,
    evaluate,
    load_golden,
)
from pgcite.evaluate._collection import embed_queries, run_metadata

TABLE = "haystack_scifact"
RRF_K = 60  # pgcite's default; Haystack's RRF uses 61 with 0-based ranks, i.e. the same
EF_SEARCH = 100  # pgcite's default hnsw.ef_search (Haystack leaves pgvector's default, 40)


# --- the shared corpus ----------------------------------------------------------------------------


def snapshot_chunks(col: pgcite.Collection) -> list[dict[str, Any]]:
    """The active snapshot's chunks: id, document, title, body and the stored vector."""
    snap = col.active_snapshot()
    with col.client.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        cur.execute(sql.SQL(
            "SELECT c.id, c.document_id, c.title, c.body, c.embedding FROM {s}.chunks c"
            " JOIN {s}.snapshot_members m USING (version_pk) WHERE m.snapshot_id = %s"
            " ORDER BY c.chunk_pk").format(s=col.info.schema_id), (snap.snapshot_id,))
        return cur.fetchall()


def chunk_text(row: dict[str, Any]) -> str:
    """What pgcite's tsvector indexes (title, then body), as one Haystack ``content``."""
    return f"{row['title']}\n{row['body']}" if row["title"] else row["body"]


def pgcite_searcher(col: pgcite.Collection, mode: pgcite.Mode, top_k: int,
                    vectors: dict[str, np.ndarray] | None = None) -> Searcher:
    """``col.search`` asking for exactly ``top_k`` chunks, as many as the peers get (the harness's
    collection_searcher may ask for more chunks than documents wanted)."""

    def search(query: GoldenQuery) -> SearchOutcome:
        vector = vectors[query.id] if vectors is not None else None
        result = col.search(query.text, top_k=top_k, mode=mode, query_vector=vector)
        return SearchOutcome(hits=result.hits, confidence=result.confidence,
                             timings_ms=result.timings_ms)

    return search


# --- Haystack -------------------------------------------------------------------------------------


def haystack_store(url: str, *, recreate: bool, ef_search: int | None = None) -> Any:
    from haystack.utils import Secret
    from haystack_integrations.document_stores.pgvector import PgvectorDocumentStore

    return PgvectorDocumentStore(
        connection_string=Secret.from_token(url), table_name=TABLE, embedding_dimension=384,
        vector_function="cosine_similarity", search_strategy="hnsw", recreate_table=recreate,
        hnsw_index_name=f"{TABLE}_hnsw", keyword_index_name=f"{TABLE}_keyword",
        hnsw_ef_search=ef_search)


def load_haystack(url: str, rows: list[dict[str, Any]]) -> tuple[Any, dict[str, float]]:
    """Recreate the Haystack table and write every chunk with pgcite's own vector."""
    from haystack import Document
    from haystack.document_stores.types import DuplicatePolicy

    store = haystack_store(url, recreate=True)
    docs = [Document(id=r["id"], content=chunk_text(r), meta={"document_id": r["document_id"]},
                     embedding=np.asarray(r["embedding"].to_numpy(), dtype=np.float32).tolist())
            for r in rows]
    started = time.perf_counter()
    for i in range(0, len(docs), 1000):
        store.write_documents(docs[i:i + 1000], policy=DuplicatePolicy.OVERWRITE)
    seconds = time.perf_counter() - started
    count = store.count_documents()
    if count != len(rows):
        raise SystemExit(f"Haystack table holds {count} documents, expected {len(rows)}")
    print(f"haystack: wrote {count} documents in {seconds:.1f} s", file=sys.stderr)
    return store, {"documents": count, "write_s": round(seconds, 1)}


def haystack_pipeline(store: Any, top_k: int) -> Any:
    """The documented Haystack hybrid: keyword + embedding retrievers, RRF joiner."""
    from haystack import Pipeline
    from haystack.components.joiners import DocumentJoiner
    from haystack_integrations.components.retrievers.pgvector import (
        PgvectorEmbeddingRetriever,
        PgvectorKeywordRetriever,
    )

    pipe = Pipeline()
    pipe.add_component("keyword", PgvectorKeywordRetriever(document_store=store, top_k=top_k))
    pipe.add_component("vector", PgvectorEmbeddingRetriever(document_store=store, top_k=top_k))
    pipe.add_component("joiner", DocumentJoiner(join_mode="reciprocal_rank_fusion", top_k=top_k))
    pipe.connect("keyword", "joiner")
    pipe.connect("vector", "joiner")
    return pipe


def pipeline_input(query: GoldenQuery, vector: np.ndarray) -> dict[str, Any]:
    return {"keyword": {"query": query.text}, "vector": {"query_embedding": vector.tolist()}}


def haystack_searcher(pipe: Any, vectors: dict[str, np.ndarray],
                      empty_keyword: set[str] | None = None) -> Searcher:
    def search(query: GoldenQuery) -> SearchOutcome:
        out = pipe.run(pipeline_input(query, vectors[query.id]),
                       include_outputs_from={"keyword", "vector"})
        if empty_keyword is not None and not out["keyword"]["documents"]:
            empty_keyword.add(query.id)
        near = out["vector"]["documents"]
        hits = [ScoredHit(id=d.id, document_id=d.meta["document_id"], score=float(d.score))
                for d in out["joiner"]["documents"]]
        return SearchOutcome(hits=hits, confidence=float(near[0].score) if near else None)

    return search


def haystack_keyword_searcher(store: Any, top_k: int) -> Searcher:
    from haystack_integrations.components.retrievers.pgvector import PgvectorKeywordRetriever

    retriever = PgvectorKeywordRetriever(document_store=store, top_k=top_k)

    def search(query: GoldenQuery) -> SearchOutcome:
        docs = retriever.run(query=query.text)["documents"]
        return SearchOutcome(hits=[ScoredHit(id=d.id, document_id=d.meta["document_id"],
                                       score=float(d.score or 0.0)) for d in docs])

    return search


# --- the hand-written one-statement baseline ------------------------------------------------------

# OR over the query's lexemes (plainto_tsquery ANDs them), ranked by ts_rank on pgcite's stored
# tsvector; HNSW on the same partial index pgcite uses; RRF in SQL. No BM25 statistics.
_PLAIN = """
WITH q AS (
    SELECT replace(plainto_tsquery({cfg}::regconfig, %(text)s)::text, '&', '|')::tsquery AS q
), kw AS (
    SELECT c.chunk_pk, row_number() OVER (ORDER BY ts_rank(c.tsv, q.q) DESC, c.chunk_pk) AS rank
    FROM {s}.chunks c, q WHERE c.tsv @@ q.q
    ORDER BY rank LIMIT %(fetch)s
), vec AS (
    SELECT chunk_pk, row_number() OVER (ORDER BY d, chunk_pk) AS rank, d
    FROM (SELECT c.chunk_pk, c.embedding::vector(384) <=> %(v)s::vector(384) AS d
          FROM {s}.chunks c WHERE c.embed_model = {model}
          ORDER BY c.embedding::vector(384) <=> %(v)s::vector(384) LIMIT %(fetch)s) near
)
SELECT c.id, c.document_id,
       coalesce(1.0 / ({k} + kw.rank), 0) + coalesce(1.0 / ({k} + vec.rank), 0) AS fused,
       vec.d AS distance
FROM kw FULL OUTER JOIN vec USING (chunk_pk) JOIN {s}.chunks c USING (chunk_pk)
ORDER BY fused DESC, coalesce(vec.rank, 1e9), c.chunk_pk
LIMIT %(limit)s
"""


class PlainSQL:
    """One connection, one statement per query; ef_search and iterative scan as pgcite sets them."""

    def __init__(self, url: str, col: pgcite.Collection) -> None:
        snap = col.active_snapshot()
        self.conn = psycopg.connect(url, autocommit=True)
        register_vector(self.conn)
        self.conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(EF_SEARCH)))
        self.conn.execute("SET hnsw.iterative_scan = strict_order")
        total = self.conn.execute(sql.SQL("SELECT count(*) FROM {s}.chunks").format(
            s=col.info.schema_id)).fetchone()
        if total is None or total[0] != snap.n_chunks:
            raise SystemExit("the plain baseline assumes the chunk table holds one snapshot")
        self.statement = sql.SQL(_PLAIN).format(
            s=col.info.schema_id, cfg=sql.Literal(snap.ts_config),
            model=sql.Literal(snap.embed_model), k=sql.Literal(RRF_K))

    def run(self, text: str, vector: np.ndarray, top_k: int) -> list[tuple[Any, ...]]:
        return self.conn.execute(self.statement, {
            "text": text, "v": vector, "fetch": 3 * top_k, "limit": top_k}).fetchall()

    def searcher(self, vectors: dict[str, np.ndarray], top_k: int) -> Searcher:
        def search(query: GoldenQuery) -> SearchOutcome:
            rows = self.run(query.text, vectors[query.id], top_k)
            distances = [r[3] for r in rows if r[3] is not None]
            return SearchOutcome(
                hits=[ScoredHit(id=r[0], document_id=r[1], score=float(r[2])) for r in rows],
                confidence=1.0 - min(distances) if distances else None)

        return search


# --- latency ---------------------------------------------------------------------------------------


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered), 2),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
            "mean_ms": round(statistics.fmean(ordered), 2), "n": len(ordered)}


def latency_top10(col: pgcite.Collection, store: Any, plain: PlainSQL, golden: GoldenSet,
                  vectors: dict[str, np.ndarray]) -> dict[str, Any]:
    """Top-10 hybrid, sequential; each query runs every variant, in a rotating order, so that the
    noise of a shared machine falls on all of them alike. Vectors are precomputed throughout."""
    from haystack.components.joiners import DocumentJoiner
    from haystack_integrations.components.retrievers.pgvector import (
        PgvectorEmbeddingRetriever,
        PgvectorKeywordRetriever,
    )

    pipe = haystack_pipeline(store, 10)
    keyword = PgvectorKeywordRetriever(document_store=store, top_k=10)
    embedding = PgvectorEmbeddingRetriever(document_store=store, top_k=10)
    joiner = DocumentJoiner(join_mode="reciprocal_rank_fusion", top_k=10)
    # Haystack's two statements, on a connection of our own, fetched as its store fetches them.
    hs_conn = psycopg.connect(col.client.db.url, autocommit=True)
    register_vector(hs_conn)
    samples: dict[str, list[float]] = {}

    def timed(name: str, call: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        out = call()
        samples.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        return out

    def pgcite_call(query: GoldenQuery) -> None:
        result = timed("pgcite: col.search wall", lambda: col.search(
            query.text, top_k=10, mode="hybrid", query_vector=vectors[query.id]))
        samples.setdefault("pgcite: database", []).append(result.timings_ms["database"])

    def haystack_components(query: GoldenQuery) -> None:
        def run() -> Any:
            kw = keyword.run(query=query.text)["documents"]
            vec = embedding.run(query_embedding=vectors[query.id].tolist())["documents"]
            return joiner.run(documents=[kw, vec])

        timed("haystack: components, no Pipeline", run)

    def haystack_sql(query: GoldenQuery) -> None:
        kw_sql, kw_params = store._build_keyword_retrieval_query(query=query.text, top_k=10)
        vec_sql, vec_params = store._check_and_build_embedding_retrieval_query(
            query_embedding=vectors[query.id].tolist(), vector_function=None, top_k=10)

        def run() -> None:
            with hs_conn.cursor(row_factory=dict_row) as cur:
                cur.execute(kw_sql, (query.text, *kw_params)).fetchall()
                cur.execute(vec_sql, vec_params).fetchall()

        timed("haystack: its two SQL statements", run)

    variants: list[Callable[[GoldenQuery], Any]] = [
        lambda q: timed("haystack: pipeline.run", lambda: pipe.run(
            pipeline_input(q, vectors[q.id]))),
        haystack_components,
        haystack_sql,
        pgcite_call,
        lambda q: timed("plain SQL: OR ts_rank + HNSW", lambda: plain.run(
            q.text, vectors[q.id], 10)),
    ]
    for query in golden.queries[:20]:  # warm-up, not recorded
        for variant in variants:
            variant(query)
    samples.clear()
    for i, query in enumerate(golden.queries):
        for j in range(len(variants)):
            variants[(i + j) % len(variants)](query)
    hs_conn.close()
    return {name: summary(values) for name, values in samples.items()}


# --- report ---------------------------------------------------------------------------------------


def peer_summary(result: Any, latency: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = ["# pgcite vs Haystack pgvector hybrid — SciFact train", "",
             f"{meta['queries']} claims, {meta['chunks']:,} chunks of {meta['documents']:,} "
             "abstracts, one PostgreSQL server "
             f"({meta['postgres']}, pgvector {meta['pgvector']}), the same chunk texts and "
             "MiniLM vectors on both sides, query vectors precomputed. "
             f"haystack-ai {meta['haystack-ai']}, pgvector-haystack {meta['pgvector-haystack']}, "
             f"pgcite {meta['pgcite']}.", "",
             "## Quality (ranx; document-level, a document ranks at its best chunk)", "",
             "| configuration | nDCG@10 | R@10 | R@100 | MRR@10 |", "|---|---|---|---|---|"]
    for name, config in result.configurations.items():
        o = config.overall
        lines.append(f"| {name} | {o['ndcg@10']:.3f} | {o['recall@10']:.3f} | "
                     f"{o['recall@100']:.3f} | {o['mrr@10']:.3f} |")
    lines += ["", "R@100 is only meaningful for the depth-100 configurations (the @10 ones return "
              "at most 10-20 chunks).", "",
              f"Haystack's keyword retriever (`plainto_tsquery`: every word must occur) returned "
              f"**nothing for {meta['haystack_keyword_empty_top10']} of {meta['queries']}** "
              f"claims; pgcite's keyword leg (BM25, OR) for "
              f"{meta['pgcite_keyword_empty']}.", "",
              "## Latency, top-10 hybrid, sequential (ms)", "",
              "| what | p50 | p95 | mean |", "|---|---|---|---|"]
    for name, s in latency.items():
        lines.append(f"| {name} | {s['p50_ms']} | {s['p95_ms']} | {s['mean_ms']} |")
    lines += ["", "Each query ran every variant in a rotating order (shared, noisy 2-core "
              "machine: compare within this table). *pgcite: database* is the one hybrid "
              "statement, which sets the HNSW options itself; *wall* adds the pool, the snapshot "
              "lookup, the router, the first hits' snippets and hit shaping. *Haystack: its two SQL statements* are the "
              "statements its store builds, run and fetched (dict rows, every column including "
              "the 384-float embedding) on a connection of our own.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, help="only the first N queries (smoke run)")
    args = parser.parse_args()
    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

    golden = load_golden(DATA / "scifact", split="train")
    if args.limit:
        golden = golden.model_copy(update={"queries": golden.queries[: args.limit]})
    with client() as c:
        col = c.collection("scifact")
        url = c.db.url
        rows = snapshot_chunks(col)
        store, load = load_haystack(url, rows)
        store_ef = haystack_store(url, recreate=False, ef_search=EF_SEARCH)
        vectors, _ = embed_queries(col.view(), golden)
        plain = PlainSQL(url, col)
        empty_keyword: set[str] = set()
        configs: dict[str, Searcher] = {
            "pgcite hybrid @10": pgcite_searcher(col, "hybrid", 10, vectors),
            "haystack hybrid @10": haystack_searcher(haystack_pipeline(store, 10), vectors,
                                                     empty_keyword),
            "plain SQL hybrid @10": plain.searcher(vectors, 10),
            "pgcite hybrid @100": pgcite_searcher(col, "hybrid", 100, vectors),
            "haystack hybrid @100": haystack_searcher(haystack_pipeline(store, 100), vectors),
            f"haystack hybrid @100, ef_search={EF_SEARCH}": haystack_searcher(
                haystack_pipeline(store_ef, 100), vectors),
            "plain SQL hybrid @100": plain.searcher(vectors, 100),
            "pgcite vector @100": pgcite_searcher(col, "vector", 100, vectors),
            "pgcite keyword @100": pgcite_searcher(col, "keyword", 100),
            "haystack keyword @100": haystack_keyword_searcher(store, 100),
        }
        progress = sys.stderr.isatty()
        result = evaluate(golden, configs, k=10, progress=progress)
        latency = latency_top10(col, store, plain, golden, vectors)
        pgcite_empty = sum(1 for row in result.configurations["pgcite keyword @100"].queries
                           if row.n_hits == 0)
        extra = {
            "benchmark": "scifact-train, peers",
            "queries": len(golden.queries),
            "haystack-ai": version("haystack-ai"),
            "pgvector-haystack": version("pgvector-haystack"),
            "haystack_table": TABLE,
            "haystack_load": load,
            "haystack_keyword_empty_top10": len(empty_keyword),
            "pgcite_keyword_empty": pgcite_empty,
            "latency_top10": latency,
        }
        metadata = run_metadata(col.view(), extra)
        plain.conn.close()
    result = result.model_copy(update={"metadata": metadata})
    out = write(result, "peers" if not args.limit else "peers-smoke")
    report = out / "report.md"
    head = peer_summary(result, latency, metadata)
    report.write_text(head + "\n" + report.read_text(encoding="utf-8"), encoding="utf-8")
    print(head, file=sys.stderr)


if __name__ == "__main__":
    main()
