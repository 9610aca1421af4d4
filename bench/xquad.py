"""XQuAD with the multilingual e5 embedder: English, Arabic, and Arabic questions against the
English paragraphs — keyword (PostgreSQL's own analyser + BM25), vector and hybrid side by side,
with bm25s (Snowball) as the keyword reference.

    python bench/xquad.py    # writes bench/results/xquad-en/, xquad-ar/, xquad-ar-en/
"""

from __future__ import annotations

import sys

from _common import DATA, VARIANTS, bm25s_searcher, client, ensure_collection, read_jsonl, write

from pgcite.evaluate import Searcher, evaluate, load_golden
from pgcite.evaluate._collection import collection_searcher, embed_queries, run_metadata

DEPTH = 100
EMBEDDER = "multilingual-e5-small"
# (result name, corpus language, query language, PostgreSQL text-search config, Snowball name)
RUNS = [
    ("xquad-en", "en", "en", "english", "english"),
    ("xquad-ar", "ar", "ar", "arabic", "arabic"),
    ("xquad-ar-en", "en", "ar", "english", None),
]


def main() -> None:
    with client() as c:
        for name, corpus_lang, query_lang, ts_config, snowball in RUNS:
            corpus = DATA / "xquad" / corpus_lang / "corpus.jsonl"
            col = ensure_collection(c, f"xquad_{corpus_lang}_e5", [corpus], language=ts_config,
                                    embedder=EMBEDDER)
            golden = load_golden(DATA / "xquad" / query_lang, split="test", name=name)
            vectors, _ = embed_queries(col.view(), golden)
            configs: dict[str, Searcher] = {
                name: collection_searcher(col.view(), depth=DEPTH, vectors=vectors, **opts)
                for name, opts in VARIANTS.items()
            }
            if snowball:
                configs["bm25s (reference)"] = bm25s_searcher(read_jsonl(corpus),
                                                              language=snowball, depth=DEPTH)
            result = evaluate(golden, configs, k=10, progress=sys.stderr.isatty(),
                              metadata=run_metadata(col.view(), {"benchmark": name, "depth": DEPTH}))
            write(result, name)


if __name__ == "__main__":
    main()
