"""Hybrid search against the real server: legs, fusion, filters, explain, index use."""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

import pgcite
from pgcite.retrieve import Filters, MetadataPredicate

from .conftest import DIARY as DIARY_PATH

MODES = ["keyword", "vector", "hybrid"]


def test_hits_carry_citations_and_both_legs(diary: pgcite.Collection) -> None:
    result = diary.search("Where did Pepys bury his Parmazan cheese during the fire?", top_k=3)
    # both the diary entry and his wife's account of the same day are right answers
    assert result.hits and result.hits[0].document_id in {"d-1666-09-04", "e-1666-09-05"}
    top = next(h for h in result.hits if h.document_id == "d-1666-09-04")
    assert top.citation and top.author == "Samuel Pepys" and top.corpus == "A"
    assert top.keyword_rank is not None and top.vector_rank is not None
    assert top.vector_distance is not None and 0 <= top.vector_distance <= 2
    assert [h.rank for h in result.hits] == [1, 2, 3]
    assert result.hits[0].citation
    assert result.snapshot_id == diary.active_snapshot().snapshot_id
    assert result.embedding_model == diary.info.embedder.model_key
    assert {"embed", "database", "total"} <= set(result.timings_ms)


def test_keyword_leg_finds_rare_exact_term(diary: pgcite.Collection) -> None:
    result = diary.search("Scheveling", mode="keyword", top_k=3)
    assert [h.document_id for h in result.hits] == ["d-1660-03-15"]
    assert result.hits[0].vector_rank is None


def test_quoted_phrase_is_required(diary: pgcite.Collection) -> None:
    result = diary.search('"Pudding Lane" fire', mode="hybrid", top_k=5)
    assert [h.document_id for h in result.hits] == ["d-1666-09-02"]
    excluded = diary.search("fire -cheese", mode="hybrid", top_k=10)
    assert excluded.hits and all("cheese" not in h.body.lower() for h in excluded.hits)


def test_rrf_scores_follow_the_formula(diary: pgcite.Collection) -> None:
    result = diary.search("the plague in London", top_k=5, explain=True, stages={"route": False},
                          options={"fusion": "rrf"})
    for hit in [*result.hits, *result.dropped]:
        expected = sum(1 / (60 + r) for r in (hit.keyword_rank, hit.vector_rank) if r)
        assert math.isclose(hit.score, expected, rel_tol=1e-9)
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)
    assert result.dropped  # explain shows what fusion left out
    assert all(d.rank > 5 for d in result.dropped)


def test_convex_fusion_follows_the_formula(diary: pgcite.Collection) -> None:
    # the fused score itself: without the router's entity boost, which multiplies it for a
    # query naming London
    result = diary.search("the plague in London", top_k=5, explain=True, stages={"entity_boost": 0},
                          options={"fusion": "convex", "weights": (1.0, 3.0)})
    every = [*result.hits, *result.dropped]
    kw = [h.keyword_score for h in every if h.keyword_score is not None]
    sims = [1 - h.vector_distance for h in every if h.vector_distance is not None]

    def norm(x: float | None, xs: list[float]) -> float:
        if x is None:
            return 0.0
        return 1.0 if max(xs) == min(xs) else (x - min(xs)) / (max(xs) - min(xs))

    for hit in every:
        sim = None if hit.vector_distance is None else 1 - hit.vector_distance
        expected = (1.0 * norm(hit.keyword_score, kw) + 3.0 * norm(sim, sims)) / 4.0
        assert math.isclose(hit.score, expected, rel_tol=1e-6, abs_tol=1e-9)
    with pytest.raises(pgcite.ConfigError, match="unknown fusion"):
        diary.search("x", options={"fusion": "borda"})


def test_one_leg_hits_still_count(diary: pgcite.Collection) -> None:
    # 'Medway' appears once: keyword finds it; a leg-only hit must survive the FULL OUTER JOIN
    result = diary.search("Medway", top_k=10)
    medway = [h for h in result.hits if h.document_id == "d-1667-06-12"]
    assert medway and medway[0].keyword_rank == 1


def test_corpus_ordering_groups_tiers(diary: pgcite.Collection) -> None:
    result = diary.search("cheese buried in the garden during the fire", top_k=6,
                          options={"ordering": "corpus"})
    tiers = [h.corpus or "~" for h in result.hits]
    assert tiers == sorted(tiers)


def test_cutoff_and_corpora_filters(diary: pgcite.Collection) -> None:
    cutoff = dt.date(1663, 12, 31)
    for mode in MODES:
        result = diary.search("the King at sea", mode=mode, top_k=20, filters={"cutoff": cutoff})
        assert result.hits
        assert all(h.date_end is not None and h.date_end <= cutoff for h in result.hits)
        b_only = diary.search("fire", mode=mode, top_k=20, filters={"corpora": ["B"]})
        assert b_only.hits and {h.corpus for h in b_only.hits} == {"B"}


def test_empty_result_is_normal(diary: pgcite.Collection) -> None:
    result = diary.search("fire", filters={"cutoff": dt.date(1600, 1, 1)})
    assert result.hits == []


def test_metadata_filters(diary: pgcite.Collection) -> None:
    eq = diary.search("day", top_k=20,
                      filters={"metadata": [MetadataPredicate(key="place", value="Sea")]})
    assert {h.document_id for h in eq.hits} == {"d-1660-03-15"}
    lt = diary.search("day", top_k=20, filters={
        "metadata": [MetadataPredicate(key="year", op="lt", value=1662)]})
    assert lt.hits and all(h.metadata["year"] < 1662 for h in lt.hits)
    within = diary.search("day", top_k=20, filters={"metadata": [
        MetadataPredicate(key="weather", op="in", value=["hot", "cold"])]})
    assert {h.document_id for h in within.hits} == {"d-1660-01-01", "d-1665-06-07"}
    has = diary.search("day", top_k=20, filters={
        "metadata": [MetadataPredicate(key="weather", op="exists")]})
    assert {h.document_id for h in has.hits} == {"d-1660-01-01", "d-1665-06-07"}


def test_bad_filters_are_errors_not_empty_results(diary: pgcite.Collection) -> None:
    with pytest.raises(pgcite.FilterError, match="unknown metadata field 'yeer'"):
        diary.search("x", filters={"metadata": [MetadataPredicate(key="yeer", value=1660)]})
    with pytest.raises(pgcite.FilterError, match="is a string"):
        diary.search("x", filters={"metadata": [MetadataPredicate(key="year", value="1660")]})
    with pytest.raises(pgcite.ConfigError):
        diary.search("x", mode="fuzzy")


@pytest.mark.parametrize("kwargs", [
    {"filters": {"cutoff": "yesterday"}}, {"filters": {"cutoff": "1666-13-01"}},
    {"filters": {"cutoff": "soon"}}, {"filters": {"century": 17}}, {"filters": {"corpora": "A"}},
])
def test_malformed_filters_are_filter_errors(diary: pgcite.Collection,
                                             kwargs: dict[str, object]) -> None:
    # The Python API says what is wrong, as the CLI and HTTP do, not a bare ValueError.
    with pytest.raises(pgcite.FilterError, match="bad filter") as info:
        diary.search("fire", **kwargs)  # type: ignore[arg-type]
    assert info.value.hint and "YYYY-MM-DD" in info.value.hint


def test_filter_values_are_parameters_not_sql(diary: pgcite.Collection) -> None:
    evil = "A'); DROP SCHEMA pgc_diary_fixture CASCADE; --"
    assert diary.search("fire", filters={"corpora": [evil]}).hits == []
    assert diary.search("fire").hits  # still there


def test_vector_leg_uses_the_hnsw_index(diary: pgcite.Collection) -> None:
    from pgcite.retrieve._search import SearchOptions, prepare_search

    statement, params = prepare_search(
        diary.info, diary.active_snapshot(), "fire", filters=Filters(),
        options=SearchOptions(mode="vector"), query_vector=np.ones(384, dtype=np.float32))
    with diary.client.connection() as conn, conn.transaction():
        # Pin the plan this test checks: on 15 analyzed rows a scan and a sort is the right plan
        # (by the primary key or the version index once seq scans are off), so take sorting away
        # too. Only the HNSW index can then deliver the ORDER BY, which it does only if the
        # statement's distance expression and model predicate match the partial index's.
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_sort = off")
        conn.execute("SET LOCAL enable_incremental_sort = off")
        plan = "\n".join(r[0] for r in conn.execute(
            sql.SQL("EXPLAIN (ANALYZE) {}").format(statement), params))
    assert "chunks_hnsw_" in plan, plan


def test_the_statement_sets_the_hnsw_knobs_before_the_scan_and_only_for_itself(
        diary: pgcite.Collection) -> None:
    from pgcite.retrieve._search import SearchOptions, prepare_search

    def statement(top_k: int) -> tuple[sql.Composable, dict[str, object]]:
        return prepare_search(diary.info, diary.active_snapshot(), "fire", filters=Filters(),
                              options=SearchOptions(mode="vector", top_k=top_k),
                              query_vector=np.ones(384, dtype=np.float32))

    with diary.client.connection() as conn:
        with conn.transaction():
            for pin in ("enable_seqscan", "enable_sort", "enable_incremental_sort"):
                conn.execute(f"SET LOCAL {pin} = off")  # only the HNSW scan can order (above)
            # knobs that would end the scan after one candidate, unless the statement's own
            # (ef_search 40, strict-order iterative scans) apply before its first tuple
            conn.execute("SET LOCAL hnsw.ef_search = 1")
            conn.execute("SET LOCAL hnsw.iterative_scan = off")
            query, params = statement(10)
            assert len(conn.execute(query, params).fetchall()) == 10
        query, params = statement(100)  # ef_search 300, autocommit: the statement's own
        conn.execute(query, params).fetchall()
        after = conn.execute("SELECT current_setting('hnsw.ef_search'),"
                             " current_setting('hnsw.iterative_scan')").fetchone()
        assert after == ("40", "off")  # pgvector's defaults: nothing left on the connection


def test_a_search_statement_is_rendered_once_per_shape(diary: pgcite.Collection) -> None:
    """The cached text is what composing the statement on a connection renders, and any change
    of shape (filters, mode, depth) is another statement."""
    from pgcite.retrieve._search import SearchOptions, prepare_search
    from pgcite.retrieve._sql import StatementShape, build_search_sql, search_statement

    snap = diary.active_snapshot()
    vector = np.ones(384, dtype=np.float32)

    def statement(filters: Filters, **options: object) -> sql.SQL:
        return prepare_search(diary.info, snap, "fire", filters=filters,
                              options=SearchOptions(**options), query_vector=vector)[0]

    plain = statement(Filters(), top_k=5)
    assert statement(Filters(), top_k=5) is plain  # from the cache
    others = [statement(Filters(corpora=["A"]), top_k=5), statement(Filters(), top_k=6),
              statement(Filters(), top_k=5, mode="keyword")]
    assert len({s.as_string() for s in [plain, *others]}) == 4
    shape = StatementShape(
        schema=diary.info.schema_name, ts_config=diary.info.ts_config,
        model_key=snap.embed_model, dim=snap.embed_dim, halfvec=diary.info.settings.halfvec,
        mode="hybrid", filters="true", constraint=False, filtered=False, fusion="convex",
        fetch=15, limit=5, term_depth=None, snapshot_id=snap.snapshot_id,
        longest_list=snap.segment_chunks, deletions=snap.deleted_chunks != 0)
    composed = build_search_sql(
        schema=diary.info.schema_id, ts_config=diary.info.ts_config,
        model_key=snap.embed_model, dim=snap.embed_dim, halfvec=diary.info.settings.halfvec,
        mode="hybrid", filters=sql.SQL("true"), constraint=False, filtered=False,
        fusion="convex", fetch=15, limit=5, snapshot_id=snap.snapshot_id,
        longest_list=snap.segment_chunks, deletions=snap.deleted_chunks != 0)
    with diary.client.connection() as conn:
        assert search_statement(shape).as_string(conn) == composed.as_string(conn)
    assert search_statement(shape).as_string() == plain.as_string()


def test_bm25_matches_a_reference_computation(diary: pgcite.Collection) -> None:
    """Keyword scores equal BM25 computed in Python from the same analysed lexemes."""
    k1, b = 1.2, 0.75
    snap = diary.active_snapshot()
    with diary.client.connection() as conn:
        rows = conn.execute(sql.SQL(
            "SELECT c.id, t.lexeme, cardinality(t.positions) FROM {s}.chunks c"
            " JOIN {s}.snapshot_members m USING (version_pk), unnest(c.tsv) t"
            " WHERE m.snapshot_id = %s").format(s=diary.info.schema_id), (snap.snapshot_id,)).fetchall()
        n = conn.execute(sql.SQL("SELECT count(*) FROM {s}.snapshot_members m JOIN {s}.chunks c"
                                 " USING (version_pk) WHERE m.snapshot_id = %s").format(
            s=diary.info.schema_id), (snap.snapshot_id,)).fetchone()[0]  # type: ignore[index]
        terms = [r[0] for r in conn.execute(
            "SELECT lexeme FROM unnest(to_tsvector('english', 'fire in the city garden'))")]
    tf: dict[str, dict[str, int]] = defaultdict(dict)
    for cid, lex, count in rows:
        tf[cid][lex] = count
    lengths = {cid: sum(t.values()) for cid, t in tf.items()}
    avgdl = sum(lengths.values()) / len(lengths)
    df = {t: sum(1 for c in tf.values() if t in c) for t in terms}
    expected = {}
    for cid, counts in tf.items():
        score = 0.0
        for t in terms:
            if t in counts:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                f = counts[t]
                score += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * lengths[cid] / avgdl))
        if score:
            expected[cid] = score
    got = diary.search("fire in the city garden", mode="keyword", top_k=50)
    assert {h.id: pytest.approx(expected[h.id], rel=1e-5) for h in got.hits} == {
        h.id: h.keyword_score for h in got.hits}
    assert len(got.hits) == len(expected)


# Random filters never let a row outside them through, in any mode.
_META = st.one_of(
    st.none(),
    st.builds(MetadataPredicate, key=st.just("year"), op=st.sampled_from(["lt", "lte", "gt", "gte"]),
              value=st.integers(1659, 1669)),
    st.builds(MetadataPredicate, key=st.just("place"), op=st.just("eq"),
              value=st.sampled_from(["London", "Sea", "Cambridge"])),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cutoff=st.one_of(st.none(), st.dates(dt.date(1659, 1, 1), dt.date(1669, 12, 31))),
    corpora=st.one_of(st.none(), st.lists(st.sampled_from(["A", "B", "C"]), min_size=1, unique=True)),
    meta=_META,
    mode=st.sampled_from(MODES),
    query=st.sampled_from(["fire", "the King", "cheese wine garden", "plague houses", "note"]),
)
def test_filters_hold_in_every_mode(
    diary: pgcite.Collection, cutoff: dt.date | None, corpora: list[str] | None,
    meta: MetadataPredicate | None, mode: str, query: str,
) -> None:
    vector = _QUERY_VECTORS.setdefault(query, diary.client.collection(diary.name).info and
                                       _embed(diary, query))
    result = diary.search(query, mode=mode, top_k=20, filters=Filters(
        cutoff=cutoff, corpora=corpora, metadata=[meta] if meta else []), query_vector=vector,
        explain=True)
    ops = {"lt": lambda a, b: a < b, "lte": lambda a, b: a <= b, "gt": lambda a, b: a > b,
           "gte": lambda a, b: a >= b, "eq": lambda a, b: a == b}
    for hit in [*result.hits, *result.dropped]:
        if cutoff:
            assert hit.date_end is not None and hit.date_end <= cutoff
        if corpora:
            assert hit.corpus in corpora
        if meta:
            assert meta.key in hit.metadata and ops[meta.op](hit.metadata[meta.key], meta.value)


_QUERY_VECTORS: dict[str, np.ndarray] = {}


def _embed(col: pgcite.Collection, text: str) -> np.ndarray:
    from pgcite.embed import load_embedder

    return load_embedder(col.info.embedder.id).embed_query(text)


def test_halfvec_collection_searches_through_its_index(client: pgcite.Client) -> None:
    from pgcite.store import CollectionSettings

    col = client.create_collection("halfvec_fixture", settings=CollectionSettings(halfvec=True))
    col.ingest([DIARY_PATH])
    result = col.search("buried cheese during the fire", top_k=3, mode="vector")
    assert result.hits[0].document_id in {"d-1666-09-04", "e-1666-09-05"}
    with client.connection() as conn:
        indexdef = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'pgc_halfvec_fixture'"
            " AND indexname LIKE 'chunks_hnsw_%'").fetchone()
    assert indexdef is not None and "halfvec(384)" in indexdef[0]
    assert "halfvec_cosine_ops" in indexdef[0]
    client.drop_collection("halfvec_fixture")


def test_term_depth_bounds_each_terms_postings(diary: pgcite.Collection) -> None:
    exact = diary.search("the fire in the city", mode="keyword", top_k=50)
    shallow = diary.search("the fire in the city", mode="keyword", top_k=50,
                           options={"term_depth": 1})
    # one posting per term: at most as many chunks as query terms, each its term's best
    assert 0 < len(shallow.hits) <= 2 < len(exact.hits)
    assert shallow.hits[0].id in {h.id for h in exact.hits[:3]}
    with pytest.raises(pgcite.ConfigError, match="term_depth"):
        diary.search("fire", options={"term_depth": 0})


def test_confidence_covers_every_candidate_not_only_top_k(diary: pgcite.Collection) -> None:
    # keyword-only weights put the mutton entry first; the closest passage is about the plague
    wide = diary.search("leg of mutton plague houses", top_k=20, explain=True)
    best = max(1 - h.vector_distance for h in [*wide.hits, *wide.dropped]
               if h.vector_distance is not None)
    narrow = diary.search("leg of mutton plague houses", top_k=1, options={"weights": (1.0, 0.0)})
    assert narrow.hits[0].vector_distance is None or (
        1 - narrow.hits[0].vector_distance < best - 0.02)  # the case this test is about
    assert narrow.confidence == pytest.approx(best)
    assert diary.search("cheese", mode="keyword").confidence is None


def test_ef_search_follows_the_candidates_wanted() -> None:
    from pgcite.retrieve._search import SearchOptions, planned_ef_search

    assert SearchOptions(top_k=5).hnsw_ef_search == 40  # fetch 15: the floor
    assert SearchOptions(top_k=100).hnsw_ef_search == 300  # fetch 300
    assert SearchOptions(top_k=1000).hnsw_ef_search == 1000  # capped at pgvector's maximum
    assert SearchOptions(top_k=5, ef_search=7).hnsw_ef_search == 7
    # PostgreSQL plans under pgvector's default unless a deeper one is set before the statement
    assert planned_ef_search(SearchOptions(top_k=5)) is None
    assert planned_ef_search(SearchOptions(top_k=10)) is None  # fetch 30: ef_search 40
    assert planned_ef_search(SearchOptions(top_k=100)) == "300"
    assert planned_ef_search(SearchOptions(top_k=5, ef_search=7)) == "7"
    with pytest.raises(pgcite.ConfigError, match="ef_search"):
        SearchOptions(ef_search=0)


def test_row_counts_are_literals_so_cached_plans_keep_the_limit(diary: pgcite.Collection) -> None:
    # A LIMIT parameter makes PostgreSQL's generic plan assume 10% of the rows and give up the
    # HNSW index, so every query was planned afresh; literals let a prepared plan be reused.
    from pgcite.retrieve._search import SearchOptions, prepare_search

    statement, params = prepare_search(
        diary.info, diary.active_snapshot(), "fire", filters=Filters(),
        options=SearchOptions(top_k=7, term_depth=50), query_vector=np.ones(384, dtype=np.float32))
    with diary.client.connection() as conn:
        text = statement.as_string(conn)
    assert "LIMIT 21" in text and "LIMIT 7" in text and "[1:50]" in text
    assert not {"fetch", "limit", "term_depth"} & set(params)
    # the snapshot too: with it a parameter, a collection of many snapshots and segments got a
    # custom plan every time (bench/results/merges: 15.5 against 4.6 ms p50 at 50k chunks)
    sid = diary.active_snapshot().snapshot_id
    assert f"snapshot_id = {sid}" in text and "%(snapshot_id)s" not in text


@pytest.mark.parametrize("bad", [{"top_k": 2.5}, {"fetch_multiplier": True},
                                 {"term_depth": "50"}, {"ef_search": 40.0}])
def test_row_counts_must_be_whole_numbers(bad: dict[str, object]) -> None:
    from pgcite.retrieve._search import SearchOptions

    with pytest.raises(pgcite.ConfigError, match="whole number"):
        SearchOptions(**bad)  # type: ignore[arg-type]
