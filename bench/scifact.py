"""SciFact (BEIR), train claims: pgcite's keyword, vector and hybrid legs side by side with the
bm25s reference and exact dense search, plus per-stage latency at top-10.

    python bench/scifact.py            # writes bench/results/scifact/{summary.json,report.md}; detail in runs/
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

from _common import (
    DATA,
    VARIANTS,
    bm25s_searcher,
    client,
    ensure_collection,
    exact_dense_searcher,
    read_jsonl,
    write,
)

from pgcite.evaluate import GoldenQuery, Searcher, SearchOutcome, evaluate, load_golden
from pgcite.evaluate._collection import (
    collection_searcher,
    embed_queries,
    index_usage,
    run_metadata,
)

DEPTH = 100


def with_embed_time(searcher: Searcher, embed_ms: dict[str, float]) -> Searcher:
    """Add the (shared, precomputed) query-embedding time back into the stage timings."""

    def search(query: GoldenQuery) -> SearchOutcome:
        out = searcher(query)
        timings = dict(out.timings_ms)
        timings["embed"] = embed_ms[query.id]
        timings["total"] = timings.get("total", 0.0) + embed_ms[query.id]
        return SearchOutcome(hits=out.hits, confidence=out.confidence, timings_ms=timings)

    return search


def latency_top10(col: Any, golden: Any, vectors: dict[str, Any]) -> dict[str, Any]:
    """The database part of a top-10 query per mode (vector precomputed), sequential."""
    out: dict[str, Any] = {}
    for name, opts in VARIANTS.items():
        samples = []
        ranking = {k: v for k, v in opts.items() if k not in ("mode", "stages")}  # fusion
        for query in golden.queries:
            result = col.search(query.text, top_k=10, query_vector=vectors[query.id],
                                mode=opts["mode"], stages=opts.get("stages"), options=ranking)
            samples.append(result.timings_ms["database"])
        samples.sort()
        out[name] = {"p50_ms": round(statistics.median(samples), 3),
                     "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 3),
                     "n": len(samples)}
    return out


def main() -> None:
    root = DATA / "scifact"
    golden = load_golden(root, split="train")
    with client() as c:
        col = ensure_collection(c, "scifact", [root / "corpus.jsonl"])
        vectors, embed_list = embed_queries(col.view(), golden)
        embed_ms = {q.id: ms for q, ms in zip(golden.queries, embed_list, strict=True)}
        configs: dict[str, Searcher] = {
            name: with_embed_time(collection_searcher(col.view(), depth=DEPTH, vectors=vectors, **opts),
                                  embed_ms)
            for name, opts in VARIANTS.items()
        }
        configs["bm25s (reference)"] = bm25s_searcher(read_jsonl(root / "corpus.jsonl"),
                                                      depth=DEPTH)
        configs["exact dense (numpy)"] = exact_dense_searcher(col, vectors, depth=DEPTH)
        result = evaluate(golden, configs, k=10, progress=sys.stderr.isatty(),
                          metadata=run_metadata(col.view(), {
                              "benchmark": "scifact-train", "depth": DEPTH,
                              "index_usage": index_usage(col.view(), golden.queries[0].text),
                              "latency_top10_database": latency_top10(col, golden, vectors)}))
    write(result, "scifact")


if __name__ == "__main__":
    main()
