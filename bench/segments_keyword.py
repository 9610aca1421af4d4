"""The keyword leg before and after segments, side by side on one collection built by
bench/scale.py: the per-snapshot postings with precomputed BM25 weights (what every build wrote
before migration 0004, rebuilt here into a scratch table by the old builder, timed) against the
segment postings scored at query time (docs/snapshots.md, "Segments").

Both statements are run interleaved (alternating which goes first) on the same random queries,
database time only, exact BM25 top-5 (fetch 15), unfiltered and with a selective cutoff; the
top-5 of the two must agree on every query (scores to 1e-5: the old weights were float4). The old
side is the bare keyword query; the new one is pgcite's whole keyword-mode statement.

    python bench/scale.py --sizes 100000 --results scale_segments   # builds scale_100k
    python bench/segments_keyword.py --collection scale_100k

Its ``--pruning`` mode, which compared the exact leg with the pruned one (keyword_top), went
with that leg; its figures stay in docs/retrieval.md ("Pruned keyword leg (removed)") and
bench/results/keyword_pruning/. The statement measured now carries the answerability signals
(the runs in bench/results/segments_keyword/ left them out).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from typing import Any

import numpy as np
from _common import RESULTS, client
from psycopg import sql
from psycopg.rows import dict_row
from scale import pct, random_queries, vocabulary

from pgcite.retrieve._filters import Filters, compile_filters
from pgcite.retrieve._sql import build_search_sql

QUERIES = 200
SEED = 7
CUTOFF = dt.date(1650, 12, 31)  # synthetic dates are 1600..1999: ~13% of the chunks

# The pre-segments builder (src/pgcite/store/_snapshots.py before migration 0004), into a scratch
# table.
_OLD_BUILD = """
CREATE UNLOGGED TABLE {s}.bench_old_postings AS
WITH members AS (
    SELECT c.chunk_pk, c.tsv FROM {s}.chunks c
    JOIN {s}.snapshot_members m USING (version_pk) WHERE m.snapshot_id = %(sid)s
), tf AS (
    SELECT m.chunk_pk, t.lexeme AS term, cardinality(t.positions)::float8 AS tf
    FROM members m, unnest(m.tsv) AS t
), dl AS (
    SELECT chunk_pk, sum(tf) AS dl FROM tf GROUP BY chunk_pk
), stats AS (
    SELECT (SELECT count(*) FROM members)::float8 AS n, coalesce(avg(dl), 1) AS avgdl FROM dl
), df AS (
    SELECT term, count(*)::float8 AS df FROM tf GROUP BY term
), weighted AS (
    SELECT tf.term, tf.chunk_pk,
           (ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5))
            * tf.tf * (1.2 + 1) / (tf.tf + 1.2 * (1 - 0.75 + 0.75 * dl.dl / stats.avgdl)))::real
           AS weight
    FROM tf JOIN dl USING (chunk_pk) JOIN df USING (term) CROSS JOIN stats
)
SELECT term, array_agg(chunk_pk ORDER BY weight DESC, chunk_pk) AS chunk_pks,
       array_agg(weight ORDER BY weight DESC, chunk_pk) AS weights
FROM weighted GROUP BY term
"""
# The pre-segments keyword leg (src/pgcite/retrieve/_sql.py before migration 0004), top 5.
_OLD_QUERY = """
WITH kw_terms AS (
    SELECT coalesce(array_agg(lexeme), '{{}}') AS terms
    FROM unnest(to_tsvector('english'::regconfig, %(ranking_text)s))
), kw_scored AS (
    SELECT p.chunk_pk, sum(p.weight) AS score
    FROM {s}.bench_old_postings po CROSS JOIN kw_terms,
         unnest(po.chunk_pks, po.weights) AS p(chunk_pk, weight)
    WHERE po.term = ANY(kw_terms.terms)
    GROUP BY p.chunk_pk
), kw_top AS (
    SELECT k.chunk_pk, k.score FROM kw_scored k {filter}
    ORDER BY k.score DESC, k.chunk_pk LIMIT 15
)
SELECT c.id, t.score::float8 AS kw_score FROM kw_top t JOIN {s}.chunks c USING (chunk_pk)
ORDER BY t.score DESC, t.chunk_pk LIMIT 5
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", default="scale_100k")
    parser.add_argument("--queries", type=int, default=QUERIES)
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    vocab = vocabulary()
    texts = random_queries(vocab, rng, args.queries)
    with client() as c:
        col = c.collection(args.collection)
        snap = col.active_snapshot()
        s = col.info.schema_id
        with c.db.transaction() as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {s}.bench_old_postings").format(s=s))
            t0 = time.perf_counter()
            conn.execute(sql.SQL(_OLD_BUILD).format(s=s), {"sid": snap.snapshot_id})
            conn.execute(sql.SQL("ALTER TABLE {s}.bench_old_postings ADD PRIMARY KEY (term)")
                         .format(s=s))
            old_build_s = time.perf_counter() - t0
        with c.db.connect(autocommit=True) as conn:
            conn.execute(sql.SQL("ANALYZE {s}.bench_old_postings").format(s=s))
        variants = {"unfiltered": None, "cutoff": Filters(cutoff=CUTOFF)}
        out: dict[str, Any] = {"collection": args.collection, "chunks": snap.n_chunks,
                               "queries": QUERIES, "old_postings_build_s": round(old_build_s, 1)}
        try:
            with c.connection() as conn:
                for name, filters in variants.items():
                    out[name] = _compare(conn, col, snap.snapshot_id, snap.embed_model, texts,
                                         filters)
                    print(name, json.dumps(out[name]), file=sys.stderr)
        finally:
            with c.db.transaction() as conn:
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {s}.bench_old_postings").format(s=s))
    _write("segments_keyword", out, render(out))


def _compare(conn: Any, col: Any, snapshot_id: int, model: str, texts: list[str],
             filters: Filters | None) -> dict[str, Any]:
    s = col.info.schema_id
    compiled = compile_filters(filters or Filters(), {})
    new = build_search_sql(schema=s, ts_config=col.info.ts_config, model_key=model, dim=384,
                           halfvec=False, mode="keyword", filters=compiled.sql(),
                           constraint=False, filtered=bool(compiled.clauses), fetch=15, limit=5)
    old = sql.SQL(_OLD_QUERY).format(s=s, filter=sql.SQL(
        "JOIN {s}.chunks c USING (chunk_pk) WHERE c.date_end <= %(cutoff)s"
        if filters is not None else "").format(s=s))
    times: dict[str, list[float]] = {"before (per-snapshot weights)": [], "segments": []}
    agree = 0
    worst = 0.0
    for i, text in enumerate(texts):
        params = {**compiled.params, "snapshot_id": snapshot_id, "ranking_text": text,
                  "cutoff": CUTOFF, "constraint": None, "w_keyword": 1.0, "w_vector": 1.0,
                  "rrf_k": 60.0}
        runs = [("before (per-snapshot weights)", old), ("segments", new)]
        got: dict[str, list[tuple[str, float]]] = {}
        for label, statement in (runs if i % 2 == 0 else runs[::-1]):
            t0 = time.perf_counter()
            with conn.cursor(row_factory=dict_row) as cur:
                rows = cur.execute(statement, params).fetchall()
            times[label].append((time.perf_counter() - t0) * 1000)
            got[label] = [(r["id"], r["kw_score"]) for r in rows]
        a, b = got["before (per-snapshot weights)"], got["segments"]
        same = len(a) == len(b) and all(
            x[0] == y[0] or abs(x[1] - y[1]) < 1e-5 for x, y in zip(a, b, strict=True))
        agree += same
        worst = max([worst, *(abs(x[1] - y[1]) for x, y in zip(a, b, strict=False))])
    return {**{label: {"p50_ms": pct(v, 0.5), "p95_ms": pct(v, 0.95),
                       "mean_ms": round(statistics.mean(v), 2)} for label, v in times.items()},
            "same_top5": agree, "max_score_difference": worst}


def _write(name: str, out: dict[str, Any], markdown: str) -> None:
    folder = RESULTS / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps(out, indent=2))
    (folder / "report.md").write_text(markdown)
    print(f"wrote {folder}/summary.json and report.md", file=sys.stderr)


def render(out: dict[str, Any]) -> str:
    lines = [f"# Keyword leg before and after segments ({out['collection']}, {out['chunks']:,}"
             f" chunks, {out['queries']} queries, top-5, database ms, interleaved)", "",
             "| leg | statement | p50 | p95 | mean | same top-5 | max score diff |",
             "|---|---|---|---|---|---|---|"]
    for name in ("unfiltered", "cutoff"):
        r = out[name]
        for label in ("before (per-snapshot weights)", "segments"):
            lines.append(f"| {name} | {label} | {r[label]['p50_ms']} | {r[label]['p95_ms']} |"
                         f" {r[label]['mean_ms']} | {r['same_top5']}/{out['queries']} |"
                         f" {r['max_score_difference']:.2g} |")
    lines += ["", f"Old per-snapshot postings build (every snapshot, before): "
              f"{out['old_postings_build_s']} s.", "",
              "Shared 2-core machine, other jobs running: compare the two rows of one run only.",
              "", "Not like for like in the statement's favour: \"before\" is the bare keyword"
              " top-5 over the old postings; \"segments\" is pgcite's whole keyword-mode"
              " statement (ranking window, fusion scaffolding, the chunk columns), so the gap"
              " overstates what segments cost."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
