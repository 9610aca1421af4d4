"""The exact keyword leg's long-list skipping (retrieve/_sql.py, _SKIPPING) returns exactly the
exhaustive top-k: randomized corpora grown in several segments with deleted chunks, filtered and
not, under several plan shapes, against the BM25 reference of tests/test_segments.py. The lists
here are short, so the test lowers the long-list size (every common word's list is long) and
prices tsvector completions at nothing (every skipped list is completed from the candidates'
tsvectors) or at more than any list (the long lists are probed for the candidates), and checks
that both ways were really taken."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import pgcite
from pgcite.retrieve import _sql
from pgcite.retrieve._filters import Filters
from pgcite.retrieve._search import SearchOptions, prepare_search
from tests.test_pruning import FILTERS, _assert_exact_top, _grow, _passing, planner_regimes
from tests.test_segments import _lexemes, _live_chunks, _queries, _write, exhaustive_bm25

# (long-list size, completion cost, best-first head) for each way of completing the
# candidates; "dense" probes too, after every other segment's lists were made dense (migration
# 0010), so that one query reads a long list from dense rows in some segments and from postings
# in the others. A filtered leg reads the best 4 of its chunks first in "probe": some filters
# pass fetch of them, others too few (then it reads them all).
REGIMES = {"tsvector": (20, 0, 1024), "probe": (20, 10**9, 4), "dense": (20, 10**9, 1024)}


def _keyword_leg(conn: psycopg.Connection, col: pgcite.Collection, query: str, top_k: int,
                 filters: Filters) -> dict[str, float]:
    """Every candidate of the keyword leg (its top ``fetch``, not only the top_k a search
    returns) through the search statement: id -> keyword score."""
    statement, params = prepare_search(col.info, col.active_snapshot(), query, filters=filters,
                                       options=SearchOptions(mode="keyword", top_k=top_k),
                                       query_vector=None, explain=True, evidence=False)
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        rows = cur.execute(statement, params).fetchall()
    return {r["id"]: float(r["kw_score"]) for r in rows}


def _path(conn: psycopg.Connection, col: pgcite.Collection, query: str, k: int) -> str:
    """How the unfiltered leg scored this query: "summed" (every posting), "tsvector",
    "probe" or "dense" (its long lists skipped, the candidates completed from their tsvectors,
    or by probing the long lists: their postings only, or dense rows too)."""
    options = SearchOptions(mode="keyword", top_k=k)
    leg = _sql.keyword_leg(schema=col.info.schema_id, ts_config=col.info.ts_config,
                           join=None, fetch=options.fetch, term_depth=None,
                           pruning=False)
    row = conn.execute(sql.SQL(
        "WITH {} SELECT skip, CASE WHEN skip THEN (SELECT tsv FROM kw_lookup) END,"
        " EXISTS (SELECT 1 FROM kw_dense) FROM kw_skip").format(leg), {
        "ranking_text": query, "snapshot_id": col.active_snapshot().snapshot_id}).fetchone()
    assert row is not None
    if not row[0]:
        return "summed"
    return "tsvector" if row[1] else "dense" if row[2] else "probe"


def _densify_every_other_segment(conn: psycopg.Connection, col: pgcite.Collection) -> None:
    """Every list of every other segment of the active snapshot made dense, however short."""
    s = col.info.schema_id
    segments = [r[0] for r in conn.execute(sql.SQL(
        "SELECT segment_id FROM {s}.snapshot_segments WHERE snapshot_id = %s"
        " ORDER BY segment_id").format(s=s), (col.active_snapshot().snapshot_id,))]
    for segment_id in segments[::2]:
        conn.execute(sql.SQL("SELECT {s}.densify(%s, 1, %s)").format(s=s),
                     (segment_id, _sql.DENSE_BLOCK))


def _cases(client: pgcite.Client, col: pgcite.Collection,
           queries: list[str]) -> list[tuple[Filters, str, dict[str, float]]]:
    """(filters, query, the BM25 reference's scores of the chunks that pass) for each pair."""
    snapshot_id = col.active_snapshot().snapshot_id
    cases = []
    with client.connection() as conn:
        chunks = _live_chunks(conn, col, snapshot_id)
        for filters in FILTERS:
            passing = _passing(conn, col, snapshot_id, filters)
            for query in queries:
                every = exhaustive_bm25(chunks, _lexemes(conn, col, query))
                cases.append((filters, query, {c: s for c, s in every.items() if c in passing}))
    return cases


@pytest.mark.parametrize("seed", [41, 42])
def test_skipping_top_k_equals_exhaustive_on_random_corpora_under_any_plan(
        client: pgcite.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        seed: int) -> None:
    col = _grow(client, f"skipping_{seed}", seed, tmp_path)
    try:
        rng = random.Random(seed * 5)
        # the longer queries hold both common (long) and rare words
        queries = [q for q in _queries(rng, 60) if len(q.split()) > 1][:20]
        cases = _cases(client, col, queries)
        taken: Counter[str] = Counter()
        wrong: list[tuple[str, str, str]] = []
        for name, (long_list, cost, head) in REGIMES.items():
            monkeypatch.setattr(_sql, "LONG_LIST", long_list)
            monkeypatch.setattr(_sql, "COMPLETION_COST", cost)
            monkeypatch.setattr(_sql, "BEST_FIRST_HEAD", head)
            if name == "dense":
                # re-ingesting the first batch brings back the versions it held (the ones
                # since changed or removed): live again in a new segment, and still deleted in
                # the first, whose dense rows must not count them a second time
                col.ingest([tmp_path / f"skipping_{seed}-0.jsonl"])
                cases = _cases(client, col, queries)
                with client.connection() as conn:
                    _densify_every_other_segment(conn, col)
            with client.connection() as conn:
                taken.update(f"{name}: {_path(conn, col, q, 3)}" for q in queries)
            for regime, conn in planner_regimes(client, col):
                for filters, query, want in cases:
                    for top_k in (1, 3):
                        fetch = SearchOptions(top_k=top_k).fetch
                        try:
                            _assert_exact_top(_keyword_leg(conn, col, query, top_k, filters),
                                              want, fetch)
                        except AssertionError as exc:
                            wrong.append((name, regime,
                                          f"{filters!r} {query!r} k={fetch}: {exc}"))
        assert not wrong, f"{len(wrong)} wrong top-k, e.g. {wrong[:3]}"
        # the bounds allowed skipping for some queries, and each regime completed them its way
        assert taken["tsvector: tsvector"] >= 3, taken
        assert taken["probe: probe"] >= 3, taken
        assert taken["dense: dense"] >= 3, taken
        assert sum(taken[f"{regime}: {path}"] for regime in REGIMES for path in REGIMES
                   if path != regime) == 0, taken
    finally:
        client.drop_collection(f"skipping_{seed}")



def test_chunks_only_long_lists_hold_still_rank_when_their_bounds_reach_theta(
        client: pgcite.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three long chunks hold the one short term once; six hold only the two long terms, often,
    and outscore them. The long lists' bounds reach theta, so the leg may not skip them: its top
    three are chunks only the long lists hold."""
    filler = "meadow quarrel sermon"
    docs = ([{"_id": f"short{i}", "text": f"gunpowder {filler} ledger tavern orchard bishop",
              "date": "1600-01-01"} for i in range(3)]
            + [{"_id": f"long{i}", "text": "harbour harbour harbour lantern lantern",
                "date": "1600-01-01"} for i in range(6)]
            + [{"_id": f"filler{i}", "text": filler, "date": "1600-01-01"} for i in range(30)])
    col = client.create_collection("skipping_bounds")
    try:
        col.ingest([_write(tmp_path / "bounds.jsonl", docs)])
        monkeypatch.setattr(_sql, "LONG_LIST", 4)
        monkeypatch.setattr(_sql, "COMPLETION_COST", 0)
        with client.connection() as conn:
            assert _path(conn, col, "harbour lantern gunpowder", 1) == "summed"
            leg = _keyword_leg(conn, col, "harbour lantern gunpowder", 1, Filters())
        top = sorted(leg, key=lambda cid: -leg[cid])[:3]
        assert all(cid.startswith("long") for cid in top), leg
    finally:
        client.drop_collection("skipping_bounds")
