"""The Pepys golden set (40 hand-judged queries: fact, keyword, paraphrase, cutoff, absent) over
the whole diary: keyword, vector and hybrid side by side, per query kind, with cutoff violations.

    python bench/pepys.py    # writes bench/results/pepys/
"""

from __future__ import annotations

import datetime as dt
import sys

from _common import DATA, VARIANTS, bm25s_searcher, client, ensure_collection, read_jsonl, write

import pgcite
from pgcite.evaluate import GoldenQuery, ScoredHit, Searcher, SearchOutcome, evaluate, load_golden
from pgcite.evaluate._collection import (
    collection_searcher,
    embed_queries,
    index_usage,
    run_metadata,
)

DEPTH = 100


def dated_bm25s(entries: list[dict[str, object]]) -> Searcher:
    """bm25s with the cutoff applied after retrieval (it has no filters): a reference only."""
    dates = {str(e["_id"]): e.get("date") for e in entries}
    inner = bm25s_searcher(entries, depth=len(entries))

    def search(query: GoldenQuery) -> SearchOutcome:
        hits = [h for h in inner(query).hits
                if query.cutoff is None or (dates[h.id] and str(dates[h.id]) <= str(query.cutoff))]
        return SearchOutcome(hits=[ScoredHit(h.id, h.document_id, h.score, _date(dates[h.id]))
                                   for h in hits[:DEPTH]])

    return search


def _date(value: object) -> dt.date | None:
    return dt.date.fromisoformat(str(value)) if value else None


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="The Pepys golden set over the whole diary: "
                                     "keyword, vector and hybrid side by side, per query kind.")
    parser.add_argument("--collection", default="pepys", help="collection name (built on "
                        "first use with the current defaults; default: pepys)")
    args = parser.parse_args()
    root = DATA / "pepys-diary"
    golden = load_golden(root / "golden.jsonl")
    entries = read_jsonl(root / "entries.jsonl")
    with client() as c:
        col = ensure_collection(c, args.collection, [root / "entries.jsonl"],
                                overrides=pgcite.Overrides(author="Samuel Pepys", corpus="A"))
        vectors, _ = embed_queries(col.view(), golden)
        configs: dict[str, Searcher] = {
            name: collection_searcher(col.view(), depth=DEPTH, vectors=vectors, **opts)
            for name, opts in VARIANTS.items()
        }
        configs["bm25s (reference, post-filtered)"] = dated_bm25s(entries)
        result = evaluate(golden, configs, k=10, progress=sys.stderr.isatty(),
                          metadata=run_metadata(col.view(), {"benchmark": "pepys-golden", "depth": DEPTH,
                                                      "index_usage": index_usage(col.view(), golden.queries[0].text)}))
    write(result, "pepys")


if __name__ == "__main__":
    main()
