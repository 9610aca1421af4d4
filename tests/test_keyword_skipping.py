"""The exact keyword leg's long-list skipping (pgcite/index/_query.py) returns exactly the
exhaustive top-k: randomized corpora grown in several segments with deleted chunks, filtered and
not, under several plan shapes, against the BM25 reference of tests/test_segments.py. The lists
here are short, so the test lowers the long-list size (every common word's list is long) and
prices tsvector completions at nothing (every skipped list is completed from the candidates'
tsvectors) or at more than any list (the long lists are probed for the candidates), and checks
that both ways were really taken."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import pgcite
from pgcite.index import DENSE_BLOCK, KeywordLeg, densify, with_ctes
from pgcite.index import _query as _sql
from pgcite.retrieve._filters import Filters, MetadataPredicate, compile_filters
from pgcite.retrieve._search import SearchOptions, prepare_search
from pgcite.retrieve._sql import search_statement
from pgcite.store._snapshots import SnapshotInfo
from tests.test_segments import _doc, _lexemes, _live_chunks, _queries, _write, exhaustive_bm25

FILTERS: list[Filters] = [
    Filters(),
    Filters(cutoff=dt.date(1605, 12, 31)),  # selective: a few documents
    Filters(corpora=["south"]),
    Filters(metadata=[MetadataPredicate(key="shelf", value="a")]),
    Filters(cutoff=dt.date(1640, 12, 31), corpora=["north"]),
]


def _grow(client: pgcite.Client, name: str, seed: int, tmp: Path) -> pgcite.Collection:
    """Three ingest batches (three segments), a re-ingest and a removal (deleted chunks)."""
    rng = random.Random(seed)
    col = client.create_collection(name)
    n = rng.randint(40, 70)
    cuts = sorted(rng.sample(range(1, n), 2))
    for part, (lo, hi) in enumerate(zip([0, *cuts], [*cuts, n], strict=True)):
        docs = [_doc(rng, f"d{i}", 1600 + i) for i in range(lo, hi)]
        col.ingest([_write(tmp / f"{name}-{part}.jsonl", docs)])
    changed = [_doc(rng, f"d{i}", 1600 + i) for i in rng.sample(range(n), 5)]
    col.ingest([_write(tmp / f"{name}-changed.jsonl", changed)])
    col.delete_documents([f"d{i}" for i in rng.sample(range(n), 3)])
    return col


def _passing(conn: psycopg.Connection, col: pgcite.Collection, snapshot_id: int,
             filters: Filters) -> set[str]:
    compiled = compile_filters(filters, {"shelf": ["string"]}, col.info.schema_id)
    rows = conn.execute(sql.SQL(
        "SELECT c.id FROM {s}.chunks c JOIN {s}.snapshot_members m USING (version_pk)"
        " WHERE m.snapshot_id = %(sid)s AND {f}").format(s=col.info.schema_id, f=compiled.sql()),
        {**compiled.params, "sid": snapshot_id}).fetchall()
    return {r[0] for r in rows}


def _assert_exact_top(got: dict[str, float], want: dict[str, float], k: int) -> None:
    """The top k of ``want`` (ties at the cut may go either way): same size, same scores to
    1e-6, nothing scored above the last returned one left out."""
    assert len(got) == min(k, len(want))
    for cid, score in got.items():
        assert score == pytest.approx(want[cid], rel=1e-6, abs=1e-6), cid
    if got:
        floor = min(got.values())
        assert not [c for c, s in want.items() if c not in got and s > floor + 1e-6]


# The keyword leg may be planned any way statistics and settings allow; its result may not depend
# on that (the pruned leg, removed since, once read a threshold in the order of a semi-join's
# output and gave fewer than k hits once the tables were analyzed). As the ingest leaves the
# tables, with every statistic cleared (a new collection before any analyze), analyzed, then
# analyzed with one plan shape after another taken away, so joins and scans come out in other
# orders.
PLANNER: list[tuple[str, dict[str, str]]] = [
    ("as ingested", {}),
    ("no statistics", {}),
    ("analyzed", {}),
    ("no nested loops", {"enable_nestloop": "off"}),
    ("merge joins", {"enable_nestloop": "off", "enable_hashjoin": "off"}),
    ("no hash joins", {"enable_hashjoin": "off"}),
    ("no seq scans", {"enable_seqscan": "off"}),
    ("no index scans", {"enable_indexscan": "off"}),
    ("no bitmap scans", {"enable_bitmapscan": "off"}),
]


def _set_statistics(conn: psycopg.Connection, col: pgcite.Collection, *, analyzed: bool) -> None:
    """ANALYZE every table of the collection, or clear their statistics as if newly created."""
    tables = [r[0] for r in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s", (col.info.schema_name,))]
    for table in tables:
        if analyzed:
            conn.execute(sql.SQL("ANALYZE {s}.{t}").format(s=col.info.schema_id,
                                                           t=sql.Identifier(table)))
            continue
        conn.execute("SELECT pg_clear_relation_stats(%s, %s)", (col.info.schema_name, table))
        conn.execute("SELECT pg_clear_attribute_stats(%s, %s, a.attname, false)"
                     " FROM pg_attribute a WHERE a.attrelid = %s::regclass AND a.attnum > 0"
                     " AND NOT a.attisdropped",
                     (col.info.schema_name, table, f"{col.info.schema_name}.{table}"))


def planner_regimes(client: pgcite.Client,
                    col: pgcite.Collection) -> Iterator[tuple[str, psycopg.Connection]]:
    """Each PLANNER regime in turn, with a connection planning under it: the statistics as the
    regime says (they stay so for the regimes after it), its settings on a new connection."""
    for regime, settings in PLANNER:
        if regime in ("no statistics", "analyzed"):
            with client.db.connect(autocommit=True) as conn:
                _set_statistics(conn, col, analyzed=regime == "analyzed")
        with client.db.connect(autocommit=True) as conn:
            for name, value in settings.items():
                conn.execute(sql.SQL("SET {} = {}").format(sql.Identifier(name),
                                                           sql.Literal(value)))
            yield regime, conn


# (long-list size, completion cost, best-first head) for each way of completing the
# candidates; "dense" probes too, after every other segment's lists were made dense (migration
# 0010), so that one query reads a long list from dense rows in some segments and from postings
# in the others. A filtered leg reads the best 4 of its chunks first in "probe": some filters
# pass fetch of them, others too few (then it reads them all).
REGIMES = {"tsvector": (20, 0, 1024), "probe": (20, 10**9, 4), "dense": (20, 10**9, 1024)}


def _keyword_leg(conn: psycopg.Connection, col: pgcite.Collection, query: str, top_k: int,
                 filters: Filters, snapshot: SnapshotInfo | None = None) -> dict[str, float]:
    """Every candidate of the keyword leg (its top ``fetch``, not only the top_k a search
    returns) through the search statement of ``snapshot`` (the active one): id -> score."""
    snapshot = snapshot or col.active_snapshot()
    statement, params = prepare_search(col.info, snapshot, query, filters=filters,
                                       options=SearchOptions(mode="keyword", top_k=top_k),
                                       query_vector=None, explain=True)
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        rows = cur.execute(statement, params).fetchall()
    return {r["id"]: float(r["kw_score"]) for r in rows}


def _path(conn: psycopg.Connection, col: pgcite.Collection, query: str, k: int) -> str:
    """How the unfiltered leg scored this query: "summed" (every posting), "tsvector",
    "probe" or "dense" (its long lists skipped, the candidates completed from their tsvectors,
    or by probing the long lists: their postings only, or dense rows too)."""
    options = SearchOptions(mode="keyword", top_k=k)
    leg = with_ctes(KeywordLeg(schema=col.info.schema_id, ts_config=col.info.ts_config,
                               fetch=options.fetch).ctes())
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
    segments = [r[0] for r in conn.execute(sql.SQL(
        "SELECT segment_id FROM {s}.snapshot_segments WHERE snapshot_id = %s"
        " ORDER BY segment_id").format(s=col.info.schema_id),
        (col.active_snapshot().snapshot_id,))]
    for segment_id in segments[::2]:
        densify(conn, col.info.schema_name, segment_id, min_postings=1, ratio=DENSE_BLOCK)


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
            # the constants are read when a statement is built, and searches reuse a built one
            search_statement.cache_clear()
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
        search_statement.cache_clear()
        with client.connection() as conn:
            assert _path(conn, col, "harbour lantern gunpowder", 1) == "summed"
            leg = _keyword_leg(conn, col, "harbour lantern gunpowder", 1, Filters())
        top = sorted(leg, key=lambda cid: -leg[cid])[:3]
        assert all(cid.startswith("long") for cid in top), leg
    finally:
        client.drop_collection("skipping_bounds")


def test_block_bounds_cover_every_posting(client: pgcite.Client, tmp_path: Path) -> None:
    """Each block's (max tf, min length) is taken over exactly its postings: the writer makes
    them for every list a segment writes (merges too)."""
    col = _grow(client, "skipping_blocks", 41, tmp_path)
    try:
        col.optimize(full=True)  # a merge writes new postings and their bounds
        with client.connection() as conn:
            bad = conn.execute(sql.SQL(
                "SELECT count(*) FROM {s}.segment_postings p"
                " LEFT JOIN {s}.segment_blocks b USING (segment_id, term)"
                " WHERE b.term IS NULL OR b.postings <> cardinality(p.chunk_pks)"
                " OR b.max_tfs <> ARRAY(SELECT max(tf) FROM unnest(p.tfs) WITH ORDINALITY"
                "     AS u(tf, o) GROUP BY (o - 1) / b.block_size ORDER BY (o - 1) / b.block_size)"
                " OR b.min_lengths <> ARRAY(SELECT min(len) FROM unnest(p.lengths)"
                "     WITH ORDINALITY AS u(len, o) GROUP BY (o - 1) / b.block_size"
                "     ORDER BY (o - 1) / b.block_size)").format(s=col.info.schema_id)).fetchone()
            assert bad == (0,)
            blocks = conn.execute(sql.SQL("SELECT count(*) FROM {s}.segment_blocks").format(
                s=col.info.schema_id)).fetchone()
            assert blocks is not None and blocks[0] > 0
    finally:
        client.drop_collection("skipping_blocks")


def test_a_snapshot_without_long_lists_sums_every_posting_and_checks_deletions_only_if_any(
        client: pgcite.Client, tmp_path: Path) -> None:
    """At the default long-list size no list of a small collection can be long: its statement
    has no skipping parts, and the dead-chunk check only while the snapshot deleted chunks (a
    full merge purges them). Both statements return the exhaustive top-k, filtered or not."""
    col = _grow(client, "skipping_short", 43, tmp_path)
    try:
        rng = random.Random(43)
        queries = [q for q in _queries(rng, 40) if len(q.split()) > 1][:10]
        for purged in (False, True):
            if purged:
                col.optimize(full=True)
            # read afresh: a merge keeps the snapshot, so the cached active one keeps its old
            # (still safe) counts
            snapshot = next(s for s in col.snapshots() if s.active)
            assert snapshot.segment_chunks is not None
            assert 0 < snapshot.segment_chunks < _sql.LONG_LIST
            assert (snapshot.deleted_chunks == 0) == purged, snapshot
            statement = prepare_search(col.info, snapshot, "x", filters=Filters(),
                                       options=SearchOptions(mode="keyword"),
                                       query_vector=None)[0].as_string()
            assert "kw_long" not in statement and "kw_skip" not in statement
            assert ("kw_dead" in statement) is not purged
            wrong = []
            with client.connection() as conn:
                for filters, query, want in _cases(client, col, queries):
                    for top_k in (1, 3):
                        fetch = SearchOptions(top_k=top_k).fetch
                        try:
                            _assert_exact_top(_keyword_leg(conn, col, query, top_k, filters,
                                                           snapshot), want, fetch)
                        except AssertionError as exc:
                            wrong.append(f"{filters!r} {query!r} k={fetch}: {exc}")
            assert not wrong, f"purged={purged}: {len(wrong)} wrong, e.g. {wrong[:3]}"
    finally:
        client.drop_collection("skipping_short")
