"""Snapshot membership cost (issue #15, part 1): what adding 100 documents to a synthetic
collection writes, and whether the searches' membership filter slows down. Runs against either
code version (before/after migration 0006) on the same database, so the two sit side by side:

    PGCITE_DATA_DIR=/tmp/db PYTHONPATH=<old>/src python bench/scale_members.py --label before
    PGCITE_DATA_DIR=/tmp/db PYTHONPATH=src python bench/scale_members.py --label after

The first run loads N one-chunk documents (no HNSW index: the filter is what is measured).
Appends to bench/results/scale_members/runs.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np
from _common import RESULTS, client
from psycopg import sql
from scale import SEED, insert_synthetic, random_queries, synthetic_vectors, vocabulary
from scale import centroids as scale_centroids

import pgcite
from pgcite.store._snapshots import activate_snapshot, build_snapshot, plan_snapshot

TABLES = ("segments", "segment_versions", "segment_postings", "snapshot_segments",
          "snapshot_deleted_df", "snapshot_members")


def table_bytes(conn: Any, schema: str) -> dict[str, int]:
    out = {}
    for t in TABLES:
        row = conn.execute("SELECT c.relkind, pg_total_relation_size(c.oid) FROM pg_class c"
                           " JOIN pg_namespace n ON n.oid = c.relnamespace"
                           " WHERE n.nspname = %s AND c.relname = %s", (schema, t)).fetchone()
        out[t] = int(row[1]) if row and row[0] == "r" else 0  # a view stores nothing
    return out


def ensure(c: pgcite.Client, name: str, n: int, vocab: list[str],
           centroids: np.ndarray) -> pgcite.Collection:
    if name in [x.name for x in c.collections()]:
        return c.collection(name)
    col = c.create_collection(name)
    rng = np.random.default_rng(SEED)
    with c.db.transaction() as conn:
        pks: list[int] = []
        for start in range(0, n, 50_000):
            pks += insert_synthetic(conn, col, start, min(50_000, n - start), vocab, rng,
                                    centroids)
        for table in ("versions", "chunks"):  # fresh rows: plan the build with statistics
            conn.execute(sql.SQL("ANALYZE {s}.{t}").format(s=col.info.schema_id,
                                                            t=sql.Identifier(table)))
        plan = plan_snapshot(conn, col.info, pks, spec=col.info.embedder, content_id=None,
                             replace_all=True)
        snap = build_snapshot(conn, col.info, plan, spec=col.info.embedder, note="scale members")
        activate_snapshot(conn, col.info, snap)
    with c.db.connect(autocommit=True) as conn:
        conn.execute(sql.SQL("VACUUM ANALYZE {s}.chunks").format(s=col.info.schema_id))
    return col


def add_100(col: pgcite.Collection, start: int, vocab: list[str], rng: np.random.Generator,
            centroids: np.ndarray) -> dict[str, Any]:
    with col.client.connection() as conn:
        before = table_bytes(conn, col.info.schema_name)
    t0 = time.perf_counter()
    with col.client.db.transaction() as conn:
        added = insert_synthetic(conn, col, start, 100, vocab, rng, centroids)
        t1 = time.perf_counter()
        plan = plan_snapshot(conn, col.info, added, spec=col.info.embedder,
                             content_id=col.active_snapshot().snapshot_id)
        snap = build_snapshot(conn, col.info, plan, spec=col.info.embedder, note="add 100")
        activate_snapshot(conn, col.info, snap)
        build_s = time.perf_counter() - t1
    total_s = time.perf_counter() - t0
    with col.client.connection() as conn:
        after = table_bytes(conn, col.info.schema_name)
    return {"snapshot_build_s": round(build_s, 3), "insert_and_build_s": round(total_s, 3),
            "extra_bytes": {t: after[t] - before[t] for t in TABLES},
            "extra_bytes_total": sum(after.values()) - sum(before.values())}


_VECTOR_LEG = """
SELECT c.chunk_pk FROM {s}.chunks c
WHERE c.version_pk IN (SELECT version_pk FROM {s}.snapshot_members WHERE snapshot_id = %(sid)s)
ORDER BY c.embedding <=> %(q)s::vector(384) LIMIT 10"""


def filter_latency(col: pgcite.Collection, vocab: list[str],
                   rng: np.random.Generator, centroids: np.ndarray) -> dict[str, Any]:
    """The vector leg's membership filter (seq scan: no HNSW here) and keyword searches."""
    s = col.info.schema_id
    with col.client.connection() as conn:
        row = conn.execute(sql.SQL("SELECT snapshot_id FROM {s}.active").format(s=s)).fetchone()
        assert row is not None
        sid = row[0]
        q = "[" + ",".join(f"{x:.6g}" for x in synthetic_vectors(1, rng, centroids)[0]) + "]"
        plan = conn.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS) " + _VECTOR_LEG).format(s=s),
                            {"sid": sid, "q": q}).fetchall()
        member_times = []
        for _ in range(7):
            t0 = time.perf_counter()
            conn.execute(sql.SQL("SELECT count(*) FROM {s}.snapshot_members"
                                 " WHERE snapshot_id = %s").format(s=s), (sid,)).fetchone()
            member_times.append(time.perf_counter() - t0)
    kw = []
    for text in random_queries(vocab, rng, 20):
        t0 = time.perf_counter()
        col.search(text, top_k=10, mode="keyword", snippets=False)
        kw.append(time.perf_counter() - t0)
    return {"vector_leg_plan": [r[0] for r in plan],
            "members_scan_ms_median": round(1000 * statistics.median(member_times), 1),
            "keyword_search_ms_median": round(1000 * statistics.median(kw), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--first-doc", type=int, default=10_000_000,
                        help="number of the first added document (distinct for each run)")
    args = parser.parse_args()
    vocab = vocabulary()
    rng = np.random.default_rng(SEED + 7)
    centroids = scale_centroids()
    with client() as c:
        t0 = time.perf_counter()
        col = ensure(c, f"members_{args.chunks // 1000}k", args.chunks, vocab, centroids)
        setup_s = time.perf_counter() - t0
        runs = [add_100(col, args.first_doc + 100 * i, vocab, rng, centroids) for i in range(2)]
        result = {"label": args.label, "under_load": True, "chunks": args.chunks,
                  "setup_s": round(setup_s, 1), "add_100": runs,
                  **filter_latency(col, vocab, rng, centroids)}
    out = RESULTS / "scale_members"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "runs.json"
    previous = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps([*previous, result], indent=2))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
