"""Search plans with and without planner statistics, on synthetic collections of several sizes.

A new collection's tables have no statistics until something analyzes them; a build that grows a
collection by more than a tenth now does (store/_statistics.py). This runs the search statement
of each mode under EXPLAIN ANALYZE in three states, on bench/scale.py's synthetic chunks, and
reports the database time and the plan's shape: whether the vector leg reads the HNSW index, how
many chunk rows a plan reads. (The runs in bench/results/statistics_plans also checked the pruned
keyword leg, keyword_top, against the exhaustive one; that leg was removed since, docs/retrieval.md.)

    "no statistics":    every table of the collection cleared, as newly created
    "chunks, postings": only chunks and segment_postings analyzed (autovacuum analyzes each
                        table on its own schedule; bench/scale.py analyzed these two itself
                        before the refresh existed)
    "refreshed":        refresh_statistics as a first ingest runs it (the planned tables)

    python bench/statistics_plans.py   # 2k, 20k, 100k chunks: ~8 min on 2 cores
    python bench/statistics_plans.py --sizes 100000 --keep   # then --reuse: no reload
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import numpy as np
import psycopg
from _common import RESULTS, client
from psycopg import sql
from scale import DIM, SEED, load, synthetic_vectors, vocabulary

import pgcite
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._search import SEARCH_SETTINGS, SearchOptions, prepare_search
from pgcite.store._statistics import refresh_statistics

QUERIES = 30
TOP_K = 5
CUTOFF = "1650-12-31"  # synthetic years run 1600-1999: an eighth of the chunks
MODES: dict[str, tuple[dict[str, Any], Filters]] = {
    "vector": ({"mode": "vector"}, Filters()),
    "keyword": ({"mode": "keyword"}, Filters()),
    "hybrid": ({"mode": "hybrid"}, Filters()),
    "hybrid, cutoff": ({"mode": "hybrid"}, Filters.model_validate({"cutoff": CUTOFF})),
    "keyword, cutoff": ({"mode": "keyword"}, Filters.model_validate({"cutoff": CUTOFF})),
}


def clear_statistics(conn: psycopg.Connection, col: pgcite.Collection) -> None:
    """Every table of the collection as newly created: no row counts, no column statistics."""
    schema = col.info.schema_name
    for (table,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                 (schema,)).fetchall():
        conn.execute("SELECT pg_clear_relation_stats(%s, %s)", (schema, table))
        conn.execute("SELECT pg_clear_attribute_stats(%s, %s, a.attname, false)"
                     " FROM pg_attribute a WHERE a.attrelid = %s::regclass AND a.attnum > 0"
                     " AND NOT a.attisdropped", (schema, table, f"{schema}.{table}"))


def chunk_tuples(conn: psycopg.Connection, col: pgcite.Collection) -> float:
    row = conn.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass",
                       (f"{col.info.schema_name}.chunks",)).fetchone()
    return float(row[0]) if row else -1.0


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in _nodes(child))]


def explain(conn: psycopg.Connection, col: pgcite.Collection, text: str, vector: np.ndarray,
            options: dict[str, Any], filters: Filters) -> dict[str, Any]:
    """One search statement under EXPLAIN ANALYZE, with the settings a search sets."""
    opts = SearchOptions(top_k=TOP_K, **options)
    statement, params = prepare_search(col.info, col.active_snapshot(), text, filters=filters,
                                       options=opts, query_vector=vector)
    with conn.transaction():
        conn.execute(SEARCH_SETTINGS, (str(opts.hnsw_ef_search),))
        row = conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) {}").format(statement),
                           params).fetchone()
        with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
            rows = cur.execute(statement, params).fetchall()[:TOP_K]
    top = row[0][0] if row else {}
    nodes = _nodes(top["Plan"])
    return {
        "ms": float(top["Execution Time"]),
        "hnsw": any(str(n.get("Index Name", "")).startswith("chunks_hnsw_") for n in nodes),
        "chunks_seq_scan": any(n.get("Node Type") == "Seq Scan"
                               and n.get("Relation Name") == "chunks" for n in nodes),
        # rows the plan took from chunks by any path (the HNSW scan, an index, a scan)
        "chunks_rows": sum(float(n.get("Actual Rows", 0)) * float(n.get("Actual Loops", 1))
                           for n in nodes if n.get("Relation Name") == "chunks"),
        "ids": [r["id"] for r in rows],
    }


def measure(conn: psycopg.Connection, col: pgcite.Collection, texts: list[str],
            vecs: np.ndarray) -> dict[str, list[dict[str, Any]]]:
    """Every mode's searches, one record each (after one warm-up search not counted)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for mode, (options, filters) in MODES.items():
        explain(conn, col, texts[0], vecs[0], options, filters)
        out[mode] = [explain(conn, col, t, v, options, filters)
                     for t, v in zip(texts, vecs, strict=True)]
    return out


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per mode: latency, plan shape, searches short of top-k."""
    out: dict[str, dict[str, Any]] = {}
    for mode, records in runs.items():
        ms = sorted(r["ms"] for r in records)
        out[mode] = {
            "p50_ms": round(statistics.median(ms), 2),
            "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 2),
            "hnsw_plans": sum(r["hnsw"] for r in records),
            "chunks_seq_scan_plans": sum(r["chunks_seq_scan"] for r in records),
            "chunks_rows_p50": statistics.median(r["chunks_rows"] for r in records),
            "short": sum(len(r["ids"]) < TOP_K for r in records),
        }
    return out


def states(conn: psycopg.Connection, col: pgcite.Collection, n: int, texts: list[str],
           vecs: np.ndarray) -> tuple[dict[str, Any], dict[str, Any]]:
    """The three states in turn: (summary, per-query records)."""
    summary: dict[str, Any] = {}
    detail: dict[str, Any] = {}
    clear_statistics(conn, col)
    detail["no statistics"] = measure(conn, col, texts, vecs)
    summary["chunks_reltuples_after_no_statistics"] = chunk_tuples(conn, col)
    for table in ("chunks", "segment_postings"):
        conn.execute(sql.SQL("ANALYZE {s}.{t}").format(s=col.info.schema_id,
                                                       t=sql.Identifier(table)))
    detail["chunks, postings"] = measure(conn, col, texts, vecs)
    started = time.perf_counter()
    summary["refreshed_tables"] = refresh_statistics(conn, col.info, chunks_added=n)
    summary["refresh_s"] = round(time.perf_counter() - started, 2)
    detail["refreshed"] = measure(conn, col, texts, vecs)
    for state, runs in detail.items():
        summary[state] = summarize(runs)
    return summary, detail


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,20000,100000")
    parser.add_argument("--results", default="statistics_plans")
    parser.add_argument("--keep", action="store_true", help="keep the collections (plans_N)")
    parser.add_argument("--reuse", action="store_true",
                        help="measure collections an earlier --keep run left (same queries)")
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    vocab = vocabulary()
    centroids = rng.normal(size=(2000, DIM)).astype(np.float32)
    results: dict[str, Any] = {"queries": QUERIES, "top_k": TOP_K, "cutoff": CUTOFF}
    details: dict[str, Any] = {}
    with client() as c:
        for n in [int(x) for x in args.sizes.split(",")]:
            name = f"plans_{n}"
            if args.reuse:
                col = c.collection(name)
            else:
                c.drop_collection(name, missing_ok=True)
                col = c.create_collection(name)
                print(f"{name}: loading {n} synthetic chunks", file=sys.stderr)
                load(col, n, vocab, rng, centroids)
                col = c.collection(name)
            queries = np.random.default_rng([SEED, n])  # the same with --reuse
            texts = [" ".join(queries.choice(vocab[:5000], size=6)) for _ in range(QUERIES)]
            vecs = synthetic_vectors(QUERIES, queries, centroids)
            with c.db.connect(autocommit=True) as conn:
                summary, details[name] = states(conn, col, n, texts, vecs)
            results[name] = {"chunks": n, **summary}
            print(render({**results, name: results[name]}), file=sys.stderr)
            if not args.keep:
                c.drop_collection(name)
    out = RESULTS / args.results
    (out / "runs").mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(results, indent=2))
    (out / "runs" / "results.json").write_text(json.dumps(details))
    (out / "report.md").write_text(render(results))


def render(results: dict[str, Any]) -> str:
    k = results["top_k"]
    lines = ["# Search plans with and without planner statistics", "",
             f"`python bench/statistics_plans.py`: synthetic chunks (bench/scale.py), "
             f"{results['queries']} random 6-word queries and vectors, top-{k}, "
             f"cutoff {results['cutoff']}; database time from EXPLAIN ANALYZE. 'hnsw' and "
             "'chunks seq scan' count the plans that read the HNSW index / read chunks whole, "
             "'chunks rows' is the median of the rows a plan took from chunks by any path; "
             f"'short' counts searches with fewer than {k} hits.", "",
             "| chunks | statistics | mode | p50 ms | p95 ms | hnsw | chunks seq scan |"
             " chunks rows | short |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for key, entry in results.items():
        if not key.startswith("plans_"):
            continue
        for state in ("no statistics", "chunks, postings", "refreshed"):
            for mode, m in entry[state].items():
                lines.append(f"| {entry['chunks']:,} | {state} | {mode} | {m['p50_ms']} |"
                             f" {m['p95_ms']} | {m['hnsw_plans']} | {m['chunks_seq_scan_plans']}"
                             f" | {m['chunks_rows_p50']:,.0f} | {m['short']} |")
    lines.append("")
    for key, entry in results.items():
        if key.startswith("plans_"):
            lines.append(f"- {entry['chunks']:,} chunks: reltuples of chunks after the"
                         f" no-statistics runs {entry['chunks_reltuples_after_no_statistics']}"
                         " (-1: autovacuum did not analyze meanwhile); the refresh analyzed"
                         f" {', '.join(entry['refreshed_tables'])} in {entry['refresh_s']} s")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
