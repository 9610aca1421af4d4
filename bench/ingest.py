"""Ingest throughput: the whole pipeline (load, chunk, embed, store, snapshot) against the
embedder alone on the same texts, in the same run. The gap is the pipeline's overhead.

    python bench/ingest.py --docs 500      # SciFact abstracts; writes bench/results/ingest/
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from _common import DATA, RESULTS, client

from pgcite._types import Document
from pgcite.embed._base import text_sha256
from pgcite.embed._registry import load_embedder
from pgcite.ingest._chunking import chunk_document
from pgcite.ingest._loaders import iter_documents
from pgcite.ingest._pipeline import chunk_budget, embedding_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=500)
    parser.add_argument("--embedder", default="all-MiniLM-L6-v2")
    args = parser.parse_args()
    lines = (DATA / "scifact" / "corpus.jsonl").read_text().splitlines()[: args.docs]
    with tempfile.TemporaryDirectory() as tmp, client() as c:
        source = Path(tmp) / "sample.jsonl"
        source.write_text("\n".join(lines) + "\n")
        c.drop_collection("bench_ingest", missing_ok=True)
        col = c.create_collection("bench_ingest", embedder=args.embedder)
        embedder = load_embedder(args.embedder)
        docs = [d for d in iter_documents([source]) if isinstance(d, Document)]
        budget = chunk_budget(col.info.settings, col.info.embedder)
        texts = [embedding_text(ch) for d in docs
                 for ch in chunk_document(d, count_tokens=embedder.count_tokens,
                                          max_tokens=budget)]
        # A cold cache for these texts, so the pipeline really embeds them.
        with c.db.transaction() as conn:
            conn.execute("DELETE FROM pgcite.embedding_cache WHERE model_key = %s"
                         " AND text_sha256 = ANY(%s)",
                         (embedder.spec.model_key, [text_sha256(t) for t in texts]))
        embedder.embed_documents(texts[:32])  # warm-up, both sides benefit
        started = time.perf_counter()
        report = col.ingest([source], progress=sys.stderr.isatty())
        pipeline_s = time.perf_counter() - started
        started = time.perf_counter()
        for i in range(0, len(texts), 32):
            embedder.embed_documents(texts[i: i + 32])
        raw_s = time.perf_counter() - started
        c.drop_collection("bench_ingest")
    result = {
        "documents": report.documents, "chunks": report.chunks_added,
        "embedded": report.embedded, "embedder": embedder.spec.model_key,
        "pipeline_s": round(pipeline_s, 2), "raw_embed_s": round(raw_s, 2),
        "pipeline_chunks_per_s": round(report.chunks_added / pipeline_s, 2),
        "raw_chunks_per_s": round(len(texts) / raw_s, 2),
        "overhead_pct": round(100 * (pipeline_s - raw_s) / raw_s, 1),
    }
    out = RESULTS / "ingest"
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    (out / "report.md").write_text(
        "# Ingest throughput\n\n| documents | chunks | pipeline chunks/s | embedder alone chunks/s"
        " | overhead |\n|---|---|---|---|---|\n"
        f"| {result['documents']} | {result['chunks']} | {result['pipeline_chunks_per_s']} | "
        f"{result['raw_chunks_per_s']} | {result['overhead_pct']}% |\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
