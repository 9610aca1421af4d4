"""Search latency on SciFact, side by side in ONE run (issue 38, "search at least as fast as
before, then faster"): pgcite's search as a user calls it (defaults: the first 10 hits'
snippets, the collection's stages) at top-10 and top-100, its keyword leg at top-100, the
hand-written one-statement SQL hybrid (bench/peers.py: OR ts_rank + HNSW, RRF in SQL) and an
in-memory reference (bm25s + exact numpy dense + RRF in Python), interleaved per query in a
shuffled order so that a shared machine's noise falls on every variant alike (and four former
ways beside the defaults: hybrid top-10 with its statement composed for each search, as before
statements were cached by shape; the HNSW knobs set by a transaction of their own, as before
the statement set them; snippets marked by ts_headline in a statement of their own, as before
Python marked them; hybrid and keyword top-10 with every part of the keyword leg, as before the
statement was built for its snapshot's shape). Query vectors are precomputed: embedding is not
measured. The claims the router sends to the entity boost get their own p50 at top-10. Then
pgcite hybrid top-10 under 16 concurrent clients (threads on one Client), how the plain top-100
lists compare with exact distances, and where the top-100 and hybrid top-10 statements'
database time goes (EXPLAIN ANALYZE with their real parameters: planning, each named part, the
vector leg; execution without per-node timing).

Needs an ingested ``scifact`` collection (bench/scifact.py); never ingests. It also replaces the
former bench/snippets.py: the "no snippets" rows are the same searches with ``snippets=False``,
the "every hit's snippet" rows with ``snippets=True`` (the default before it was 10).

    PGCITE_DATA_DIR=/work/data/mine nice -n 10 python bench/search_latency.py  # -> results/search_latency/
    python bench/search_latency.py --queries 30 --explain 5 --clients 4 --name ../.smoke/search_latency  # smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from _common import (
    DATA,
    RESULTS,
    bm25s_searcher,
    client,
    exact_dense_searcher,
    read_jsonl,
    run_stamp,
)
from peers import PlainSQL
from psycopg import sql
from psycopg.rows import dict_row

import pgcite
from pgcite.evaluate import GoldenQuery, load_golden
from pgcite.evaluate._collection import embed_queries
from pgcite.retrieve import DEFAULT_SNIPPETS, _search, _snippets, _view
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._route import entity_question
from pgcite.retrieve._search import SearchOptions, prepare_search
from pgcite.retrieve._sql import StatementShape, search_statement

RRF_K = 60
# Targets of issue 38 (ratios to the one-statement SQL hybrid at top-100, to the in-memory
# reference end to end at top-10, and the top-10 database time).
TARGETS = {"hybrid@100 / sql@100": 1.1, "keyword@100 / sql@100": 0.6,
           "hybrid@10 database p50 ms": 3.0, "hybrid@10 wall / in-memory": 3.0}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def stats(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values), 2), "p95_ms": round(pct(values, 0.95), 2),
            "n": len(values)}


def in_memory(corpus: list[dict[str, Any]], col: pgcite.Collection,
              vectors: dict[str, np.ndarray], top_k: int) -> Callable[[GoldenQuery], Any]:
    """bm25s + exact dense (numpy) + RRF in Python: what a search costs with no database."""
    keyword = bm25s_searcher(corpus, depth=3 * top_k)
    dense = exact_dense_searcher(col, vectors, depth=top_k)  # returns 3 x depth

    def search(query: GoldenQuery) -> list[str]:
        fused: dict[str, float] = {}
        for hits in (keyword(query).hits, dense(query).hits):
            for rank, hit in enumerate(hits, 1):
                fused[hit.document_id] = fused.get(hit.document_id, 0.0) + 1 / (RRF_K + rank)
        return sorted(fused, key=lambda d: -fused[d])[:top_k]

    return search


@contextlib.contextmanager
def _replaced(module: Any, name: str, value: Any) -> Iterator[None]:
    """``module``'s global ``name`` is ``value`` meanwhile: how each former way below runs beside
    the defaults (the search code reads these globals at call time)."""
    namespace = vars(module)
    real = namespace[name]
    namespace[name] = value
    try:
        yield
    finally:
        namespace[name] = real


def knobs_apart() -> contextlib.AbstractContextManager[None]:
    """Searches meanwhile set the HNSW scan's knobs as they did before the statement set them
    itself: BEGIN, a SELECT of set_config and COMMIT around the statement, in one pipeline. The
    statement text is marked, so that it is prepared and planned apart, as then, under the
    search's own ef_search (at top-100 on SciFact PostgreSQL then sorted every chunk's exact
    distance instead of walking the index: its estimate grows with ef_search)."""
    def run(conn: Any, info: Any, snapshot: Any, query: str, *, filters: Filters,
            options: SearchOptions, embedded: Any, explain: bool = False) -> Any:
        statement, params = prepare_search(info, snapshot, query, filters=filters,
                                           options=options, query_vector=embedded.vector,
                                           explain=explain)
        timings = dict(embedded.timings)
        started = time.perf_counter()
        with conn.pipeline(), conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
            cur.execute("SELECT set_config('hnsw.ef_search', %s, true),"
                        " set_config('hnsw.iterative_scan', 'strict_order', true)",
                        (str(options.hnsw_ef_search),))
            cur.execute(sql.SQL("{} -- knobs apart").format(statement), params)
            rows = cur.fetchall()
        timings["database"] = (time.perf_counter() - started) * 1000
        return _search.shape_result(rows, query, info, snapshot, options=options,
                                    explain=explain, timings=timings, started=embedded.started)

    return _replaced(_view, "run_embedded", run)


def composed_per_search() -> contextlib.AbstractContextManager[None]:
    """Searches meanwhile compose and render their statement (prepare_search calls the uncached
    function); the other variants keep the cache."""
    return _replaced(_search, "search_statement", search_statement.__wrapped__)


def every_part() -> contextlib.AbstractContextManager[None]:
    """Searches meanwhile run the statement with every part of the keyword leg, as before it was
    built for its snapshot's shape: the long-list skipping parts (which never run on SciFact,
    whose lists are all short) and the check for deleted chunks (it deleted none)."""
    def general(shape: StatementShape) -> sql.SQL:
        return search_statement(dataclasses.replace(shape, longest_list=None, deletions=True))

    return _replaced(_search, "search_statement", general)


def marked_by_database() -> contextlib.AbstractContextManager[None]:
    """Searches meanwhile have their snippets marked by PostgreSQL's ts_headline, in a
    statement of their own, as before Python marked them (what a config made in the database
    still gets)."""
    return _replaced(_snippets, "stemmer_for", lambda ts_config: None)


def sequential(col: pgcite.Collection, plain: PlainSQL, memory: Callable[[GoldenQuery], Any],
               queries: list[GoldenQuery], vectors: dict[str, np.ndarray]
               ) -> dict[str, dict[str, float]]:
    """Every variant for every query, in an order shuffled for each query (seeded): a rotating
    order kept each variant behind the same neighbour, and one run right after the same query
    in another variant ran on warm caches (the cached statement measured 0.8 ms slower than the
    composed one behind it, the reverse of an alternating A/B); wall, database, snippet times."""
    wall: dict[str, list[float]] = {}
    database: dict[str, list[float]] = {}
    snippets: dict[str, list[float]] = {}

    def pgcite_call(name: str, top_k: int, mode: pgcite.Mode, marked: bool | None = None,
                    rendered: bool = True, knobs: bool = True,
                    headline: bool = False, shaped: bool = True
                    ) -> Callable[[GoldenQuery], None]:
        """``marked`` None: as a user calls it (the default: the first DEFAULT_SNIPPETS hits'
        snippets); True every hit's, False none. ``rendered=False``: the statement composed
        and rendered for this search, as before the statement cache; ``knobs=False``: the HNSW
        knobs set apart (:func:`knobs_apart`), as before the statement set them;
        ``headline``: snippets marked by the database (:func:`marked_by_database`);
        ``shaped=False``: every part of the statement (:func:`every_part`)."""
        def run(q: GoldenQuery) -> None:
            with (contextlib.nullcontext() if rendered else composed_per_search(),
                  contextlib.nullcontext() if knobs else knobs_apart(),
                  marked_by_database() if headline else contextlib.nullcontext(),
                  contextlib.nullcontext() if shaped else every_part()):
                started = time.perf_counter()
                result = col.search(q.text, top_k=top_k, mode=mode,
                                    snippets=DEFAULT_SNIPPETS if marked is None else marked,
                                    query_vector=vectors[q.id] if mode != "keyword" else None)
                wall.setdefault(name, []).append((time.perf_counter() - started) * 1000)
            database.setdefault(name, []).append(result.timings_ms["database"])
            if marked is not False:
                snippets.setdefault(name, []).append(result.timings_ms.get("snippets", 0.0))
        return run

    def plain_call(name: str, top_k: int) -> Callable[[GoldenQuery], None]:
        def run(q: GoldenQuery) -> None:
            started = time.perf_counter()
            plain.run(q.text, vectors[q.id], top_k)
            ms = (time.perf_counter() - started) * 1000
            wall.setdefault(name, []).append(ms)
            database.setdefault(name, []).append(ms)  # one statement on its own connection
        return run

    def memory_call(q: GoldenQuery) -> None:
        started = time.perf_counter()
        memory(q)
        wall.setdefault("in-memory hybrid@10", []).append((time.perf_counter() - started) * 1000)

    variants = [
        pgcite_call("pgcite hybrid@10", 10, "hybrid"),
        pgcite_call("pgcite hybrid@100", 100, "hybrid"),
        pgcite_call("pgcite keyword@100", 100, "keyword"),
        pgcite_call("pgcite hybrid@100, every hit's snippet", 100, "hybrid", marked=True),
        pgcite_call("pgcite keyword@100, every hit's snippet", 100, "keyword", marked=True),
        pgcite_call("pgcite hybrid@10, no snippets", 10, "hybrid", marked=False),
        pgcite_call("pgcite hybrid@10, statement composed per search", 10, "hybrid",
                    rendered=False),
        pgcite_call("pgcite hybrid@10, HNSW knobs set apart", 10, "hybrid", knobs=False),
        pgcite_call("pgcite hybrid@10, every part of the statement", 10, "hybrid",
                    shaped=False),
        pgcite_call("pgcite keyword@10, every part of the statement", 10, "keyword",
                    shaped=False),
        pgcite_call("pgcite keyword@10", 10, "keyword"),
        pgcite_call("pgcite hybrid@100, HNSW knobs set apart", 100, "hybrid", knobs=False),
        pgcite_call("pgcite hybrid@10, snippets by ts_headline", 10, "hybrid", headline=True),
        pgcite_call("pgcite hybrid@100, every hit's snippet by ts_headline", 100, "hybrid",
                    marked=True, headline=True),
        pgcite_call("pgcite hybrid@100, no snippets", 100, "hybrid", marked=False),
        pgcite_call("pgcite keyword@100, no snippets", 100, "keyword", marked=False),
        plain_call("sql hybrid@10", 10),
        plain_call("sql hybrid@100", 100),
        memory_call,
    ]
    for q in queries[:20]:  # warm-up: pool, caches, plans; not recorded
        for variant in variants:
            variant(q)
    names = list(wall)  # the table's order: the variants' own
    wall.clear()
    database.clear()
    snippets.clear()
    order = random.Random(0)
    for q in queries:
        for variant in order.sample(variants, len(variants)):
            variant(q)
    out: dict[str, dict[str, float]] = {}
    # the claims the router sends to the entity boost (a deeper search, the entities named)
    routed = [i for i, q in enumerate(queries) if entity_question(q.text)]
    for name in names:
        samples = wall[name]
        row = {"wall_" + k if k != "n" else k: v for k, v in stats(samples).items()}
        if routed and name.startswith("pgcite hybrid@10"):
            row["entity_routed"] = len(routed)
            row["entity_routed_wall_p50_ms"] = round(
                statistics.median(samples[i] for i in routed), 2)
        if name in database:
            row["database_p50_ms"] = round(statistics.median(database[name]), 2)
            row["database_p95_ms"] = round(pct(database[name], 0.95), 2)
        if name in snippets:
            row["snippets_p50_ms"] = round(statistics.median(snippets[name]), 2)
        out[name] = row
    return out


def concurrent(col: pgcite.Collection, queries: list[GoldenQuery],
               vectors: dict[str, np.ndarray], clients: int) -> dict[str, Any]:
    """pgcite hybrid top-10 (defaults) from ``clients`` threads on one Client, every query
    once per thread (each thread starts at its own offset)."""
    samples: list[float] = []
    lock = threading.Lock()

    def worker(offset: int) -> None:
        mine: list[float] = []
        for i in range(len(queries)):
            q = queries[(i + offset) % len(queries)]
            started = time.perf_counter()
            col.search(q.text, top_k=10, query_vector=vectors[q.id])
            mine.append((time.perf_counter() - started) * 1000)
        with lock:
            samples.extend(mine)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k * len(queries) // clients,))
               for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    return {"clients": clients, **{"wall_" + k if k != "n" else k: v
                                   for k, v in stats(samples).items()},
            "queries_per_s": round(len(samples) / seconds, 1)}


def _walk(node: dict[str, Any], parts: dict[str, float]) -> None:
    """Each named part's time (CTE kw_idf ...; initplans and subplans are left out) and the
    vector leg's: the node that orders by distance, an HNSW scan or a sort of every row."""
    name = node.get("Subplan Name", "")
    total = node.get("Actual Total Time", 0.0) * node.get("Actual Loops", 1)
    if name.startswith("CTE "):
        parts[name] = parts.get(name, 0.0) + total
    if "<=>" in str(node.get("Order By", "")) + str(node.get("Sort Key", "")):
        how = "HNSW scan" if "hnsw" in str(node.get("Index Name", "")) else "exact sort"
        parts[f"vector leg ({how})"] = max(parts.get(f"vector leg ({how})", 0.0), total)
    for child in node.get("Plans", []):
        _walk(child, parts)


# The statements EXPLAINed: hybrid top-10 (the database target's) and the top-100 ones.
EXPLAINED = (("hybrid", 10), ("hybrid", 100), ("keyword", 100))


def breakdown(col: pgcite.Collection, queries: list[GoldenQuery],
              vectors: dict[str, np.ndarray]) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the statements with their real parameters: planning and execution
    time, each named part's (inclusive) time, medians over ``queries``; and the execution time
    without per-node timing (TIMING OFF), whose clock reads inflate a plan of many small
    nodes."""
    view = col.view()
    out: dict[str, Any] = {}
    with col.client.connection() as conn:
        segments = conn.execute(sql.SQL(
            "SELECT count(*), coalesce(sum(cardinality(deleted)), 0)"
            " FROM {s}.snapshot_segments WHERE snapshot_id = %s").format(
            s=view.info.schema_id), (view.snapshot.snapshot_id,)).fetchone() or (0, 0)
        out["segments"], out["deleted_chunks"] = int(segments[0]), int(segments[1])
        for mode, top_k in EXPLAINED:
            options = SearchOptions(top_k=top_k, mode=mode)
            out[f"{mode}@{top_k} ef_search"] = options.resolved(
                view.info.settings).hnsw_ef_search
            parts: dict[str, list[float]] = {}
            for q in queries:
                statement, params = prepare_search(
                    view.info, view.snapshot, q.text, filters=Filters(), options=options,
                    query_vector=vectors[q.id])
                plan = conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) {}").format(
                    statement), params).fetchone()[0][0]  # type: ignore[index]
                untimed = conn.execute(sql.SQL(
                    "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) {}").format(statement),
                    params).fetchone()[0][0]  # type: ignore[index]
                found: dict[str, float] = {"planning": plan["Planning Time"],
                                           "execution": plan["Execution Time"],
                                           "execution, TIMING OFF": untimed["Execution Time"]}
                _walk(plan["Plan"], found)
                for name, ms in found.items():
                    parts.setdefault(name, []).append(ms)
            out[f"{mode}@{top_k}"] = {name: round(statistics.median(v), 2)
                                      for name, v in parts.items()}
    return out


def ratios(seq: dict[str, dict[str, float]]) -> dict[str, Any]:
    sql100 = seq["sql hybrid@100"]["wall_p50_ms"]
    found = {
        "hybrid@100 / sql@100": seq["pgcite hybrid@100"]["wall_p50_ms"] / sql100,
        "keyword@100 / sql@100": seq["pgcite keyword@100"]["wall_p50_ms"] / sql100,
        "hybrid@10 database p50 ms": seq["pgcite hybrid@10"]["database_p50_ms"],
        "hybrid@10 wall / in-memory": (seq["pgcite hybrid@10"]["wall_p50_ms"]
                                       / seq["in-memory hybrid@10"]["wall_p50_ms"]),
    }
    return {name: {"measured": round(value, 2), "target": TARGETS[name],
                   "met": value <= TARGETS[name]} for name, value in found.items()}


def against_exact(col: pgcite.Collection, queries: list[GoldenQuery],
                  vectors: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """How a plain top-100 search's list (no stages: the statement as a search runs it,
    SearchView.search_once) compares with the list of exact distances (the statement with index
    scans off: every chunk's distance sorted)."""
    view = col.view()
    out: dict[str, dict[str, float]] = {}
    with col.client.connection() as conn:
        for mode in ("vector", "hybrid"):
            same = same10 = 0
            overlaps: list[float] = []
            for q in queries:
                options = SearchOptions(top_k=100, mode=mode)
                found = [h.id for h in view.search_once(q.text, filters=Filters(),
                                                        options=options,
                                                        query_vector=vectors[q.id]).hits]
                statement, params = prepare_search(
                    view.info, view.snapshot, q.text, filters=Filters(), options=options,
                    query_vector=vectors[q.id])
                with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                    cur.execute("SET LOCAL enable_indexscan = off")
                    exact = [r["id"] for r in cur.execute(  # its own text: planned apart
                        sql.SQL("{} -- exact").format(statement), params)]
                same += found == exact
                same10 += found[:10] == exact[:10]
                overlaps.append(len(set(found) & set(exact)) / max(1, len(exact)))
            out[f"{mode}@100"] = {"identical": same, "identical_top10": same10,
                                  "mean_overlap": round(statistics.mean(overlaps), 4),
                                  "min_overlap": round(min(overlaps), 3)}
    return out


_HIGHLIGHT_ALL = sql.SQL(
    "SELECT ts_headline({cfg}::regconfig, b, %(q)s::tsquery,"
    " 'StartSel=\ue000, StopSel=\ue001, HighlightAll=true')"
    " FROM unnest(%(bodies)s::text[]) WITH ORDINALITY AS t(b, n) ORDER BY n")


def marks_against_headline(col: pgcite.Collection, queries: list[GoldenQuery],
                           vectors: dict[str, np.ndarray]) -> dict[str, Any]:
    """Whether Python marks the words PostgreSQL marks: for each claim's top-10 passages, the
    words (counted) marked in the whole passage by the marking's own matching and by
    ts_headline with HighlightAll, and the words that differ most often."""
    from collections import Counter

    from pgcite.retrieve._marks import matched_spans, stemmer_for

    stems = stemmer_for(col.info.ts_config)
    assert stems is not None, "a built-in text-search config"
    same = total = 0
    differing: Counter[str] = Counter()
    with col.client.connection() as conn:
        for q in queries:
            result = col.search(q.text, top_k=10, snippets=False, query_vector=vectors[q.id])
            lexemes = set(result.lexemes)
            rows = conn.execute(_HIGHLIGHT_ALL.format(cfg=sql.Literal(col.info.ts_config)), {
                "q": " | ".join("'" + x.replace("'", "''") + "'" for x in lexemes) or "''",
                "bodies": [h.body for h in result.hits]}).fetchall()
            bodies = [h.body for h in result.hits]
            for body, mine, (marked,) in zip(bodies, matched_spans(bodies, lexemes, stems),
                                             rows, strict=True):
                text, spans = _snippets.unmark(marked)
                theirs = Counter(text[a:b].lower() for a, b in spans)
                ours = Counter(body[a:b].lower() for a, b, _ in mine)
                total += 1
                same += ours == theirs
                differing.update(w for w in ours | theirs if ours[w] != theirs[w])
    return {"passages": total, "same_words": same,
            "most_differing": [w for w, _ in differing.most_common(8)]}


def report(summary: dict[str, Any]) -> str:
    lines = [f"# Search latency on SciFact ({summary['queries']} train claims, one run)", "",
             f"Commit {summary['commit']}, {summary['date']}, {summary['machine']}, load "
             f"{summary['load_average_at_start']} at the start, {summary['load_average_at_end']} "
             "at the end (a shared machine: compare within this table).", "",
             "| variant | p50 wall ms | p95 wall ms | p50 database ms | p50 snippets ms |",
             "|---|---|---|---|---|"]
    for name, row in summary["sequential"].items():
        lines.append(f"| {name} | {row['wall_p50_ms']} | {row['wall_p95_ms']} | "
                     f"{row.get('database_p50_ms', '–')} | {row.get('snippets_p50_ms', '–')} |")
    routed = summary["sequential"]["pgcite hybrid@10"].get("entity_routed")
    if routed:
        lines += ["", f"Of these claims {routed} are routed to the entity boost (a search 50 deep, "
                  "the entities the claim names read); their p50 wall ms: " + ", ".join(
                      f"{name} {row['entity_routed_wall_p50_ms']}"
                      for name, row in summary["sequential"].items()
                      if "entity_routed_wall_p50_ms" in row) + "."]
    c = summary["concurrent"]
    lines += ["", f"pgcite hybrid@10 from {c['clients']} concurrent clients: p50 "
              f"{c['wall_p50_ms']} ms, p95 {c['wall_p95_ms']} ms, {c['queries_per_s']} queries/s.",
              "", "| target | measured | target | met |", "|---|---|---|---|"]
    for name, t in summary["targets"].items():
        lines.append(f"| {name} | {t['measured']} | ≤ {t['target']} | {'yes' if t['met'] else 'no'} |")
    lines += ["", f"Top-100 against exact distances ({summary['queries']} claims):"]
    for name, e in summary["against_exact"].items():
        lines.append(f"- {name}: {e['identical']} lists identical, {e['identical_top10']} top-10s "
                     f"identical; overlap mean {e['mean_overlap']}, least {e['min_overlap']}")
    m = summary.get("marks_against_headline")
    if m:
        lines += ["", f"Snippets marked in Python against ts_headline (HighlightAll, the whole "
                  f"passage; each claim's top 10): the same words in {m['same_words']} of "
                  f"{m['passages']} passages; the words that differ most often: "
                  + ", ".join(repr(w) for w in m["most_differing"]) + "."]
    b = summary["breakdown"]
    shapes = [f"{mode}@{top_k}" for mode, top_k in EXPLAINED]
    lines += ["", f"## Where the database time goes (EXPLAIN ANALYZE, median of "
              f"{b['queries']} claims; parts are inclusive)", "",
              f"{b['segments']} segment(s), {b['deleted_chunks']} deleted chunk(s) in the "
              f"snapshot; ef_search "
              + ", ".join(f"{s} {b[s + ' ef_search']}" for s in shapes if s in b) + ".", "",
              "| part | " + " | ".join(f"{s} ms" for s in shapes) + " |",
              "|---|" + "---|" * len(shapes)]
    names = list(dict.fromkeys(name for s in shapes for name in b.get(s, {})))
    for name in names:
        lines.append(f"| {name} | "
                     + " | ".join(str(b.get(s, {}).get(name, "–")) for s in shapes) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300, help="first N train claims")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--explain", type=int, default=30, help="claims EXPLAINed")
    parser.add_argument("--name", default="search_latency", help="results folder")
    args = parser.parse_args()
    golden = load_golden(DATA / "scifact", split="train")
    queries = golden.queries[: args.queries]
    summary: dict[str, Any] = {**run_stamp(), "queries": len(queries),
                               "load_average_at_start": round(os.getloadavg()[0], 2)}
    with client() as c:
        col = c.collection("scifact")
        vectors, _ = embed_queries(col.view(), golden.model_copy(update={"queries": queries}))
        memory = in_memory(read_jsonl(DATA / "scifact" / "corpus.jsonl"), col, vectors, 10)
        plain = PlainSQL(c.db.url, col)
        summary["sequential"] = sequential(col, plain, memory, queries, vectors)
        plain.conn.close()
        summary["concurrent"] = concurrent(col, queries, vectors, args.clients)
        summary["against_exact"] = against_exact(col, queries, vectors)
        summary["marks_against_headline"] = marks_against_headline(col, queries[:100], vectors)
        summary["breakdown"] = {"queries": min(args.explain, len(queries)),
                                **breakdown(col, queries[: args.explain], vectors)}
    summary["load_average_at_end"] = round(os.getloadavg()[0], 2)
    summary["targets"] = ratios(summary["sequential"])
    out = RESULTS / args.name
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "report.md").write_text(report(summary))
    print(report(summary))


if __name__ == "__main__":
    main()
