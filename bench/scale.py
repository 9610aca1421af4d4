"""Scale: synthetic collections of 100k and 1M chunks, loaded straight into pgcite's schema.

Text is drawn from a Zipf distribution over SciFact's vocabulary (so term statistics look like
real text) and vectors from clustered Gaussians (so HNSW sees structure, as with real embeddings);
nothing is embedded except, for the end-to-end check, the questions themselves. Measures load,
BM25 index build and HNSW build times, table and index sizes, and per-mode database latency
(top-5, sequential, query vector precomputed), plus end-to-end hybrid latency with real MiniLM
query embedding (the kiosk budget: fused top-5 under 100 ms).

Then the write path (docs/snapshots.md, "Segments"): ADD_DOCUMENTS more documents go in as a new
snapshot (a new segment on top of the big one), timed, with the growth of the index's tables;
the same snapshot built from scratch (one segment over everything, what every build did before
segments) is timed beside it, and both are searched with 50 random queries: their keyword top-10
must be the same, scores identical (max difference reported).

    python bench/scale.py --sizes 100000            # ~10 min on 2 cores
    python bench/scale.py --sizes 100000,1000000    # the 1M build takes far longer
    python bench/scale.py --sizes 1000000 --results scale_segments   # other sizes' rows kept
    python bench/scale.py --sizes 10000000 --no-hnsw --no-baselines --results scale_segments

--no-hnsw builds no vector index and measures the keyword leg alone (its filters too): for a size
whose HNSW graph (~2 KB a vector, built in memory) does not fit this machine's RAM. Nothing then
reads the vectors, so each chunk holds a one-dimensional placeholder: with its 384 dimensions a
10M-chunk table is 27 GB, more than this machine's RAM, and the filtered and completed searches,
which read chunk rows, waited on the disk for seconds. --no-baselines leaves out the variants
that only restate what smaller sizes measure and take a size's whole build time again (a
filtered leg joining every scored chunk's row, the added documents' snapshot rebuilt from
scratch).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import statistics
import sys
import time
from typing import Any
from unittest import mock

import numpy as np
from _common import DATA, RESULTS, client, read_jsonl, run_stamp
from psycopg import sql

import pgcite
from pgcite.index import MemberDelta, _query, index_snapshot
from pgcite.store._collections import ensure_vector_index
from pgcite.store._snapshots import activate_snapshot, build_snapshot, plan_snapshot
from pgcite.store._statistics import refresh_statistics

ADD_DOCUMENTS = 100
# The keyword index's tables: what a new snapshot adds to them is its storage cost.
INDEX_TABLES = ("segments", "segment_versions", "segment_postings", "snapshot_segments",
                "snapshot_deleted_df", "snapshot_members")

DIM = 384
WORDS_PER_CHUNK = 60
QUERIES = 200
SEED = 42


def vocabulary() -> list[str]:
    words: dict[str, int] = {}
    for doc in read_jsonl(DATA / "scifact" / "corpus.jsonl"):
        for w in re.findall(r"[a-z]{3,}", (doc["title"] + " " + doc["text"]).lower()):
            words[w] = words.get(w, 0) + 1
    return [w for w, _ in sorted(words.items(), key=lambda kv: -kv[1])][:30000]


def synthetic_texts(n: int, vocab: list[str], rng: np.random.Generator) -> list[str]:
    ranks = rng.zipf(1.15, size=(n, WORDS_PER_CHUNK)) - 1
    ranks = np.minimum(ranks, len(vocab) - 1)
    arr = np.asarray(vocab, dtype=object)
    return [" ".join(row) for row in arr[ranks]]


def random_queries(vocab: list[str], rng: np.random.Generator, n: int) -> list[str]:
    """``n`` benchmark queries: six words each, drawn from the 5,000 commonest of ``vocab``."""
    return [" ".join(rng.choice(vocab[:5000], size=6)) for _ in range(n)]


def centroids(rng: np.random.Generator | None = None) -> np.ndarray:
    """The cluster centres of the synthetic vectors: the first draw of ``default_rng(SEED)``,
    which :func:`main` makes from its own generator (``rng``; the other benchmarks pass none
    and get the same centres for the collections it built)."""
    rng = rng if rng is not None else np.random.default_rng(SEED)
    return rng.normal(size=(2000, DIM)).astype(np.float32)


def synthetic_vectors(n: int, rng: np.random.Generator, centroids: np.ndarray) -> np.ndarray:
    which = rng.integers(0, len(centroids), size=n)
    vecs = centroids[which] + rng.normal(0, 0.35, size=(n, DIM)).astype(np.float32)
    unit: np.ndarray = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
    return unit


def load(col: pgcite.Collection, n: int, vocab: list[str], rng: np.random.Generator,
         centroids: np.ndarray, *, hnsw: bool = True) -> dict[str, float | None]:
    """COPY versions and chunks in batches, then build the snapshot and, with ``hnsw``, the
    HNSW index (without it the chunks hold placeholder vectors: see the module's doc)."""
    s = col.info.schema_id
    spec = col.info.embedder
    timings: dict[str, float | None] = {}
    started = time.perf_counter()
    batch = 50_000
    with col.client.db.transaction() as conn:
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {s}.{i}").format(
            s=s, i=sql.Identifier(_hnsw_name(conn, col))))
        for start in range(0, n, batch):
            size = min(batch, n - start)
            insert_synthetic(conn, col, start, size, vocab, rng, centroids, vectors=hnsw)
            print(f"  loaded {start + size}/{n}", file=sys.stderr)
        timings["load_s"] = time.perf_counter() - started
        t0 = time.perf_counter()
        rows = conn.execute(sql.SQL("SELECT array_agg(version_pk) FROM {s}.versions").format(s=s))
        pks = rows.fetchone()[0]  # type: ignore[index]
        with placeholders_allowed(hnsw):
            plan = plan_snapshot(conn, col.info, pks, spec=spec, content_id=None,
                                 replace_all=True)
            snap = build_snapshot(conn, col.info, plan, spec=spec,
                                  note="synthetic scale benchmark")
        activate_snapshot(conn, col.info, snap)
        timings["snapshot_bm25_build_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with col.client.db.connect(autocommit=True) as conn:
        # the HNSW graph built in memory (~2 KB a 384-dim vector); past maintenance_work_mem
        # pgvector goes on inserting on disk, many times slower
        if hnsw:
            conn.execute(f"SET maintenance_work_mem = '{max(3, math.ceil(n * 2e3 / 2**30))}GB'")
            conn.execute("SET max_parallel_maintenance_workers = 1")
            ensure_vector_index(conn, col.info.schema_name, spec, col.info.settings.halfvec)
        conn.execute(sql.SQL("VACUUM {s}.chunks").format(s=s))
        # as an ingest does after its build (store/_statistics.py): without statistics on
        # segment_versions the vector leg read every chunk (528 vs ~6 ms p50 at 100k)
        refresh_statistics(conn, col.info, chunks_added=len(pks))
    timings["hnsw_build_s"] = time.perf_counter() - t0 if hnsw else None
    return {k: None if v is None else round(v, 1) for k, v in timings.items()}


PLACEHOLDER = np.ones(1, dtype=np.float32)


def placeholders_allowed(vectors: bool) -> contextlib.AbstractContextManager[Any]:
    """Without ``vectors``, a snapshot build that accepts the placeholders: it refuses vectors
    of another dimension than the model's, since a vector search would then fail, and no vector
    search runs on such a collection here."""
    if vectors:
        return contextlib.nullcontext()
    return mock.patch("pgcite.store._snapshots._check_single_model")


def insert_synthetic(conn: Any, col: pgcite.Collection, start: int, size: int, vocab: list[str],
                     rng: np.random.Generator, centroids: np.ndarray, *,
                     vectors: bool = True) -> list[int]:
    """Versions doc-START.. of one chunk each; returns their version_pks. Without ``vectors``
    each chunk's embedding is PLACEHOLDER (for a collection no vector search reads)."""
    s = col.info.schema_id
    spec = col.info.embedder
    texts = synthetic_texts(size, vocab, rng)
    vecs = synthetic_vectors(size, rng, centroids) if vectors else [PLACEHOLDER] * size
    years = rng.integers(1600, 2000, size=size)
    with conn.cursor() as cur:
        cur.execute(sql.SQL(
            "INSERT INTO {s}.versions (document_id, content_hash, source, n_chunks)"
            " SELECT 'doc-' || g, 'synthetic', 'synthetic', 1"
            " FROM generate_series(%s::bigint, %s::bigint) g").format(s=s),
            (start, start + size - 1))
        first_pk = _first_version_pk(conn, col, start)
        with cur.copy(sql.SQL(
                "COPY {s}.chunks (version_pk, id, document_id, ordinal, corpus, date_start,"
                " date_end, citation, body, embedding, embed_model, content_hash)"
                " FROM STDIN WITH (FORMAT BINARY)").format(s=s)) as copy:
            copy.set_types(["int8", "text", "text", "int4", "text", "date", "date",
                            "text", "text", "vector", "text", "text"])
            for i in range(size):
                doc = f"doc-{start + i}"
                day = _date(int(years[i]))
                copy.write_row((first_pk + i, f"{doc}-a", doc, 0, "ABC"[i % 3], day, day,
                                doc, texts[i], vecs[i], spec.model_key, "synthetic"))
    return list(range(first_pk, first_pk + size))


def table_bytes(col: pgcite.Collection) -> dict[str, int]:
    with col.client.connection() as conn:
        return {t: int(conn.execute("SELECT pg_total_relation_size(%s)",
                                    (f"{col.info.schema_name}.{t}",)).fetchone()[0])  # type: ignore[index]
                for t in INDEX_TABLES}


def add_documents(col: pgcite.Collection, n: int, vocab: list[str], rng: np.random.Generator,
                  centroids: np.ndarray, *, vectors: bool = True,
                  baseline: bool = True) -> dict[str, Any]:
    """ADD_DOCUMENTS new documents as a new snapshot, timed; with ``baseline`` the same snapshot
    from scratch beside it, both compared on random queries."""
    s = col.info.schema_id
    spec = col.info.embedder
    before = table_bytes(col)
    started = time.perf_counter()
    with col.client.db.transaction() as conn:
        added = insert_synthetic(conn, col, n, ADD_DOCUMENTS, vocab, rng, centroids,
                                 vectors=vectors)
        t0 = time.perf_counter()
        with placeholders_allowed(vectors):  # as an ingest builds: on the active snapshot
            plan = plan_snapshot(conn, col.info, added, spec=spec,
                                 content_id=col.active_snapshot().snapshot_id)
            snap = build_snapshot(conn, col.info, plan, spec=spec, note="add 100 documents")
        activate_snapshot(conn, col.info, snap)
        build_s = time.perf_counter() - t0
    total_s = time.perf_counter() - started
    after = table_bytes(col)
    added_row = {"documents": ADD_DOCUMENTS, "snapshot_build_s": round(build_s, 2),
                 "insert_and_build_s": round(total_s, 2),
                 "index_growth_bytes": {t: after[t] - before[t] for t in INDEX_TABLES},
                 "index_bytes_before": before}
    if not baseline:
        return added_row
    # The same members from scratch: one new segment over every version.
    with col.client.connection() as conn:
        live = [r[0] for r in conn.execute(sql.SQL(
            "SELECT version_pk FROM {s}.snapshot_members WHERE snapshot_id = %s").format(s=s),
            (snap,))]
    t0 = time.perf_counter()
    with col.client.db.transaction() as conn:
        row = conn.execute(sql.SQL(
            "INSERT INTO {s}.snapshots (embed_model, embed_dim, ts_config, note, bm25_k1, bm25_b)"
            " SELECT embed_model, embed_dim, ts_config, 'full rebuild (benchmark)', bm25_k1,"
            " bm25_b FROM {s}.snapshots WHERE snapshot_id = %s RETURNING snapshot_id").format(
            s=s), (snap,)).fetchone()
        full = int(row[0])  # type: ignore[index]
        index_snapshot(conn, col.info.schema_name, full, None,  # no base: all added
                       MemberDelta(added=tuple(sorted(live)), dropped=()))
    full_s = time.perf_counter() - t0
    with col.client.db.connect(autocommit=True) as conn:
        conn.execute(sql.SQL("ANALYZE {s}.segment_postings").format(s=s))
        conn.execute(sql.SQL("ANALYZE {s}.snapshot_segments").format(s=s))
    worst = 0.0
    same_top = 0
    queries = random_queries(vocab, rng, 50)
    for text in queries:
        a = col.search(text, top_k=10, mode="keyword", snapshot_id=snap, snippets=False).hits
        b = col.search(text, top_k=10, mode="keyword", snapshot_id=full, snippets=False).hits
        same_top += [h.id for h in a] == [h.id for h in b]
        worst = max([worst, *(abs((x.keyword_score or 0) - (y.keyword_score or 0))
                              for x, y in zip(a, b, strict=False))])
    with col.client.db.transaction() as conn:  # the from-scratch copy is not kept
        conn.execute(sql.SQL("DELETE FROM {s}.snapshots WHERE snapshot_id = %s").format(s=s),
                     (full,))
        conn.execute(sql.SQL(
            "DELETE FROM {s}.segments g WHERE NOT EXISTS (SELECT 1 FROM {s}.snapshot_segments"
            " ss WHERE ss.segment_id = g.segment_id)").format(s=s))
    return {**added_row, "from_scratch_build_s": round(full_s, 2),
            "queries_compared": len(queries), "same_top10": same_top,
            "max_score_difference": worst}


def _hnsw_name(conn: Any, col: pgcite.Collection) -> str:
    row = conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND indexname LIKE 'chunks_hnsw_%%'",
        (col.info.schema_name,)).fetchone()
    return row[0] if row else "none"


def _first_version_pk(conn: Any, col: pgcite.Collection, start: int) -> int:
    row = conn.execute(sql.SQL("SELECT version_pk FROM {s}.versions WHERE document_id = %s").format(
        s=col.info.schema_id), (f"doc-{start}",)).fetchone()
    return int(row[0])


def _date(year: int) -> Any:
    import datetime as dt

    return dt.date(year, 1, 1)


def sizes(col: pgcite.Collection) -> dict[str, str]:
    with col.client.connection() as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_size_pretty(pg_total_relation_size(c.oid))"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind IN ('r', 'i') ORDER BY pg_total_relation_size(c.oid) DESC",
            (col.info.schema_name,)).fetchall()
    return {name: size for name, size in rows[:8]}


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


# The exact keyword leg summing every posting (no list is long enough to skip), and a filtered
# leg joining the row of every scored chunk before it ranks them (what each did before the
# keyword leg's skipping parts and its best-first read, pgcite/index/_query.py): the variants
# these benchmarks compare.
SUMMED: tuple[Any, str, Any] = (_query, "LONG_LIST", 2**62)
EVERY_ROW: tuple[Any, str, Any] = (_query.KeywordLeg, "_best_first",
                                   lambda _, cte: sql.SQL(cte))


def _search(col: pgcite.Collection, text: str, vec: np.ndarray, opts: dict[str, Any],
            *patches: tuple[Any, str, Any]) -> pgcite.SearchResult:
    with contextlib.ExitStack() as stack:
        for target, name, value in patches:
            stack.enter_context(mock.patch.object(target, name, value))
        return col.search(text, top_k=5, query_vector=vec, snippets=False, mode=opts["mode"],
                          filters=opts.get("filters"),
                          options={"term_depth": opts.get("term_depth")})


Variants = dict[str, tuple[dict[str, Any], tuple[tuple[Any, str, Any], ...]]]


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": pct(ms, 0.5), "p95_ms": pct(ms, 0.95),
            "mean_ms": round(statistics.mean(ms), 2)}


def _interleaved(col: pgcite.Collection, texts: list[str], vecs: np.ndarray, variants: Variants,
                 ) -> tuple[dict[str, Any], list[dict[str, list[str]]]]:
    """:func:`timed`, summarised per variant."""
    db_ms, hits = timed(col, texts, vecs, variants)
    return {name: summary(ms) for name, ms in db_ms.items()}, hits


def timed(col: pgcite.Collection, texts: list[str], vecs: np.ndarray, variants: Variants,
          ) -> tuple[dict[str, list[float]], list[dict[str, list[str]]]]:
    """Database time of each variant (its search options, its patches) on each query, and each
    query's hit ids per variant. Every variant runs once untimed first: this machine keeps little
    in its page cache, so whichever came first would read the query's pages from disk for the
    others; then timed, in an order rotated query by query."""
    names = list(variants)
    db_ms: dict[str, list[float]] = {name: [] for name in names}
    hits: list[dict[str, list[str]]] = []
    for i, (text, vec) in enumerate(zip(texts, vecs, strict=True)):
        ids: dict[str, list[str]] = {}
        for timed in (False, True):
            for name in names[i % len(names):] + names[:i % len(names)]:
                opts, patches = variants[name]
                result = _search(col, text, vec, opts, *patches)
                if timed:
                    db_ms[name].append(result.timings_ms["database"])
                    ids[name] = [h.id for h in result.hits]
        hits.append(ids)
    return db_ms, hits


FILTERED_QUERIES = 60
# A third of the chunks (corpus A) and a quarter (dated before 1700: years are uniform in
# 1600-2000), the kinds of filter a kiosk or a tiered corpus always sends.
FILTERS: dict[str, dict[str, Any]] = {"corpus A": {"corpora": ["A"]},
                                     "cutoff 1699": {"cutoff": "1699-12-31"}}


def filtered_latency(col: pgcite.Collection, vocab: list[str], rng: np.random.Generator,
                     centroids: np.ndarray, *, mode: str = "hybrid",
                     baseline: bool = True) -> dict[str, Any]:
    """Database time of ``mode`` under filters, reading the scored chunks best first (the
    default) against (with ``baseline``) joining every scored chunk's row, interleaved as in
    :func:`latency`."""
    texts = random_queries(vocab, rng, FILTERED_QUERIES)
    vecs = synthetic_vectors(FILTERED_QUERIES, rng, centroids)
    kinds = (("", ()), (", every row joined", (EVERY_ROW,))) if baseline else (("", ()),)
    variants: Variants = {f"{mode}, {f}{how}": ({"mode": mode, "filters": FILTERS[f]}, patches)
                          for f in FILTERS for how, patches in kinds}
    out, hits = _interleaved(col, texts, vecs, variants)
    if baseline:
        out["best_first_vs_every_row_differing_queries"] = sum(
            any(ids[f"{mode}, {f}"] != ids[f"{mode}, {f}, every row joined"] for f in FILTERS)
            for ids in hits)
    out["mode"] = mode
    return out


def latency(col: pgcite.Collection, vocab: list[str], rng: np.random.Generator,
            centroids: np.ndarray, *, hnsw: bool = True) -> dict[str, Any]:
    """Database time per mode, the variants interleaved query by query (a noisy machine shifts
    them alike). "summed" is the exact keyword leg without skipping its long lists, as every
    search was before it (pgcite/index/_query.py, the skipping parts): the same hits, compared here. Without
    ``hnsw`` (no vector index) the keyword variants alone."""
    texts = random_queries(vocab, rng, QUERIES)
    vecs = synthetic_vectors(QUERIES, rng, centroids)
    plain: tuple[tuple[Any, str, Any], ...] = ()
    variants: Variants = {
        "keyword": ({"mode": "keyword"}, plain), "vector": ({"mode": "vector"}, plain),
        "hybrid": ({"mode": "hybrid"}, plain),
        "keyword, summed": ({"mode": "keyword"}, (SUMMED,)),
        "hybrid, summed": ({"mode": "hybrid"}, (SUMMED,)),
        "keyword, term_depth=1000": ({"mode": "keyword", "term_depth": 1000}, plain),
        "hybrid, term_depth=1000": ({"mode": "hybrid", "term_depth": 1000}, plain),
    }
    if not hnsw:
        variants = {name: v for name, v in variants.items() if name.startswith("keyword")}
    out, hits = _interleaved(col, texts, vecs, variants)
    differ = sum(any(ids[leg] != ids[f"{leg}, summed"] for leg in ("keyword", "hybrid")
                     if leg in ids) for ids in hits)
    out["skipping_vs_summed_differing_queries"] = differ
    # the approximate leg (each term's list read to term_depth) against the exact one: the share
    # of the exact top 5 it also returns, averaged over the queries
    for leg in ("keyword", "hybrid"):
        approx = f"{leg}, term_depth=1000"
        pairs = [(ids[leg], ids[approx]) for ids in hits if leg in ids and approx in ids]
        if pairs:
            out[f"{approx}, recall of the exact top 5"] = round(statistics.mean(
                len(set(exact) & set(got)) / len(exact) if exact else 1.0
                for exact, got in pairs), 4)
    if not hnsw:
        return out
    # End to end with the real model embedding the (synthetic) question.
    total = []
    for text in texts[:100]:
        result = col.search(text, top_k=5, mode="hybrid", options={"term_depth": 1000})
        total.append(result.timings_ms["total"])
    # (with term_depth=1000)
    out["hybrid_end_to_end_with_embedding"] = {"p50_ms": pct(total, 0.5),
                                               "p95_ms": pct(total, 0.95)}
    return out


def _previous(name: str, folder: str) -> dict[str, Any] | None:
    path = RESULTS / folder / "summary.json"
    return json.loads(path.read_text()).get(name) if path.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--reuse", action="store_true",
                        help="measure latency on collections built by an earlier run")
    parser.add_argument("--no-hnsw", action="store_true",
                        help="build no vector index (placeholder vectors); the keyword leg alone")
    parser.add_argument("--no-baselines", action="store_true",
                        help="leave out every-row-joined filtering and the from-scratch rebuild")
    parser.add_argument("--results", default="scale",
                        help="folder under bench/results (another one keeps the published run)")
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    vocab = vocabulary()
    centres = centroids(rng)
    # sizes not run now keep their published rows (a 1M run alone leaves the 100k row as it was)
    published = RESULTS / args.results / "summary.json"
    results: dict[str, Any] = json.loads(published.read_text()) if published.exists() else {}
    results.update({"dim": DIM, "words_per_chunk": WORDS_PER_CHUNK, "queries": QUERIES})
    hnsw = not args.no_hnsw
    with client() as c:
        for n in [int(x) for x in args.sizes.split(",")]:
            name = f"scale_{n // 1000}k"
            previous = _previous(name, args.results)
            if args.reuse:
                # never a rebuild: with no earlier run recorded in this folder, the collection
                # would be dropped and built again (minutes to hours, and another run's data)
                if previous is None:
                    raise SystemExit(f"--reuse: bench/results/{args.results} records no {name}; "
                                     "name the folder of the run that built it")
                col, build = c.collection(name), previous["build"]
            else:
                c.drop_collection(name, missing_ok=True)
                col = c.create_collection(name)
                print(f"{name}: loading {n} synthetic chunks", file=sys.stderr)
                build = load(col, n, vocab, rng, centres, hnsw=hnsw)
                print(f"{name}: built {build}", file=sys.stderr)
                col = c.collection(name)
            # a reused collection keeps its published write-path rows (add_documents, ...)
            results[name] = {**(previous if args.reuse and previous else {}),
                             "chunks": n, "build": build, "sizes": sizes(col),
                             "latency": latency(col, vocab, rng, centres, hnsw=hnsw),
                             "filtered_latency": filtered_latency(
                                 col, vocab, rng, centres, mode="hybrid" if hnsw else "keyword",
                                 baseline=not args.no_baselines)}
            if not args.reuse:
                print(f"{name}: adding {ADD_DOCUMENTS} documents", file=sys.stderr)
                results[name]["add_documents"] = add_documents(
                    col, n, vocab, rng, centres, vectors=hnsw, baseline=not args.no_baselines)
                results[name]["latency_after_add"] = latency(col, vocab, rng, centres,
                                                             hnsw=hnsw)
            # each size says its own run: a 1M run leaves the 10M row of an older one
            results[name]["stamp"] = run_stamp()
            print(json.dumps(results[name], indent=2), file=sys.stderr)
    out = RESULTS / args.results
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(results, indent=2))
    (out / "report.md").write_text(render(results))
    print(f"wrote {out}/summary.json and report.md", file=sys.stderr)


def render(results: dict[str, Any]) -> str:
    from make_readme import SCALE_HEADER, p50_p95, scale_rows

    lines = ["# Scale benchmark (synthetic chunks; top-5; p50 / p95 ms)", "", *SCALE_HEADER,
             *scale_rows(results)]
    for name, r in results.items():  # a run without a vector index: its keyword variants
        if isinstance(r, dict) and "latency" in r and r["build"].get("hnsw_build_s") is None:
            lat = r["latency"]
            lines.append(f"\n{name}, no vector index (the keyword leg alone): exact "
                         + "; ".join(f"{v} {lat[k]['p50_ms']} / {lat[k]['p95_ms']}" for k, v in (
                             ("keyword", "default"), ("keyword, summed", "every posting summed"),
                             ("keyword, term_depth=1000", "term_depth=1000")) if k in lat))
    for name, r in results.items():  # the approximate keyword leg against the exact one
        recall = {k: v for k, v in r.get("latency", {}).items() if "recall" in k} \
            if isinstance(r, dict) else {}
        if recall:
            lines.append(f"\n{name}: " + "; ".join(f"{k} {v}" for k, v in recall.items()))
    for name, r in results.items():
        if isinstance(r, dict) and "filtered_latency" in r:
            f = r["filtered_latency"]
            mode = f.get("mode", "hybrid")
            lines += ["", f"Filtered, {name} ({FILTERED_QUERIES} queries; {mode} database ms):",
                      "", "| filter | best first (default) | every row joined |", "|---|---|---|"]
            lines += [f"| {key} | {p50_p95(f, f'{mode}, {key}')}"
                      f" | {p50_p95(f, f'{mode}, {key}, every row joined')} |"
                      for key in FILTERS]
            if "best_first_vs_every_row_differing_queries" in f:
                lines.append(f"\nQueries whose hits differ between the two:"
                             f" {f['best_first_vs_every_row_differing_queries']}")
    lines += ["", "Sizes (largest relations):", ""]
    for name, r in results.items():
        if isinstance(r, dict) and "sizes" in r:
            lines.append(f"- {name}: " + ", ".join(f"{k} {v}" for k, v in r["sizes"].items()))
    for name, r in results.items():
        if isinstance(r, dict) and "add_documents" in r:
            a = r["add_documents"]
            growth = a["index_growth_bytes"]
            segment_kb = sum(v for k, v in growth.items() if k != "snapshot_members") / 1024
            scratch = (f" vs {a['from_scratch_build_s']} s from scratch"
                       if "from_scratch_build_s" in a else "")
            compared = (f"; same keyword top-10 on {a['same_top10']}/{a['queries_compared']}"
                        f" queries, max score difference {a['max_score_difference']:.2g}"
                        if "same_top10" in a else "")
            lines += ["", f"- {name}: adding {a['documents']} documents: snapshot built in"
                      f" {a['snapshot_build_s']} s ({a['insert_and_build_s']} s with the"
                      f" insert){scratch}; keyword index +{segment_kb:.0f} kB, snapshot_members"
                      f" +{growth['snapshot_members'] / 1024:.0f} kB{compared}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
