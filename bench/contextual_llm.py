"""Contextual chunks with an LLM-written situating sentence (``contextual = "llm"``) against the
structural header and no context, on XQuAD English (240 paragraphs, 1,190 questions).

SciFact and the Pepys diary (~18k chunks) would need one model call per chunk — hours with the
packaged SmolLM2 on 2 cores — so this measures the small set; point PGCITE_LLM* at a capable
server and pass --dataset to measure the big ones.

    PGCITE_DATA_DIR=… python bench/contextual_llm.py      # writes bench/results/contextual-llm/
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from _common import DATA, client, write

import pgcite
from pgcite.evaluate import Searcher, evaluate, load_golden
from pgcite.evaluate._collection import collection_searcher, embed_queries, run_metadata
from pgcite.llm import LLMConfig, make_chat_model
from pgcite.store._collections import CollectionSettings

DEPTH = 100
MODES: dict[str, dict[str, Any]] = {
    "vector": {"mode": "vector", "stages": {"route": False}},
    "hybrid (convex)": {"mode": "hybrid", "fusion": "convex", "stages": {"route": False}},
}


def build(c: pgcite.Client, name: str, contextual: str, corpus: Any) -> tuple[
        pgcite.Collection, dict[str, Any]]:
    try:
        col = c.collection(name)
    except pgcite.CollectionNotFound:
        col = c.create_collection(name, embedder="all-MiniLM-L6-v2",
                                  settings=CollectionSettings(contextual=contextual))  # type: ignore[arg-type]
    started = time.monotonic()
    report = col.ingest([corpus], progress=sys.stderr.isatty())
    cost = {"seconds": round(time.monotonic() - started, 1), "situated": report.situated,
            "situate_fallbacks": report.situate_fallbacks, "embedded": report.embedded}
    print(f"{name}: {cost}", file=sys.stderr)
    return col, cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="xquad/en", help="folder under the data dir with "
                        "corpus.jsonl and test queries (default xquad/en)")
    args = parser.parse_args()
    corpus = DATA / args.dataset / "corpus.jsonl"
    golden = load_golden(DATA / args.dataset, split="test", name=args.dataset)
    slug = args.dataset.replace("/", "_")
    chat = make_chat_model(LLMConfig(kind="llama-cpp", timeout_s=120))
    with client() as plain, pgcite.Client(plain.settings, llm=chat) as c:
        cols: dict[str, pgcite.Collection] = {}
        costs: dict[str, Any] = {}
        for mode in ("off", "header", "llm"):
            cols[mode], costs[mode] = build(c, f"ctxllm_{slug}_{mode}", mode, corpus)
        vectors, _ = embed_queries(cols["off"], golden)
        configs: dict[str, Searcher] = {
            f"{name} · {mode}": collection_searcher(col, depth=DEPTH, vectors=vectors, **opts)
            for name, opts in MODES.items() for mode, col in cols.items()
        }
        result = evaluate(golden, configs, k=10, progress=sys.stderr.isatty(),
                          metadata=run_metadata(cols["llm"], {
                              "benchmark": "contextual-llm", "dataset": args.dataset,
                              "llm": "SmolLM2-135M-Instruct (llama-cpp)", "ingest": costs}))
    write(result, "contextual-llm")


if __name__ == "__main__":
    main()
