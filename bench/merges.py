"""Keyword latency over successive small ingests, with and without the merges after each build
(pgcite/index/_merge.py), side by side; and what a build costs at two collection sizes.

**Ingests.** Three collections start from the same synthetic base (bench/scale.py's Zipf texts
over SciFact's vocabulary, one chunk a document; placeholder vectors, no HNSW index: only the
keyword leg is measured). Then ROUNDS times, two of them get the same DOCS new documents through
``Collection.ingest`` (chunked, embedded with MiniLM, built, activated): one with the merges
after each build (the default budget), the other with ``merge_budget_s = 0``; the third gets
none, a control for the load of the shared machine, which moves every collection's latency
alike. After each ingest all three answer the same QUERIES random six-word keyword searches,
in rotated order, database time only, twice: through ``Collection.search`` (what a user sees
right after the ingest: a new snapshot is a new statement, planned on each pooled connection's
first five uses) and prepared on one connection per collection after a warm-up (the layout's
cost between ingests, the plan cached). The report gives each round's p50 / p95 of both, the
active snapshot's segments, what the ingest cost (build, merges), and each variant's figures
over the control's (which, never ingested into, keeps its cached plans all along).

**Cached plans.** Then, on the three collections as the rounds left them, the keyword statement
with the snapshot's id as a literal (as searches send it) against the same statement with it as
a parameter (as they did before), alternating query by query on one connection, each prepared
(psycopg prepares a statement on its fifth use): database round trip, and how many executions
PostgreSQL ran with its cached generic plan instead of planning anew.

**Build cost.** At two base sizes, 100 documents are added as a new snapshot REPEATS times per
variant, alternating: as builds are made now (the change: the new versions, against the active
snapshot) and as they were before (the whole member list read into Python and passed to the
build, which compares it with the base's). Both give the same snapshot; the time is the build's.

    PGCITE_DATA_DIR=/work/data/merges python bench/merges.py                # ~30 min
    python bench/merges.py --base 20000 --rounds 30 --sizes 10000           # a smaller look

Written to bench/results/merges/ (summary.json, report.md, latency.png).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import RESULTS, client, run_stamp
from psycopg import sql
from scale import (
    _hnsw_name,
    centroids,
    insert_synthetic,
    pct,
    placeholders_allowed,
    random_queries,
    synthetic_texts,
    vocabulary,
)

import pgcite
from pgcite.retrieve._filters import Filters, compile_filters
from pgcite.retrieve._search import SearchOptions, prepare_search
from pgcite.retrieve._sql import build_search_sql
from pgcite.store._snapshots import activate_snapshot, build_snapshot, plan_snapshot

SEED = 36
WARM_UP = 6  # psycopg prepares on the fifth use; PostgreSQL picks generic or custom after five
OUT = RESULTS / "merges"


def base_collection(c: pgcite.Client, name: str, n: int, vocab: list[str]) -> pgcite.Collection:
    """``name`` afresh with ``n`` synthetic one-chunk documents in one snapshot, activated."""
    c.drop_collection(name, missing_ok=True)
    col = c.create_collection(name, settings=pgcite.CollectionSettings(
        entities="off", contextual="off"))
    rng = np.random.default_rng(SEED)
    with c.db.transaction() as conn:
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {s}.{i}").format(
            s=col.info.schema_id, i=sql.Identifier(_hnsw_name(conn, col))))
        pks: list[int] = []
        for start in range(0, n, 50_000):
            pks += insert_synthetic(conn, col, start, min(50_000, n - start), vocab, rng,
                                    centroids(), vectors=False)
        with placeholders_allowed(False):
            plan = plan_snapshot(conn, col.info, pks, spec=col.info.embedder, content_id=None,
                                 replace_all=True)
            snap = build_snapshot(conn, col.info, plan, spec=col.info.embedder, note="base")
        activate_snapshot(conn, col.info, snap)
    with c.db.connect(autocommit=True) as conn:
        conn.execute(sql.SQL("VACUUM ANALYZE {s}.chunks").format(s=col.info.schema_id))
    return c.collection(name)


def _segments(col: pgcite.Collection) -> int:
    with col.client.connection() as conn:
        row = conn.execute(sql.SQL(
            "SELECT count(*) FROM {s}.snapshot_segments ss JOIN {s}.active a USING"
            " (snapshot_id)").format(s=col.info.schema_id)).fetchone()
    return int(row[0]) if row else 0


def _first_searches(cols: dict[str, pgcite.Collection],
                    queries: list[str]) -> dict[str, list[float]]:
    """Each query through ``Collection.search`` on each collection, in rotated order: the
    database time a user sees right after the ingest (on each pooled connection the first five
    uses of a statement, one per snapshot, are planned before psycopg prepares it)."""
    times: dict[str, list[float]] = {label: [] for label in cols}
    for i, text in enumerate(queries):
        for label in list(cols)[i % 3:] + list(cols)[:i % 3]:
            result = cols[label].search(text, top_k=5, mode="keyword", snippets=False)
            times[label].append(float(result.timings_ms["database"]))
    return times


def _steady(cols: dict[str, pgcite.Collection], queries: list[str]) -> dict[str, list[float]]:
    """The same keyword statements prepared on one connection per collection, timed after
    WARM_UP untimed runs: the layout's cost once the plan is cached, as between ingests."""
    options = SearchOptions(mode="keyword", top_k=5)
    times: dict[str, list[float]] = {label: [] for label in cols}
    conns = {label: col.client.db.connect(autocommit=True) for label, col in cols.items()}
    try:
        statements = {label: [prepare_search(col.info, col.active_snapshot(), q,
                                             filters=Filters(), options=options,
                                             query_vector=None) for q in queries]
                      for label, col in cols.items()}
        for label, conn in conns.items():
            for statement, params in statements[label][:WARM_UP]:
                conn.execute(statement, params, prepare=True).fetchall()
        for i in range(len(queries)):
            for label in list(cols)[i % 3:] + list(cols)[:i % 3]:
                statement, params = statements[label][i]
                t0 = time.perf_counter()
                conns[label].execute(statement, params, prepare=True).fetchall()
                times[label].append((time.perf_counter() - t0) * 1000)
    finally:
        for conn in conns.values():
            conn.close()
    return times


def ingests(args: argparse.Namespace, vocab: list[str]) -> dict[str, Any]:
    """The two collections, ROUNDS ingests each, the keyword leg measured after every one."""
    rng = np.random.default_rng(SEED + 1)
    variants = {"with merges": client(), "without merges": client(merge_budget_s=0.0)}
    cols = {label: base_collection(c, f"merges_{i}", args.base, vocab)
            for i, (label, c) in enumerate(variants.items())}
    control = base_collection(variants["with merges"], "merges_control", args.base, vocab)
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            texts = synthetic_texts(args.docs, vocab, rng)
            path = Path(tmp) / f"round-{r}.jsonl"
            path.write_text("".join(json.dumps({
                "_id": f"r{r}-{i}", "date": f"{1600 + (r * args.docs + i) % 400}-01-01",
                "text": text}) + "\n" for i, text in enumerate(texts)))
            row: dict[str, Any] = {"round": r + 1}
            for label in list(cols) if r % 2 == 0 else list(cols)[::-1]:  # who goes first
                report = cols[label].ingest([path])
                merged = report.merged
                row[label] = {"ingest_s": report.seconds,
                              "merges": merged.merges if merged else 0,
                              "merge_s": merged.seconds if merged else 0.0,
                              "segments": _segments(cols[label])}
            searched = {**cols, "control": control}
            queries = random_queries(vocab, rng, args.queries)
            row["control"] = {}
            for label, values in _first_searches(searched, queries).items():
                row[label].update(first_p50_ms=pct(values, 0.5), first_p95_ms=pct(values, 0.95))
            for label, values in _steady(searched, queries).items():
                row[label].update(p50_ms=pct(values, 0.5), p95_ms=pct(values, 0.95))
            rounds.append(row)
            print(json.dumps(row), file=sys.stderr)
    plans = {label: cached_plans(col, vocab, rng, args.queries)
             for label, col in {**cols, "control": control}.items()}
    for c in variants.values():
        c.close()
    return {"base_chunks": args.base, "docs_per_ingest": args.docs, "queries": args.queries,
            "rounds": rounds, "cached_plans": plans}


def cached_plans(col: pgcite.Collection, vocab: list[str], rng: np.random.Generator,
                 n: int) -> dict[str, Any]:
    """The keyword statement with the snapshot as a literal and as a parameter, alternating,
    prepared on one connection: p50 / p95 ms (the first five of each left out) and the plans
    PostgreSQL took (generic: cached; custom: planned for that execution)."""
    snap = col.active_snapshot()
    options = SearchOptions(mode="keyword", top_k=5)
    compiled = compile_filters(Filters(), snap.metadata_fields or {}, col.info.schema_id)
    parameter = build_search_sql(
        schema=col.info.schema_id, ts_config=col.info.ts_config, model_key=snap.embed_model,
        dim=snap.embed_dim, halfvec=False, mode="keyword", filters=compiled.sql(),
        constraint=False, filtered=False, fetch=options.fetch, limit=options.top_k)
    times: dict[str, list[float]] = {"literal": [], "parameter": []}
    with col.client.db.connect() as conn:
        for i, text in enumerate(random_queries(vocab, rng, n)):
            literal, params = prepare_search(col.info, snap, text, filters=Filters(),
                                             options=options, query_vector=None)
            runs: list[tuple[str, sql.SQL | sql.Composed]] = [("literal", literal),
                                                              ("parameter", parameter)]
            for label, statement in runs if i % 2 == 0 else runs[::-1]:
                t0 = time.perf_counter()
                conn.execute(statement, params, prepare=True).fetchall()
                times[label].append((time.perf_counter() - t0) * 1000)
        prepared = conn.execute("SELECT statement, generic_plans, custom_plans"
                                " FROM pg_prepared_statements").fetchall()
        conn.rollback()
    out: dict[str, Any] = {}
    for label, values in times.items():
        # the two statements prepared here: the literal one names the snapshot's id
        generic, custom = next(((int(g), int(c)) for text, g, c in prepared
                                if (f"snapshot_id = {snap.snapshot_id}" in text)
                                == (label == "literal")), (0, 0))
        out[label] = {"p50_ms": pct(values[5:], 0.5), "p95_ms": pct(values[5:], 0.95),
                      "generic_plans": generic, "custom_plans": custom}
    return out


def _add(col: pgcite.Collection, start: int, vocab: list[str], rng: np.random.Generator, *,
         member_list: bool) -> float:
    """100 documents as a new active snapshot; the build's seconds. ``member_list``: as builds
    were made before: every member read into Python and the whole list handed to the build."""
    info, spec = col.info, col.info.embedder
    with col.client.db.transaction() as conn:
        added = insert_synthetic(conn, col, start, 100, vocab, rng, centroids(), vectors=False)
        active = col.active_snapshot().snapshot_id
        t0 = time.perf_counter()
        with placeholders_allowed(False):
            if member_list:
                live = [r[0] for r in conn.execute(sql.SQL(
                    "SELECT version_pk FROM {s}.snapshot_members WHERE snapshot_id = %s"
                ).format(s=info.schema_id), (active,))]
                plan = plan_snapshot(conn, info, live + added, spec=spec, content_id=active,
                                     replace_all=True)
            else:
                plan = plan_snapshot(conn, info, added, spec=spec, content_id=active)
            snap = build_snapshot(conn, info, plan, spec=spec, note="add 100 (benchmark)")
        seconds = time.perf_counter() - t0
        activate_snapshot(conn, info, snap)
    col.client.active_pointers().invalidate(col.name)
    return seconds


def build_cost(args: argparse.Namespace, vocab: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rng = np.random.default_rng(SEED + 2)
    with client(merge_budget_s=0.0) as c:
        for size in args.sizes:
            col = base_collection(c, f"merges_build_{size}", size, vocab)
            times: dict[str, list[float]] = {"the change (now)": [], "member list (before)": []}
            start = size
            for i in range(2 * args.repeats):
                member_list = i % 2 == 1
                times["member list (before)" if member_list else "the change (now)"].append(
                    _add(col, start, vocab, rng, member_list=member_list))
                start += 100
            out[str(size)] = {k: {"median_s": round(statistics.median(v), 3),
                                  "max_s": round(max(v), 3), "runs": len(v)}
                              for k, v in times.items()}
            # what a merge writes per second (Settings.merge_budget_s, MERGE_CHUNKS_PER_S)
            t0 = time.perf_counter()
            report = col.optimize(full=True)
            seconds = time.perf_counter() - t0
            chunks = col.active_snapshot().n_chunks or 0
            out[str(size)]["full merge"] = {
                "segments": report.segments_before, "chunks": chunks,
                "seconds": round(seconds, 2), "chunks_per_s": round(chunks / seconds)}
            print(size, json.dumps(out[str(size)]), file=sys.stderr)
            c.drop_collection(col.name)
    return out


def render(summary: dict[str, Any]) -> str:
    ing = summary["ingests"]
    lines = [f"# Keyword latency over {len(ing['rounds'])} ingests, with and without merges"
             f" (commit {summary['commit']}, {summary['date']})", "",
             f"Base: {ing['base_chunks']:,} synthetic chunks; each ingest adds"
             f" {ing['docs_per_ingest']} documents (`Collection.ingest`); after each, "
             f"{ing['queries']} random six-word keyword searches on each collection, rotated,"
             " database ms, prepared on one connection per collection after a warm-up (the"
             " layout's cost between ingests). Machine: " + summary["machine"] + ".", "",
             "| after ingest | with merges p50 / p95 | segments | without merges p50 / p95 |"
             " segments | control p50 / p95 | merges (s) |", "|---|---|---|---|---|---|---|"]
    rows = ing["rounds"]
    shown = [r for r in rows if r["round"] in (1, 2, 5) or r["round"] % 10 == 0]
    for r in shown:
        a, b, c = r["with merges"], r["without merges"], r["control"]
        lines.append(f"| {r['round']} | {a['p50_ms']} / {a['p95_ms']} | {a['segments']} |"
                     f" {b['p50_ms']} / {b['p95_ms']} | {b['segments']} |"
                     f" {c['p50_ms']} / {c['p95_ms']} | {a['merges']} ({a['merge_s']}) |")
    lines += ["", "The same searches through `Collection.search` first, right after each ingest"
              " (p50 / p95; a new snapshot's statement is planned on each pooled connection's"
              " first five uses):", "", "| after ingest | with merges | without merges |"
              " control |", "|---|---|---|---|"]
    for r in shown:
        lines.append(f"| {r['round']} | " + " | ".join(
            f"{r[k]['first_p50_ms']} / {r[k]['first_p95_ms']}"
            for k in ("with merges", "without merges", "control")) + " |")
    tenth = len(rows) // 10 or 1
    first, last = rows[:tenth], rows[-tenth:]
    for label in ("with merges", "without merges"):
        def ratio(part: list[dict[str, Any]], key: str, label: str = label) -> float:
            return float(sum(r[label][key] for r in part)
                         / sum(r["control"][key] for r in part))

        lines.append("")
        lines.append(
            f"{label}: p95 over the control's (summed over the rounds) {ratio(first, 'p95_ms'):.2f}"
            f" in the first tenth of the rounds, {ratio(last, 'p95_ms'):.2f} in the last"
            f" (p50: {ratio(first, 'p50_ms'):.2f}, {ratio(last, 'p50_ms'):.2f});"
            f" p95 {statistics.median(r[label]['p95_ms'] for r in first):.1f} ms (median)"
            f" in the first tenth, {statistics.median(r[label]['p95_ms'] for r in last):.1f}"
            f" in the last;"
            f" ingests {statistics.median(r[label]['ingest_s'] for r in rows):.2f} s median,"
            f" {max(r[label]['ingest_s'] for r in rows):.2f} s at most;"
            f" {sum(r[label]['merges'] for r in rows)} merges,"
            f" {sum(r[label]['merge_s'] for r in rows):.1f} s in all")
    lines += ["", "## Cached plans: the snapshot as a literal or a parameter (keyword statement,"
              " prepared, after the rounds)", "",
              "| collection | literal p50 / p95 | generic / custom plans | parameter p50 / p95 |"
              " generic / custom plans |", "|---|---|---|---|---|"]
    for label, v in ing["cached_plans"].items():
        a, b = v["literal"], v["parameter"]
        lines.append(f"| {label} | {a['p50_ms']} / {a['p95_ms']} | {a['generic_plans']} /"
                     f" {a['custom_plans']} | {b['p50_ms']} / {b['p95_ms']} |"
                     f" {b['generic_plans']} / {b['custom_plans']} |")
    lines += ["", "## Build cost: 100 documents added (seconds, build only)", "",
              "| collection | the change (now) median / max | member list (before) median / max |",
              "|---|---|---|"]
    for size, v in summary["build_cost"].items():
        a, b = v["the change (now)"], v["member list (before)"]
        lines.append(f"| {int(size):,} chunks | {a['median_s']} / {a['max_s']} |"
                     f" {b['median_s']} / {b['max_s']} |")
    lines += ["", "Then every segment of each collection merged into one (`optimize(full=True)`,"
              " with the statistics refresh): " + "; ".join(
                  f"{v['full merge']['chunks']:,} chunks from {v['full merge']['segments']}"
                  f" segments in {v['full merge']['seconds']} s"
                  f" ({v['full merge']['chunks_per_s']:,} chunks/s)"
                  for v in summary["build_cost"].values()) + "."]
    lines += ["", "Shared 2-core machine, other jobs running: compare the columns of one run."]
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["ingests"]["rounds"]
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    x = [r["round"] for r in rows]
    for label, style in (("with merges", "-"), ("without merges", "--"), ("control", ":")):
        ax.plot(x, [r[label]["p95_ms"] for r in rows], style, label=f"{label}, p95")
        ax.plot(x, [r[label]["p50_ms"] for r in rows], style, alpha=0.5, label=f"{label}, p50")
        if label != "control":
            bx.plot(x, [r[label]["segments"] for r in rows], style, label=label)
    ax.set_ylabel("keyword leg, ms")
    ax.legend(fontsize=8)
    bx.set_ylabel("segments")
    bx.set_xlabel("ingest")
    bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=int, default=50_000, help="chunks before the ingests")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--docs", type=int, default=20, help="documents per ingest")
    parser.add_argument("--queries", type=int, default=40, help="searches per round each")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                        default=[10_000, 100_000], help="base sizes of the build-cost runs")
    parser.add_argument("--repeats", type=int, default=5, help="builds per variant and size")
    args = parser.parse_args()
    vocab = vocabulary()
    summary: dict[str, Any] = {
        **run_stamp(),
        "ingests": ingests(args, vocab), "build_cost": build_cost(args, vocab)}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (OUT / "report.md").write_text(render(summary))
    plot(summary, OUT / "latency.png")
    print(f"wrote {OUT}/summary.json, report.md, latency.png", file=sys.stderr)


if __name__ == "__main__":
    main()
