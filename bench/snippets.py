"""What highlighted snippets cost per query: the same searches with and without them, side by
side in one run (interleaved, so both see the same cache state and machine load).

Data: the diary sample shipped in the package (Sept-Dec 1666, the `pgcite demo` data) and the
40 Pepys golden queries as query texts, MiniLM, default hybrid search; top_k 5 and 10. The
snippet statement reads only the returned hits, so its cost depends on top_k and passage
length, not on the size of the collection. Snippets are one more statement (``ts_headline`` over the returned hits
with the collection's text-search config), so their cost grows with top_k and passage length.

    python bench/snippets.py [--repeat 3]

Writes bench/results/snippets/summary.json and report.md (per-query timings under runs/).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from _common import DATA, RESULTS, client, ensure_collection, read_jsonl

import pgcite
from pgcite.cli._demo import sample_path

OUT = RESULTS / "snippets"


def _timed(col: pgcite.Collection, text: str, top_k: int, snippets: bool) -> tuple[float, float]:
    started = time.perf_counter()
    result = col.search(text, top_k=top_k, snippets=snippets)
    wall = (time.perf_counter() - started) * 1000
    return wall, result.timings_ms.get("snippets", 0.0)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    folder = DATA / "pepys-diary"
    queries = [q["query"] for q in read_jsonl(folder / "golden.jsonl")]
    with client() as c:
        col = ensure_collection(c, "pepys_sample", [sample_path()],
                                overrides=pgcite.Overrides(author="Samuel Pepys"))
        for text in queries[:3]:  # warm: model, pool, caches
            col.search(text, top_k=10)
        runs: list[dict[str, Any]] = []
        summary: dict[str, Any] = {"queries": len(queries), "repeat": args.repeat,
                                   "load_average_at_start": round(os.getloadavg()[0], 1),
                                   "collection": "pepys_sample (the packaged Sept-Dec 1666 entries, MiniLM)", "by_top_k": {}}
        for top_k in (5, 10):
            off: list[float] = []
            on: list[float] = []
            own: list[float] = []
            for n in range(args.repeat):
                for i, text in enumerate(queries):
                    order = (False, True) if (i + n) % 2 == 0 else (True, False)
                    for snippets in order:
                        wall, cost = _timed(col, text, top_k, snippets)
                        (on if snippets else off).append(wall)
                        if snippets:
                            own.append(cost)
                        runs.append({"top_k": top_k, "query": i, "snippets": snippets,
                                     "wall_ms": round(wall, 3), "snippets_ms": round(cost, 3)})
            summary["by_top_k"][str(top_k)] = {
                "median_ms_without": round(statistics.median(off), 2),
                "median_ms_with": round(statistics.median(on), 2),
                "p95_ms_without": round(_pct(off, 0.95), 2),
                "p95_ms_with": round(_pct(on, 0.95), 2),
                "snippet_statement_median_ms": round(statistics.median(own), 2),
                "snippet_statement_p95_ms": round(_pct(own, 0.95), 2),
            }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "runs").mkdir(exist_ok=True)
    (OUT / "runs" / "timings.json").write_text(json.dumps(runs) + "\n")
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    rows = "\n".join(
        f"| {k} | {v['median_ms_without']} | {v['median_ms_with']} | {v['p95_ms_without']} | "
        f"{v['p95_ms_with']} | {v['snippet_statement_median_ms']} |"
        for k, v in summary["by_top_k"].items())
    (OUT / "report.md").write_text(
        "# Snippet cost per query (Pepys, 40 golden queries x "
        f"{args.repeat}, default hybrid search)\n\n"
        "| top_k | median ms without | median ms with | p95 without | p95 with | "
        "snippet statement median ms |\n|---|---|---|---|---|---|\n" + rows + "\n\n"
        f"Load average at the start: {summary['load_average_at_start']} on this machine. The "
        "wall times (embedding included) swing with machine load; the snippet statement's own "
        "time (`timingsMs.snippets`) is the cost to read.\n")
    print((OUT / "report.md").read_text())


if __name__ == "__main__":
    main()
