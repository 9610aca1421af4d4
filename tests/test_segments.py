"""The BM25 index as segments: a snapshot built incrementally (new segment, deleted chunks,
statistics carried over) scores every chunk as a full rebuild over the same chunks does, checked
three ways: an exhaustive BM25 in Python, the per-snapshot postings builder pgcite used before
segments (kept here as the reference), and bm25s. Merging (optimize) and gc change no score,
filters never empty the keyword leg, and an upgrade from before segments (0004) keeps old
snapshots searchable."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

import pgcite
from pgcite.index import K1 as BM25_K1
from pgcite.index import MERGE_FACTOR, SegmentInfo, _merge, merge_after_build, plan_merges
from pgcite.index import B as BM25_B
from pgcite.index import optimize as optimize_index
from pgcite.index import snapshot_segments as index_segments
from pgcite.store._migrations import latest_version

# A small Zipf-ish vocabulary of words the English analyser keeps as distinct lexemes.
WORDS = ["harbour", "lantern", "copper", "meadow", "quarrel", "sermon", "ledger", "tavern", "orchard", "cathedral", "frigate", "parliament", "bishop", "plague", "musket", "gunpowder", "carriage", "merchant", "voyage", "tailor", "chimney", "candle", "pewter", "barley", "turnip", "herring", "oyster", "vineyard", "bargain", "pamphlet", "scaffold"]
CORPORA = ("north", "south")


def _doc(rng: random.Random, doc_id: str, year: int) -> dict[str, Any]:
    n = rng.randint(4, 40)
    words = [WORDS[min(int(rng.paretovariate(0.8)) - 1, len(WORDS) - 1)] for _ in range(n)]
    return {"_id": doc_id, "text": " ".join(words), "corpus": rng.choice(CORPORA),
            "date": f"{year}-01-01", "shelf": rng.choice(["a", "b"])}


def _write(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def _queries(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.sample(WORDS, rng.randint(1, 4))) for _ in range(n)]


def snapshot_segments(conn: psycopg.Connection, info: Any, snapshot_id: int) -> list[SegmentInfo]:
    return index_segments(conn, info.schema_name, snapshot_id)


def optimize(conn: psycopg.Connection, info: Any, snapshot_id: int, *, full: bool = False) -> Any:
    return optimize_index(conn, info.name, info.schema_name, snapshot_id, full=full)


# --- references --------------------------------------------------------------------------------

def _live_chunks(conn: psycopg.Connection, col: pgcite.Collection,
                 snapshot_id: int) -> dict[str, dict[str, int]]:
    """chunk id -> lexeme -> term frequency, for every chunk of the snapshot."""
    rows = conn.execute(sql.SQL(
        "SELECT c.id, coalesce((SELECT jsonb_object_agg(t.lexeme, cardinality(t.positions))"
        " FROM unnest(c.tsv) AS t), '{{}}') FROM {s}.chunks c JOIN {s}.snapshot_members m"
        " USING (version_pk) WHERE m.snapshot_id = %s").format(s=col.info.schema_id),
        (snapshot_id,)).fetchall()
    return {cid: dict(tf) for cid, tf in rows}


def _lexemes(conn: psycopg.Connection, col: pgcite.Collection, text: str) -> list[str]:
    row = conn.execute("SELECT array_agg(lexeme) FROM unnest(to_tsvector(%s::regconfig, %s))",
                       (col.info.ts_config, text)).fetchone()
    return list(row[0] or []) if row else []


def exhaustive_bm25(chunks: dict[str, dict[str, int]], terms: list[str]) -> dict[str, float]:
    """BM25 as pgcite defines it (docs/retrieval.md): Lucene's idf ln(1 + (N - df + .5) /
    (df + .5)), tf * (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl)); N counts every chunk, avgdl
    averages over chunks with at least one lexeme."""
    n = len(chunks)
    lengths = {cid: sum(tf.values()) for cid, tf in chunks.items()}
    nonempty = [v for v in lengths.values() if v > 0]
    avgdl = sum(nonempty) / len(nonempty) if nonempty else 1.0
    scores: dict[str, float] = {}
    for term in terms:
        df = sum(1 for tf in chunks.values() if term in tf)
        if not df:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for cid, tf in chunks.items():
            if term in tf:
                f = tf[term]
                scores[cid] = scores.get(cid, 0.0) + idf * f * (BM25_K1 + 1) / (
                    f + BM25_K1 * (1 - BM25_B + BM25_B * lengths[cid] / avgdl))
    return scores


# The builder of per-snapshot postings before segments (pgcite <= 0003), verbatim but for the
# target: precomputed real weights, summed per chunk at query time.
_OLD_POSTINGS_SQL = """
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
            * tf.tf * (%(k1)s + 1)
            / (tf.tf + %(k1)s * (1 - %(b)s + %(b)s * dl.dl / stats.avgdl)))::real AS weight
    FROM tf JOIN dl USING (chunk_pk) JOIN df USING (term) CROSS JOIN stats
)
INSERT INTO {target} (snapshot_id, term, chunk_pks, weights)
SELECT %(sid)s, term,
       array_agg(chunk_pk ORDER BY weight DESC, chunk_pk),
       array_agg(weight ORDER BY weight DESC, chunk_pk)
FROM weighted GROUP BY term
"""


def old_build_scores(conn: psycopg.Connection, col: pgcite.Collection, snapshot_id: int,
                     terms: list[str]) -> dict[str, float]:
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS old_postings (snapshot_id integer,"
                 " term text, chunk_pks bigint[], weights real[])")
    conn.execute("TRUNCATE old_postings")
    conn.execute(sql.SQL(_OLD_POSTINGS_SQL).format(  # type: ignore[arg-type]
        s=col.info.schema_id, target=sql.Identifier("old_postings")),
        {"sid": snapshot_id, "k1": BM25_K1, "b": BM25_B})
    rows = conn.execute(sql.SQL(
        "SELECT c.id, sum(p.weight) FROM old_postings po, unnest(po.chunk_pks, po.weights)"
        " AS p(chunk_pk, weight) JOIN {s}.chunks c USING (chunk_pk)"
        " WHERE po.term = ANY(%s) GROUP BY c.id").format(s=col.info.schema_id),
        (terms,)).fetchall()
    return {cid: float(score) for cid, score in rows}


def bm25s_scores(chunks: dict[str, dict[str, int]], terms: list[str]) -> dict[str, float]:
    """bm25s's "lucene" variant has the same idf and saturation but leaves out the constant
    (k1 + 1) numerator factor (Lucene dropped it in 8.0): pgcite's score = (k1 + 1) x its."""
    bm25s = pytest.importorskip("bm25s")
    ids = sorted(chunks)
    corpus = [[lex for lex, tf in sorted(chunks[cid].items()) for _ in range(tf)] for cid in ids]
    vocab = {lex: i for i, lex in enumerate(sorted({t for doc in corpus for t in doc}))}
    tokens = bm25s.tokenization.Tokenized(
        ids=[[vocab[t] for t in doc] for doc in corpus], vocab=vocab)
    retriever = bm25s.BM25(method="lucene", k1=BM25_K1, b=BM25_B)
    retriever.index(tokens, show_progress=False)
    known = [t for t in terms if t in vocab]
    if not known:
        return {}
    scores = retriever.get_scores(known)
    return {cid: float(s) * (BM25_K1 + 1) for cid, s in zip(ids, scores, strict=True) if s > 0}


# --- the collection under test -----------------------------------------------------------------

@pytest.fixture(scope="module")
def grown(client: pgcite.Client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[pgcite.Collection, list[int]]]:
    """A collection grown in four snapshots: two batches, a re-ingest that changes documents of
    both, and a removal. Returns it and its snapshot ids, oldest first."""
    rng = random.Random(15)
    tmp = tmp_path_factory.mktemp("segments")
    col = client.create_collection("segments_grown")
    first = [_doc(rng, f"d{i}", 1600 + i) for i in range(30)]
    second = [_doc(rng, f"d{i}", 1600 + i) for i in range(30, 55)]
    col.ingest([_write(tmp / "a.jsonl", first)])
    col.ingest([_write(tmp / "b.jsonl", second)])
    changed = [_doc(rng, f"d{i}", 1600 + i) for i in (3, 7, 31, 40)]
    col.ingest([_write(tmp / "c.jsonl", changed)])
    col.delete_documents(["d11", "d44"])
    yield col, [s.snapshot_id for s in col.snapshots()]
    client.drop_collection("segments_grown")


def _search_scores(col: pgcite.Collection, query: str, snapshot_id: int, top_k: int = 60,
                   **filters: Any) -> dict[str, float]:
    result = col.search(query, mode="keyword", top_k=top_k, snapshot_id=snapshot_id,
                        snippets=False, filters=filters or None)
    return {h.id: float(h.keyword_score) for h in result.hits if h.keyword_score is not None}


def _assert_same_top(got: dict[str, float], want: dict[str, float], top_k: int = 60) -> None:
    """Every returned chunk scores as the reference (to 1e-6), and nothing the reference ranks
    higher than the last returned one is missing."""
    assert len(got) == min(top_k, len(want))
    for cid, score in got.items():
        assert score == pytest.approx(want[cid], rel=1e-6, abs=1e-6), cid
    if got:
        floor = min(got.values())
        missing = [cid for cid, s in want.items() if cid not in got and s > floor + 1e-6]
        assert not missing


def test_the_collection_has_several_segments_and_deletes(
        client: pgcite.Client, grown: tuple[pgcite.Collection, list[int]]) -> None:
    col, ids = grown
    assert len(ids) == 4
    with client.connection() as conn:
        segs = snapshot_segments(conn, col.info, ids[-1])
        per_snapshot = [len(snapshot_segments(conn, col.info, i)) for i in ids]
        postings = conn.execute(sql.SQL(
            "SELECT g.segment_id, g.n_chunks FROM {s}.segments g ORDER BY 1").format(
            s=col.info.schema_id)).fetchall()
    assert per_snapshot == [1, 2, 3, 3]  # the removal adds no segment, only deletes
    assert sum(g.deleted for g in segs) > 0
    # storage per extra snapshot is what changed: the third segment holds the 4 new versions
    assert postings[2][1] == 4  # one chunk per short document


# --- membership derived from segments (migration 0006) -----------------------------------------

def _members(conn: psycopg.Connection, col: pgcite.Collection, sid: int) -> list[tuple[str, str]]:
    """(document_id, content_hash) of a snapshot's members, sorted; duplicates kept."""
    return [(r[0], r[1]) for r in conn.execute(sql.SQL(
        "SELECT v.document_id, v.content_hash FROM {s}.snapshot_members m"
        " JOIN {s}.versions v USING (version_pk) WHERE m.snapshot_id = %s ORDER BY 1, 2").format(
        s=col.info.schema_id), (sid,))]


def test_membership_is_derived_and_costs_what_changed(
        client: pgcite.Client, grown: tuple[pgcite.Collection, list[int]]) -> None:
    col, ids = grown
    s = col.info.schema_id
    with client.connection() as conn:
        kind = conn.execute("SELECT relkind FROM pg_class c JOIN pg_namespace n"
                            " ON n.oid = c.relnamespace WHERE n.nspname = %s"
                            " AND c.relname = 'snapshot_members'",
                            (col.info.schema_name,)).fetchone()
        assert kind == ("v",)  # nothing stored per member
        docs = [sorted(d for d, _ in _members(conn, col, sid)) for sid in ids]
        rows = [conn.execute(sql.SQL(
            "SELECT count(*), sum(cardinality(deleted_versions)) FROM {s}.snapshot_segments"
            " WHERE snapshot_id = %s").format(s=s), (sid,)).fetchone() for sid in ids]
    assert docs[0] == sorted(f"d{i}" for i in range(30))
    assert docs[1] == docs[2] == sorted(f"d{i}" for i in range(55))
    assert docs[3] == sorted(f"d{i}" for i in range(55) if i not in (11, 44))
    # one row per segment; the re-ingest drops 4 old versions, the removal 2 more
    assert rows == [(1, 0), (2, 0), (3, 4), (3, 6)]


def test_every_snapshot_scores_as_a_full_rebuild(
        client: pgcite.Client, grown: tuple[pgcite.Collection, list[int]]) -> None:
    col, ids = grown
    rng = random.Random(7)
    with client.connection() as conn:
        for sid in ids:
            chunks = _live_chunks(conn, col, sid)
            for query in _queries(rng, 12):
                terms = _lexemes(conn, col, query)
                want = exhaustive_bm25(chunks, terms)
                old = old_build_scores(conn, col, sid, terms)
                assert old.keys() == want.keys()
                for cid, score in want.items():
                    assert old[cid] == pytest.approx(score, rel=1e-6)
                _assert_same_top(_search_scores(col, query, sid), want)


def test_scores_match_bm25s_lucene(
        client: pgcite.Client, grown: tuple[pgcite.Collection, list[int]]) -> None:
    col, ids = grown
    rng = random.Random(8)
    with client.connection() as conn:
        chunks = _live_chunks(conn, col, ids[-1])
        assert all(tf for tf in chunks.values())  # bm25s averages over every document
        for query in _queries(rng, 12):
            terms = _lexemes(conn, col, query)
            want = bm25s_scores(chunks, terms)
            assert want.keys() == exhaustive_bm25(chunks, terms).keys()
            _assert_same_top(_search_scores(col, query, ids[-1]), want)


def test_statistics_equal_a_full_count(
        client: pgcite.Client, grown: tuple[pgcite.Collection, list[int]]) -> None:
    col, ids = grown
    with client.connection() as conn:
        for sid in ids:
            chunks = _live_chunks(conn, col, sid)
            row = conn.execute(sql.SQL(
                "SELECT n_chunks, avg_length, n_documents, metadata_fields FROM {s}.snapshots"
                " WHERE snapshot_id = %s").format(s=col.info.schema_id), (sid,)).fetchone()
            assert row is not None
            lengths = [sum(tf.values()) for tf in chunks.values()]
            assert row[0] == len(chunks)
            assert row[1] == pytest.approx(sum(lengths) / len(lengths), rel=1e-12)
            want = conn.execute(sql.SQL(
                "SELECT count(DISTINCT c.document_id), (SELECT jsonb_object_agg(key, types)"
                " FROM (SELECT e.key, jsonb_agg(DISTINCT jsonb_typeof(e.value)) AS types"
                " FROM {s}.chunks c2 JOIN {s}.snapshot_members m2 USING (version_pk),"
                " jsonb_each(c2.metadata) AS e WHERE m2.snapshot_id = %(sid)s GROUP BY e.key) k)"
                " FROM {s}.chunks c JOIN {s}.snapshot_members m USING (version_pk)"
                " WHERE m.snapshot_id = %(sid)s").format(s=col.info.schema_id),
                {"sid": sid}).fetchone()
            assert want is not None and "shelf" in want[1]
            assert (row[2], row[3]) == (want[0], want[1])


def test_filters_hold_inside_the_keyword_leg_even_with_term_depth(
        grown: tuple[pgcite.Collection, list[int]]) -> None:
    """A selective cutoff keeps the leg full: the filter applies before the top-k (and before
    any term_depth cut), so the leg holds exactly the best filtered chunks."""
    col, ids = grown
    query = WORDS[0]
    everything = _search_scores(col, query, ids[-1], top_k=200)
    exact = _search_scores(col, query, ids[-1], top_k=200, cutoff="1605-12-31")
    assert exact and set(exact) < set(everything)
    for cid, score in exact.items():
        assert score == pytest.approx(everything[cid], rel=1e-9)
    shallow = col.search(query, mode="keyword", top_k=200, snapshot_id=ids[-1], snippets=False,
                         filters={"cutoff": "1605-12-31"}, options={"term_depth": 1})
    assert {h.id: h.keyword_score for h in shallow.hits} == pytest.approx(exact)
    by_corpus = _search_scores(col, query, ids[-1], top_k=3, corpora=["south"])
    assert len(by_corpus) == 3


def test_optimize_merges_without_changing_results(
        client: pgcite.Client, grown: tuple[pgcite.Collection, list[int]], tmp_path: Path) -> None:
    col, ids = grown
    rng = random.Random(9)
    queries = _queries(rng, 10)
    before = [_search_scores(col, q, ids[-1]) for q in queries]
    with client.db.transaction() as conn:
        report = optimize(conn, col.info, ids[-1], full=True)
    assert report.segments_before == 3 and report.segments_after == 1
    assert report.deleted_purged > 0
    with client.connection() as conn:
        assert [g.deleted for g in snapshot_segments(conn, col.info, ids[-1])] == [0]
        chunks = _live_chunks(conn, col, ids[-1])
        for query, old in zip(queries, before, strict=True):
            got = _search_scores(col, query, ids[-1])
            assert got == pytest.approx(old, rel=1e-9)
            _assert_same_top(got, exhaustive_bm25(chunks, _lexemes(conn, col, query)))
    # the older snapshots keep their own segments and scores
    with client.connection() as conn:
        assert len(snapshot_segments(conn, col.info, ids[1])) == 2
    # a later ingest starts from the merged snapshot
    path = tmp_path / "more.jsonl"
    col.ingest([_write(path, [_doc(rng, "d100", 1700)])])
    with client.connection() as conn:
        latest = col.active_snapshot().snapshot_id
        assert len(snapshot_segments(conn, col.info, latest)) == 2


def test_gc_frees_segments_no_snapshot_uses(
        client: pgcite.Client, grown: tuple[pgcite.Collection, list[int]]) -> None:
    import datetime as dt

    from pgcite.store._snapshots import collect_garbage

    col, _ = grown
    active = col.active_snapshot().snapshot_id
    rng = random.Random(10)
    queries = _queries(rng, 5)
    before = [_search_scores(col, q, active) for q in queries]
    with client.db.transaction() as conn:
        report = collect_garbage(conn, col.info, older_than=dt.timedelta(0), keep_retired=0)
    assert report.segments_removed > 0
    with client.connection() as conn:
        left = conn.execute(sql.SQL("SELECT count(*) FROM {s}.segments").format(
            s=col.info.schema_id)).fetchone()
        assert left is not None and left[0] == len(
            {g.segment_id for s in col.snapshots()
             for g in snapshot_segments(conn, col.info, s.snapshot_id)})
    for query, old in zip(queries, before, strict=True):
        assert _search_scores(col, query, active) == pytest.approx(old, rel=1e-9)


def test_tiered_policy_bounds_the_segment_count() -> None:
    small = [SegmentInfo(segment_id=i, chunks=5, deleted=0) for i in range(MERGE_FACTOR)]
    assert plan_merges(small) == [list(range(MERGE_FACTOR))]
    assert plan_merges(small[:-1]) == []  # one short of a full tier: left alone
    mixed = [SegmentInfo(segment_id=1, chunks=5000, deleted=0),
             SegmentInfo(segment_id=2, chunks=50, deleted=0),
             SegmentInfo(segment_id=3, chunks=40, deleted=60)]  # mostly deleted
    assert plan_merges(mixed) == [[3]]
    assert plan_merges(mixed, full=True) == [[1, 2, 3]]
    assert plan_merges(mixed[:1], full=True) == []


def _ingest_batches(col: pgcite.Collection, tmp_path: Path, rng: random.Random,
                    batches: int) -> list[pgcite.IngestReport]:
    return [col.ingest([_write(tmp_path / f"{batch}.jsonl",
                               [_doc(rng, f"m{batch}-{i}", 1650) for i in range(2)])])
            for batch in range(batches)]


def _assert_exhaustive(client: pgcite.Client, col: pgcite.Collection, queries: list[str]) -> None:
    sid = col.active_snapshot().snapshot_id
    with client.connection() as conn:
        chunks = _live_chunks(conn, col, sid)
        for query in queries:
            _assert_same_top(_search_scores(col, query, sid),
                             exhaustive_bm25(chunks, _lexemes(conn, col, query)))


def test_merges_after_builds_keep_the_segments_few(
        client: pgcite.Client, tmp_path: Path) -> None:
    """Small ingests, one segment each: the tiered merges after each build keep the active
    snapshot under MERGE_FACTOR segments (a tier's tenth segment merges it), each ingest's
    report says what they did, and every score stays the exhaustive reference's."""
    rng = random.Random(11)
    col = client.create_collection("segments_merged")
    try:
        reports = _ingest_batches(col, tmp_path, rng, 2 * MERGE_FACTOR + 1)
        merged = [r.merged for r in reports]
        assert all(m is not None and m.stopped is None for m in merged)
        assert sum(m.merges for m in merged if m) == 2
        assert [m.merges for m in merged if m][MERGE_FACTOR - 1] == 1  # the tenth segment
        with client.connection() as conn:
            sid = col.active_snapshot().snapshot_id
            assert len(snapshot_segments(conn, col.info, sid)) == 3  # two merged, one new
        _assert_exhaustive(client, col, _queries(rng, 8))
    finally:
        client.drop_collection("segments_merged")


def test_without_merges_segments_pile_up_until_optimize(
        client: pgcite.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client.settings, "merge_budget_s", 0.0)
    rng = random.Random(12)
    col = client.create_collection("segments_many")
    try:
        reports = _ingest_batches(col, tmp_path, rng, MERGE_FACTOR + 1)
        assert all(r.merged is not None and r.merged.merges == 0 for r in reports)
        active = col.active_snapshot().snapshot_id
        queries = _queries(rng, 6)
        before = [_search_scores(col, q, active) for q in queries]
        with client.db.transaction() as conn:
            report = optimize(conn, col.info, active)
        assert report.segments_before == MERGE_FACTOR + 1
        assert report.segments_after < MERGE_FACTOR
        for query, old in zip(queries, before, strict=True):
            assert _search_scores(col, query, active) == pytest.approx(old, rel=1e-9)
    finally:
        client.drop_collection("segments_many")


def test_merges_keep_to_their_budget_and_to_one_process(
        client: pgcite.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge larger than the budget allows is left for optimize (and said so); while
    another process holds the collection's merge lock none runs; a merge under way (not yet
    committed) blocks no search, which reads the segments it started with."""
    monkeypatch.setattr(client.settings, "merge_budget_s", 0.0)
    rng = random.Random(13)
    col = client.create_collection("segments_budget")
    try:
        _ingest_batches(col, tmp_path, rng, MERGE_FACTOR)
        sid = col.active_snapshot().snapshot_id
        schema = col.info.schema_name
        monkeypatch.setattr(_merge, "MERGE_CHUNKS_PER_S", 1)  # 5 s allow 5 chunks: too few
        report = merge_after_build(client.db.transaction, schema, sid, budget_s=5.0)
        assert (report.merges, report.stopped) == (0, "the next merge is larger than the budget"
                                                      " allows (pgcite collection optimize)")
        monkeypatch.setattr(_merge, "MERGE_CHUNKS_PER_S", 10_000)
        with client.db.transaction() as holder:
            assert _merge.lock_merges(holder, schema, wait=False)
            report = merge_after_build(client.db.transaction, schema, sid, budget_s=5.0)
            assert report.stopped == "another process is merging this collection"
            query = _queries(rng, 1)[0]
            before = _search_scores(col, query, sid)
            group = plan_merges(index_segments(holder, schema, sid))[0]
            _merge.merge(holder, schema, sid, group)
            with ThreadPoolExecutor(1) as pool:  # uncommitted: another connection's search
                assert pool.submit(_search_scores, col, query, sid).result(timeout=60) == before
        with client.connection() as conn:
            assert len(snapshot_segments(conn, col.info, sid)) == 1
        assert _search_scores(col, query, sid) == pytest.approx(before, rel=1e-9)
    finally:
        client.drop_collection("segments_budget")


# --- the upgrade from before segments (0004) -----------------------------------------------

_DOWNGRADE = """
DROP INDEX {s}.chunks_id_idx;  -- 0015
DROP TABLE {s}.exhibits, {s}.page_images;  -- 0014
ALTER TABLE {s}.snapshots DROP COLUMN base_id, DROP COLUMN delta_sha256;  -- 0013
DROP TABLE {s}.segment_dense;  -- 0010
DROP TABLE {s}.staged;  -- 0008
DROP TABLE {s}.segment_blocks;  -- 0007
CREATE TABLE {s}.snapshot_members_t AS SELECT snapshot_id, version_pk FROM {s}.snapshot_members;
DROP VIEW {s}.snapshot_members;  -- 0006
ALTER TABLE {s}.snapshot_members_t RENAME TO snapshot_members;
ALTER TABLE {s}.snapshot_members ADD PRIMARY KEY (snapshot_id, version_pk),
    ADD FOREIGN KEY (snapshot_id) REFERENCES {s}.snapshots ON DELETE CASCADE;
CREATE INDEX ON {s}.snapshot_members (version_pk);
DROP TABLE {s}.snapshot_deleted_df, {s}.snapshot_segments, {s}.segment_postings,
           {s}.segment_versions, {s}.segments;
DROP TABLE {s}.chunk_entities, {s}.entity_runs, {s}.entity_aliases;  -- 0005, after it
CREATE TABLE {s}.postings (
    snapshot_id integer NOT NULL REFERENCES {s}.snapshots ON DELETE CASCADE,
    term        text NOT NULL,
    chunk_pks   bigint[] NOT NULL,
    weights     real[] NOT NULL,
    PRIMARY KEY (snapshot_id, term)
);
"""


def test_migration_keeps_old_snapshots_searchable(
        client: pgcite.Client, tmp_path: Path) -> None:
    """A collection as pgcite <= 0003 left it (per-snapshot postings, one of them with a version
    the next lacks) migrates to segments with every snapshot scoring as before."""
    rng = random.Random(12)
    col = client.create_collection("segments_migrated")
    try:
        col.ingest([_write(tmp_path / "a.jsonl", [_doc(rng, f"g{i}", 1600) for i in range(12)])])
        col.ingest([_write(tmp_path / "b.jsonl", [_doc(rng, f"g{i}", 1600) for i in (1, 2)])])
        ids = [s.snapshot_id for s in col.snapshots()]
        queries = _queries(rng, 8)
        before = {(sid, q): _search_scores(col, q, sid) for sid in ids for q in queries}
        s = col.info.schema_id
        with client.db.transaction() as conn:
            conn.execute(sql.SQL(_DOWNGRADE).format(s=s))  # type: ignore[arg-type]
            for sid in ids:
                conn.execute(sql.SQL(_OLD_POSTINGS_SQL).format(  # type: ignore[arg-type]
                    s=s, target=sql.SQL("{}.postings").format(s)),
                    {"sid": sid, "k1": BM25_K1, "b": BM25_B})
            conn.execute("DELETE FROM pgcite.schema_migrations WHERE component = %s",
                         (f"collection:{col.name}",))
            for version in (1, 2, 3):
                conn.execute("INSERT INTO pgcite.schema_migrations (component, version, name)"
                             " VALUES (%s, %s, 'before segments')", (f"collection:{col.name}", version))
        steps = client.upgrade_collections([col.name])
        assert [s.version for s in steps] == list(range(4, latest_version() + 1))
        with client.connection() as conn:
            assert [len(snapshot_segments(conn, col.info, sid)) for sid in ids] == [1, 1]
            assert conn.execute("SELECT to_regclass(%s)", (f"{col.info.schema_name}.postings",)
                                ).fetchone() == (None,)
        for (sid, q), old in before.items():
            assert _search_scores(col, q, sid) == pytest.approx(old, rel=1e-6)
    finally:
        client.drop_collection("segments_migrated")


def test_random_queries_match_exhaustive_on_many_queries(
        client: pgcite.Client, grown: tuple[pgcite.Collection, list[int]]) -> None:
    col, _ = grown
    active = col.active_snapshot().snapshot_id
    rng = np.random.default_rng(13)
    with client.connection() as conn:
        chunks = _live_chunks(conn, col, active)
        for _ in range(40):
            query = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 6))))
            want = exhaustive_bm25(chunks, _lexemes(conn, col, query))
            _assert_same_top(_search_scores(col, query, active, top_k=10), want, top_k=10)


def test_a_reverted_document_is_a_member_once(client: pgcite.Client, tmp_path: Path) -> None:
    """Reverting a document brings back its old version (same content, same version_pk), which
    an older segment holds as deleted: it is live once, in the new segment, also after merges."""
    rng = random.Random(21)
    col = client.create_collection("segments_revert")
    try:
        original = [_doc(rng, f"r{i}", 1650) for i in range(6)]
        col.ingest([_write(tmp_path / "a.jsonl", original)])
        col.ingest([_write(tmp_path / "b.jsonl", [_doc(rng, "r2", 1650)])])
        col.ingest([_write(tmp_path / "c.jsonl", [original[2]])])  # back to the first text
        sid = col.active_snapshot().snapshot_id
        with client.connection() as conn:
            members = _members(conn, col, sid)
        assert [d for d, _ in members] == [f"r{i}" for i in range(6)]
        rng_q = random.Random(3)
        queries = _queries(rng_q, 6)
        before = [_search_scores(col, q, sid) for q in queries]
        with client.db.transaction() as conn:
            optimize(conn, col.info, sid, full=True)
        with client.connection() as conn:
            assert _members(conn, col, sid) == members
            assert len(snapshot_segments(conn, col.info, sid)) == 1
        for query, old in zip(queries, before, strict=True):
            assert _search_scores(col, query, sid) == pytest.approx(old, rel=1e-9)
    finally:
        client.drop_collection("segments_revert")


def test_a_segment_whose_every_version_is_replaced_leaves_the_snapshot(
        client: pgcite.Client, tmp_path: Path) -> None:
    """A re-ingest that changes every document of the first batch: the new snapshot no longer
    holds that batch's segment (a search would read its dead chunks for nothing), and scores
    as a full rebuild; the segment that still has a live version stays, with its deletions."""
    rng = random.Random(23)
    col = client.create_collection("segments_replaced")
    try:
        col.ingest([_write(tmp_path / "a.jsonl", [_doc(rng, f"d{i}", 1600) for i in range(8)])])
        col.ingest([_write(tmp_path / "b.jsonl",
                           [_doc(rng, f"d{i}", 1700) for i in range(8, 16)])])
        changed = [_doc(rng, f"d{i}", 1800) for i in (*range(8), 9)]
        col.ingest([_write(tmp_path / "c.jsonl", changed)])
        ids = [s.snapshot_id for s in col.snapshots()]
        with client.connection() as conn:
            before, after = (snapshot_segments(conn, col.info, sid) for sid in ids[1:])
            chunks = _live_chunks(conn, col, ids[-1])
            queries = _queries(rng, 10)
            lexemes = [_lexemes(conn, col, q) for q in queries]
        assert len(before) == 2 and len(after) == 2  # first batch's segment gone, one new
        assert before[0].segment_id not in {g.segment_id for g in after}
        assert [g.deleted for g in after] == [1, 0]  # d9's old chunk, in the second batch's
        assert len(chunks) == 16  # one chunk per short document, each live once
        for query, terms in zip(queries, lexemes, strict=True):
            _assert_same_top(_search_scores(col, query, ids[-1]), exhaustive_bm25(chunks, terms))
    finally:
        client.drop_collection("segments_replaced")
