"""The pruned keyword leg (migrations 0007 and 0009, keyword_top) returns exactly the exhaustive
top-k: randomized over small corpora grown in several segments with deleted chunks, many queries,
with and without filters, under several plan shapes (no statistics, analyzed, each join and scan
kind turned off in turn), against the exhaustive BM25 reference of tests/test_segments.py and
against pgcite's exhaustive statement. keyword_top is also called starting every list two
postings deep with no whole-list shortcut, so these small lists go through the rounds, bounds
and completions a large collection needs."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import pgcite
from pgcite.retrieve._filters import Filters, MetadataPredicate, compile_filters
from pgcite.retrieve._sql import inline_filter
from tests.test_segments import (
    WORDS,
    _doc,
    _lexemes,
    _live_chunks,
    _queries,
    _write,
    exhaustive_bm25,
)

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


def _keyword_top(conn: psycopg.Connection, col: pgcite.Collection, snapshot_id: int,
                 terms: list[str], k: int, filters: Filters) -> tuple[dict[str, float], int]:
    """keyword_top started shallow (2 postings a list, no whole-list shortcut): id -> score,
    and the rounds it took."""
    compiled = compile_filters(filters, {"shelf": ["string"]}, col.info.schema_id)
    text = inline_filter(compiled.sql(), compiled.params, filtered=bool(compiled.clauses),
                         constraint=None, ts_config=col.info.ts_config)
    rows = conn.execute(sql.SQL(
        "SELECT c.id, t.hit_score, t.rounds FROM {s}.keyword_top(%s, %s, %s, 0, %s, 2) t"
        " JOIN {s}.chunks c ON c.chunk_pk = t.hit_pk ORDER BY t.hit_score DESC, t.hit_pk")
        .format(s=col.info.schema_id), (snapshot_id, terms, k, text)).fetchall()
    return {r[0]: float(r[1]) for r in rows}, max((r[2] for r in rows), default=0)


def _assert_exact_top(got: dict[str, float], want: dict[str, float], k: int) -> None:
    """The top k of ``want`` (ties at the cut may go either way): same size, same scores to
    1e-6, nothing scored above the last returned one left out."""
    assert len(got) == min(k, len(want))
    for cid, score in got.items():
        assert score == pytest.approx(want[cid], rel=1e-6, abs=1e-6), cid
    if got:
        floor = min(got.values())
        assert not [c for c, s in want.items() if c not in got and s > floor + 1e-6]


# keyword_top's statements may be planned any way statistics and settings allow; its result may
# not depend on that (migration 0009: a threshold read in the order of a semi-join's output gave
# fewer than k hits once the tables were analyzed). As the ingest leaves the tables, with every
# statistic cleared (a new collection before any analyze), analyzed, then analyzed with one plan
# shape after another taken away, so joins and scans come out in other orders.
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
    regime says (they stay so for the regimes after it), its settings on a new connection
    (plpgsql keeps the plans of its static statements per connection)."""
    for regime, settings in PLANNER:
        if regime in ("no statistics", "analyzed"):
            with client.db.connect(autocommit=True) as conn:
                _set_statistics(conn, col, analyzed=regime == "analyzed")
        with client.db.connect(autocommit=True) as conn:
            for name, value in settings.items():
                conn.execute(sql.SQL("SET {} = {}").format(sql.Identifier(name),
                                                           sql.Literal(value)))
            yield regime, conn


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_pruned_top_k_equals_exhaustive_on_random_corpora_under_any_plan(
        client: pgcite.Client, tmp_path: Path, seed: int) -> None:
    col = _grow(client, f"pruning_{seed}", seed, tmp_path)
    try:
        snapshot_id = col.active_snapshot().snapshot_id
        rng = random.Random(seed * 7)
        cases: list[tuple[Filters, list[str], dict[str, float]]] = []
        with client.connection() as conn:
            chunks = _live_chunks(conn, col, snapshot_id)
            for filters in FILTERS:
                passing = _passing(conn, col, snapshot_id, filters)
                assert passing
                for query in _queries(rng, 15):
                    terms = _lexemes(conn, col, query)
                    every = exhaustive_bm25(chunks, terms)
                    cases.append((filters, terms,
                                  {c: s for c, s in every.items() if c in passing}))
        rounds: list[int] = []
        wrong: list[tuple[str, str]] = []
        for regime, conn in planner_regimes(client, col):
            for filters, terms, want in cases:
                for k in (1, 3, 10):
                    got, used = _keyword_top(conn, col, snapshot_id, terms, k, filters)
                    rounds.append(used)
                    try:
                        _assert_exact_top(got, want, k)
                    except AssertionError:
                        wrong.append((regime, f"{filters!r} {terms} k={k}: "
                                              f"{len(got)} of {min(k, len(want))}"))
        per_regime = Counter(regime for regime, _ in wrong)
        assert not wrong, (f"wrong top-k of {len(cases) * 3} per regime: {dict(per_regime)};"
                           f" e.g. {wrong[:3]}")
        assert max(rounds) >= 3  # the shallow start really went through several rounds
    finally:
        client.drop_collection(f"pruning_{seed}")


def test_search_option_pruning_matches_the_exhaustive_statement(
        client: pgcite.Client, tmp_path: Path) -> None:
    """The whole search statement with pruning on and off: the same hits and keyword scores, in
    keyword and hybrid mode, filtered (a selective cutoff too) or not."""
    col = _grow(client, "pruning_search", 31, tmp_path)
    try:
        rng = random.Random(32)
        cases: list[dict[str, Any] | None] = [
            None, {"cutoff": "1605-12-31"}, {"corpora": ["north"]},
            {"metadata": [{"key": "shelf", "value": "b"}]}]
        for filters in cases:
            for query in [*_queries(rng, 8), f'{WORDS[0]} "{WORDS[1]}"']:
                for mode in ("keyword", "hybrid"):
                    runs = [col.search(query, mode=mode, top_k=7, snippets=False,
                                       filters=filters, options={"pruning": pruning})
                            for pruning in (False, True)]
                    # a vector-only hit of the hybrid has no keyword score
                    exhaustive, pruned = ([(h.id, h.keyword_score if h.keyword_score is not None
                                            else -1.0) for h in r.hits] for r in runs)
                    assert [i for i, _ in pruned] == [i for i, _ in exhaustive]
                    assert [s for _, s in pruned] == pytest.approx(
                        [s for _, s in exhaustive], rel=1e-9)
        # a selective cutoff does not empty the pruned leg
        narrow = col.search(WORDS[0], mode="keyword", top_k=50, snippets=False,
                            filters={"cutoff": "1605-12-31"}, options={"pruning": True})
        assert narrow.hits and all(h.date_end is not None and h.date_end <= dt.date(1605, 12, 31)
                                   for h in narrow.hits)
    finally:
        client.drop_collection("pruning_search")


def test_block_bounds_cover_every_posting(client: pgcite.Client, tmp_path: Path) -> None:
    """Each block's (max tf, min length) is taken over exactly its postings: the trigger fills
    them for every list a segment writes (merges too)."""
    col = _grow(client, "pruning_blocks", 41, tmp_path)
    try:
        col.optimize(full=True)  # a merge writes new postings, through the trigger too
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
        client.drop_collection("pruning_blocks")
