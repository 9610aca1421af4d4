"""The hybrid query: BM25 keyword leg, HNSW vector leg and their fusion (convex by default, or
reciprocal rank fusion) in ONE statement.

Both legs apply the same compiled filters inside their own WHERE clause, so nothing outside the
filters can come back from either, and each leg fetches ``fetch`` candidates. The fused list keeps
every candidate of either leg (FULL OUTER JOIN); Python cuts it to top_k and keeps the rest for
``explain``.

The row counts (``fetch``, the final limit, ``term_depth``) are literals, not parameters: they are
integers this module is given, never user text, and with them in the statement PostgreSQL can
reuse a cached plan of the prepared statement (psycopg prepares it after five uses). With a
parameter instead, a generic plan assumes 10% of the rows, drops the HNSW index, and PostgreSQL
plans every query afresh; on SciFact the literals took a top-10 hybrid query from 5.1 to 3.9 ms
(same rows, measured interleaved).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from psycopg import sql

from pgcite._types import DEFAULT_FUSION, Fusion, Mode
from pgcite.store._collections import vector_expression, vector_type

# The query's lexemes, the snapshot's statistics and each lexeme's idf: the start of both exact
# legs (summed and pruned) and what the evidence reads.
_KEYWORD_TERMS = """
kw_terms AS (
    SELECT coalesce(array_agg(lexeme), '{{}}') AS terms
    FROM unnest(to_tsvector({cfg}::regconfig, %(ranking_text)s))
), kw_stats AS (
    -- BM25's length norm k1 * (1 - b + b * len / avgdl) as base + slope * len (see _WEIGHT)
    SELECT n, k1, k1 * (1 - b) AS base, k1 * b / avgdl AS slope
    FROM (SELECT coalesce(n_chunks, 0)::float8 AS n, coalesce(avg_length, 1) AS avgdl,
                 bm25_k1::float8 AS k1, bm25_b::float8 AS b
          FROM {s}.snapshots WHERE snapshot_id = %(snapshot_id)s) s
), kw_idf AS MATERIALIZED (
    -- the BM25 idf of each query lexeme the snapshot holds, computed once per lexeme (inlined,
    -- it was evaluated per posting, in numeric: 15 of 18 ms of a 100k-chunk query), and the
    -- factor of its postings' weights, idf * (k1 + 1)
    SELECT q.term, q.idf, q.idf * (q.k1 + 1) AS wt, q.postings
    FROM (SELECT t.term, ln(1 + (st.n - t.df + 0.5) / (t.df + 0.5)) AS idf, st.k1, t.postings
          FROM (SELECT b.term, sum(b.postings) AS postings,
                       (sum(b.postings) - coalesce(max(d.df), 0))::float8 AS df
                FROM {s}.snapshot_segments ss JOIN {s}.segment_blocks b USING (segment_id)
                CROSS JOIN kw_terms
                LEFT JOIN {s}.snapshot_deleted_df d
                  ON d.snapshot_id = %(snapshot_id)s AND d.term = b.term
                WHERE ss.snapshot_id = %(snapshot_id)s AND b.term = ANY(kw_terms.terms)
                GROUP BY b.term) t CROSS JOIN kw_stats st
          WHERE t.df > 0) q
)"""
# BM25 over the snapshot's segments (docs/retrieval.md): each segment's postings carry raw term
# frequencies and chunk lengths, the snapshot its statistics (N, average length; a term's df is
# its postings' lengths over the segments minus its df among the snapshot's deleted chunks), so a
# chunk scores exactly as in an index built for that snapshot alone. The query is analysed by the
# same to_tsvector configuration as the documents. Chunks a snapshot deleted from a segment are
# dropped before the sum (a hashed anti-join), and filters apply before the LIMIT: the leg is
# never under-filled.
#
# Two measured choices (bench/scale.py at 1M chunks, docs/retrieval.md "Large collections"): a
# list's length (its df in the segment) is read from segment_blocks, not as the cardinality of its
# postings array, which detoasted every array once more only to count it (3.4 of 336 ms of a
# 390k-posting query); and the postings are unnested in a select list (a ProjectSet node, which
# streams them) rather than in FROM (a function scan, which first copies every posting into a
# tuplestore that spills to disk past work_mem).
_KEYWORD = _KEYWORD_TERMS + """, kw_postings AS MATERIALIZED (
    SELECT ss.segment_id, cardinality(ss.deleted) > 0 AS dead, p.term, p.chunk_pks, p.tfs,
           p.lengths, EXISTS (SELECT 1 FROM {s}.segment_dense d
                              WHERE d.segment_id = p.segment_id AND d.term = p.term) AS dense
    FROM {s}.snapshot_segments ss JOIN {s}.segment_postings p USING (segment_id)
    CROSS JOIN kw_terms
    WHERE ss.snapshot_id = %(snapshot_id)s AND p.term = ANY(kw_terms.terms)
), kw_dead AS (
    SELECT ss.segment_id, d.chunk_pk
    FROM {s}.snapshot_segments ss, unnest(ss.deleted) AS d(chunk_pk)
    WHERE ss.snapshot_id = %(snapshot_id)s
), {scored}, kw_top AS (
    SELECT k.chunk_pk, k.score::float8 AS score
    FROM {ranked} k {join}
    ORDER BY k.score DESC, k.chunk_pk
    LIMIT {fetch}
), kw AS (
    -- ranked after the LIMIT, so the sort above can be a top-N heapsort
    SELECT *, row_number() OVER (ORDER BY score DESC, chunk_pk) AS rank,
           {norm_score} AS norm
    FROM kw_top
)"""  # noqa: S608 (this module's constant fragments; values are parameters)
# Answerability signals (pgcite.retrieve._answerability) of the keyword leg: the share of the
# query's idf mass that the snapshot holds at all, the share its best keyword hit holds, and
# how many of the query's names (capitalised words, given as %(names_text)s) the snapshot has
# never seen, and how many distinct lexemes the query has (the scale the coverage shares are on).
# df and N are the snapshot's (kw_idf, kw_stats above).
_EVIDENCE = """
kw_mass AS (
    -- all the query's idf mass: a lexeme the snapshot lacks counts with df = 0
    SELECT (SELECT coalesce(sum(idf), 0) FROM kw_idf)
           + (cardinality(t.terms) - (SELECT count(*) FROM kw_idf)) * ln(1 + (st.n + 0.5) / 0.5)
           AS total
    FROM kw_terms t CROSS JOIN kw_stats st
), evidence AS (
    SELECT (SELECT coalesce(sum(idf), 0) FROM kw_idf) / nullif(m.total, 0) AS coverage,
           (SELECT coalesce(sum(i.idf), 0) FROM kw_idf i, {s}.chunks c
            WHERE c.chunk_pk = (SELECT chunk_pk FROM kw WHERE rank = 1)
              AND i.term = ANY(tsvector_to_array(c.tsv))) / nullif(m.total, 0) AS best_coverage,
           -- a name is unknown when the snapshot's segments hold it in no live chunk
           (SELECT count(*) FROM unnest(to_tsvector({cfg}::regconfig, %(names_text)s)) n
            WHERE coalesce((SELECT sum(cardinality(p.chunk_pks))
                            FROM {s}.snapshot_segments ss
                            JOIN {s}.segment_postings p USING (segment_id)
                            WHERE ss.snapshot_id = %(snapshot_id)s AND p.term = n.lexeme), 0)
                  <= coalesce((SELECT d.df FROM {s}.snapshot_deleted_df d
                               WHERE d.snapshot_id = %(snapshot_id)s
                                 AND d.term = n.lexeme), 0)) AS unknown_names,
           (SELECT cardinality(terms) FROM kw_terms) AS query_terms
    FROM kw_mass m
)"""
# Exact BM25 unnests whole arrays; slicing them (even to their full length) copies each one
# first, which made the keyword leg ~25% slower on SciFact (measured), so the slice is only
# there when term_depth bounds it (each segment's postings are impact-ordered by its own
# statistics, so the slice is their best N). A filtered leg is always exact: a prefix cut before
# the filters could leave it empty.
# (Set-returning functions in one select list advance in lockstep; a segment's three arrays have
# the same length, so each row is one posting.)
_ALL_POSTINGS = ("unnest(p.chunk_pks) AS chunk_pk, unnest(p.tfs) AS tf,"
                 " unnest(p.lengths) AS len")
_TOP_POSTINGS = ("unnest(p.chunk_pks[1:{term_depth}]) AS chunk_pk,"
                 " unnest(p.tfs[1:{term_depth}]) AS tf, unnest(p.lengths[1:{term_depth}]) AS len")
# BM25's weight of one posting: wt (its term's idf * (k1 + 1)), term frequency, chunk length
# (SQL expressions). Its constants are folded per query (kw_stats) and per term (kw_idf): the
# textbook form evaluates 13 operators a posting, this one 8, and a summed query's time is its
# postings'. Every path (summed, completed, probed, bounded) computes a weight this one way.
_WEIGHT = "{wt} * {tf} / ({tf} + st.base + st.slope * {len})"

# One row per live posting of the query's lists (those {lists}, a WHERE clause or nothing,
# keeps): its chunk, the chunk's length and the posting's weight; {gate} is a condition without
# columns (the planner runs it once, before any posting is read). Only a segment the snapshot
# deleted chunks from looks its postings up in kw_dead (a hashed subplan), and the statistics
# are scalar subqueries (initplans, run once) rather than a join per posting with their one row:
# together 7% of a 1M-chunk query (bench/scale.py interleaved: p50 9.9 -> 9.3 ms).
# Whether the posting (or dense byte) of chunk_pk in segment_id of row {r} counts: its segment
# deleted no chunk (dead is false), or not this one.
_ALIVE = ("(NOT {r}.dead OR NOT EXISTS (SELECT 1 FROM kw_dead d"
          " WHERE d.segment_id = {r}.segment_id AND d.chunk_pk = {r}.chunk_pk))")
_LIVE = """SELECT u.chunk_pk, u.len, {weight} AS w
        FROM (SELECT p.segment_id, p.dead, i.wt, {{postings}}
              FROM kw_postings p JOIN kw_idf i USING (term){lists}) u
        WHERE {gate}""" + _ALIVE.format(r="u")  # noqa: S608


def _initplan_weight(wt: str, tf: str, length: str) -> str:
    """_WEIGHT with the statistics read by scalar subqueries (initplans) instead of a join."""
    return re.sub(r"st\.(\w+)", r"(SELECT \1 FROM kw_stats)",
                  _WEIGHT.format(wt=wt, tf=tf, len=length))


_POSTING_WEIGHT = _initplan_weight("u.wt", "u.tf", "u.len")


_GROUPED = """SELECT x.chunk_pk,{length} sum(x.w) AS score
    FROM ({live}) x
    GROUP BY x.chunk_pk"""  # noqa: S608


def _summed_postings(lists: str = "", gate: str = "", *, length: bool = False) -> str:
    """Those postings summed per chunk (chunk_pk, score), and with ``length`` each chunk's
    length (a second aggregate a posting: only partial sums that may be completed need it)."""
    return _GROUPED.format(live=_LIVE.format(weight=_POSTING_WEIGHT, lists=lists, gate=gate),
                           length=" max(x.len) AS len," if length else "")


# Each list's first term_depth postings, summed (the approximate leg).
_SUMMED = "kw_scored AS (\n    " + _summed_postings() + "\n)"
# The exact sum without reading the query's long lists where they cannot matter (MaxScore's
# skipping, for whole lists). On 1M chunks a query's time is its postings': ~0.06 us each to read,
# ~0.15 us more to sum per chunk (a hash aggregate), and the slowest 5-10% of six-word queries
# hold one list of 100k-390k postings, of a term so common that one posting of it weighs little.
# The lists of at least {long_list} postings are "long"; the others are summed first (kw_short),
# and theta, the fetch-th best of those partial scores among chunks that pass the filters, is a
# lower bound of the fetch-th best full score (weights are positive). A chunk that only long lists
# hold scores at most the sum of their bounds (each term's idf times its best block bound:
# segment_blocks' (max tf, min length) pairs bound every posting under any statistics, migration
# 0007). When that sum is below theta, no such chunk can enter the top fetch, so only the
# candidates (short-list chunks whose partial score plus that sum reaches theta) need the long
# terms' weights, and every score that can reach the top is the full one. They get them one of
# two ways, whichever costs less (kw_lookup): from each candidate's own tsvector (the source of
# the postings' term frequencies; its length is the one its postings carry), or by probing the
# long lists for them: postings against a hash of the candidates (read whole, only the few that
# match summed), and where a segment holds a list densely (migration 0010), its dense rows, one
# get_byte a candidate (at 1M a query's p95 went from 52 to 26 ms with the postings probe against
# tsvectors alone, which cost ~15 us a candidate and priced out most skips, and to 21 ms with the
# dense rows besides). A candidate the probes do not find keeps its partial score, so of those
# only the fetch best (kw_head, whose last score is theta) can reach the top: the probed sum adds
# up those and the candidates found, not every candidate (hybrid p95 at 1M 24.0 -> 22.0 ms,
# where 30k candidates had been hashed once more and sorted). Otherwise (theta too low, or
# fewer than fetch chunks) the long lists' postings are added to the short sums. With no long
# list it is _SUMMED, and theta is never computed: initplans run when first read, and AND reads
# its second operand only when the first is true.
_SKIPPING = """kw_long AS MATERIALIZED (
    -- each long list's bound, how many of its postings are sparse (in segments where the list
    -- has no dense rows), and how many dense rows it has
    SELECT b.term, i.wt, i.postings, i.idf * max(m.bound) AS ub,
           coalesce(sum(b.postings) FILTER (WHERE NOT p.dense), 0) AS sparse,
           sum(r.blocks) AS dense
    FROM {{s}}.snapshot_segments ss JOIN {{s}}.segment_blocks b USING (segment_id)
    JOIN kw_idf i USING (term) JOIN kw_postings p USING (segment_id, term)
    CROSS JOIN kw_stats st,
         LATERAL (SELECT max({block}) FROM unnest(b.max_tfs, b.min_lengths) AS x(mt, ml)) m(bound),
         LATERAL (SELECT count(*) AS blocks FROM {{s}}.segment_dense d
                  WHERE p.dense AND d.segment_id = p.segment_id AND d.term = p.term) r
    WHERE ss.snapshot_id = %(snapshot_id)s AND i.postings >= {{long_list}}
    GROUP BY b.term, i.idf, i.wt, i.postings
), kw_short AS MATERIALIZED (
    {short}
), kw_head AS MATERIALIZED (
    -- the fetch best partial scores of chunks that pass the filters; theta is the last
    SELECT k.chunk_pk, k.score FROM {{ranked_short}} k {{join}}
    ORDER BY k.score DESC, k.chunk_pk LIMIT {{fetch}}
), kw_bound AS (
    SELECT (SELECT sum(ub) FROM kw_long) AS rest,
           (SELECT min(score) FROM kw_head HAVING count(*) >= {{fetch}}) AS theta
), kw_skip AS MATERIALIZED (
    -- (a relative margin: the bounds and the scores are summed in other orders)
    SELECT l.present, l.present
           AND coalesce((SELECT bd.rest * (1 + 1e-9) < bd.theta FROM kw_bound bd), false) AS skip
    FROM (SELECT EXISTS (SELECT 1 FROM kw_long) AS present) l
), kw_cand AS MATERIALIZED (
    SELECT k.chunk_pk, k.len, k.score FROM kw_short k CROSS JOIN kw_bound bd
    WHERE k.score + bd.rest >= bd.theta * (1 - 1e-9)
), kw_dense AS MATERIALIZED (
    -- the long lists' dense rows, read whole (one hash join with the candidates: looked up
    -- one candidate at a time through the index, 30k candidates took 34 ms at 1M)
    SELECT d.segment_id, d.block, d.tfs, l.wt, p.dead
    FROM kw_long l JOIN kw_postings p USING (term)
    JOIN {{s}}.segment_dense d ON d.segment_id = p.segment_id AND d.term = p.term
    WHERE p.dense
), kw_lookup AS MATERIALIZED (
    -- complete the candidates from their tsvectors where that costs less than probing the
    -- long lists for them (their sparse postings and their dense rows, read whole)
    SELECT (SELECT count(*) FROM kw_cand) * {{completion_cost}}
           < (SELECT sum(sparse) * {{probe_cost}} + sum(dense) * {{dense_cost}} FROM kw_long)
           AS tsv
), kw_scored AS (
    SELECT k.chunk_pk, k.score + coalesce((
               SELECT sum({completion})
               FROM (SELECT t.lexeme, cardinality(t.positions) AS tf FROM unnest(c.tsv) AS t) x
               JOIN kw_long l ON l.term = x.lexeme), 0) AS score
    FROM kw_cand k JOIN {{s}}.chunks c USING (chunk_pk) CROSS JOIN kw_stats st
    WHERE (SELECT skip FROM kw_skip) AND (SELECT tsv FROM kw_lookup)
    UNION ALL
    -- a candidate keeps its partial score where no long list holds it, so only the best
    -- partial scores (kw_head) and the candidates the probes find can reach the top
    SELECT u.chunk_pk, max(u.partial) + sum(u.w) FROM (
        SELECT chunk_pk, score AS partial, 0::float8 AS w FROM kw_head
        UNION ALL
        SELECT v.chunk_pk, c.score, v.w FROM ({sparse}) v JOIN kw_cand c USING (chunk_pk)
        UNION ALL
        SELECT x.chunk_pk, x.score, {dense_weight} FROM (
            SELECT c.chunk_pk, c.len, c.score, d.wt, d.segment_id, d.dead,
                   get_byte(d.tfs, mod(c.chunk_pk, {{dense_block}})::integer) AS tf
            FROM kw_dense d JOIN kw_cand c ON c.chunk_pk / {{dense_block}} = d.block) x
        WHERE x.tf > 0 AND {alive}) u
    WHERE (SELECT skip FROM kw_skip) AND NOT (SELECT tsv FROM kw_lookup)
    GROUP BY u.chunk_pk
    UNION ALL
    SELECT x.chunk_pk, sum(x.score) FROM (
        SELECT chunk_pk, len, score FROM kw_short
        UNION ALL
        {long}) x
    WHERE (SELECT present AND NOT skip FROM kw_skip)
    GROUP BY x.chunk_pk
    UNION ALL
    {every}
)""".format(  # noqa: S608
    block=_WEIGHT.format(wt="(st.k1 + 1)", tf="x.mt", len="x.ml"),
    completion=_WEIGHT.format(wt="l.wt", tf="x.tf", len="k.len"),
    short=_summed_postings(lists=" WHERE i.postings < {long_list}", length=True),
    long=_LIVE.format(weight=_POSTING_WEIGHT, lists=" WHERE i.postings >= {long_list}", gate=""),
    sparse=_LIVE.format(weight=_POSTING_WEIGHT, gate="",
                        lists=" WHERE i.postings >= {long_list} AND NOT p.dense"),
    dense_weight=_initplan_weight("x.wt", "x.tf", "x.len"), alive=_ALIVE.format(r="x"),
    every=_summed_postings(gate="NOT (SELECT present FROM kw_skip) AND "))
# Lists of at least this many postings (over a snapshot's segments) are "long" for _SKIPPING:
# skipping a shorter one saves less than the theta it needs costs. Read when a statement is built
# (tests lower it).
LONG_LIST = 32768
# What completing one candidate from its tsvector costs, in postings summed (~15 us against
# ~0.3 us at 1M), and what probing one long posting for the candidates costs in the same unit:
# kw_lookup completes from tsvectors only where that is cheaper. Measured at 1M, interleaved:
# probe_cost 0.3 gave p95 26.4 ms, 0.1 27.4, 1 26.7, always probing 28.6.
COMPLETION_COST = 100
PROBE_COST = 0.3
# The chunk_pks of one row of segment_dense (migration 0010), and what reading one such row
# costs in postings summed (a 1M-chunk list's 250 rows, 1 MB, took ~0.3 ms).
DENSE_BLOCK = 4000
DENSE_COST = 4
# The pruned exact leg (migrations 0007 and 0009, keyword_top): the same top-k and scores as _KEYWORD's
# exhaustive sum, reading only prefixes of the impact-ordered postings. It applies the filters
# itself (as %(kw_filter)s, SQL text with its values inlined, see inline_filter) to its threshold
# and its top-k, so a filtered leg is exact and full too.
_KEYWORD_PRUNED = _KEYWORD_TERMS + """, kw_top AS (
    SELECT t.hit_pk AS chunk_pk, t.hit_score AS score
    FROM kw_terms,
         {s}.keyword_top(%(snapshot_id)s, kw_terms.terms, {fetch}, {exhaustive}, %(kw_filter)s) t
), kw AS (
    SELECT *, row_number() OVER (ORDER BY score DESC, chunk_pk) AS rank,
           {norm_score} AS norm
    FROM kw_top
)"""  # noqa: S608
# Whether the exact keyword leg prunes by default (SearchOptions.pruning); decided by
# bench/segments_keyword.py (docs/retrieval.md, "Pruned keyword leg").
DEFAULT_PRUNING = False
# keyword_top reads lists whose lengths sum to at most this whole, in one round: below it,
# bounds and completion cost more than the postings they would skip.
PRUNING_EXHAUSTIVE_BELOW = 4096

# Filters need the chunk row; without them, the postings alone rank (half the work).
_KEYWORD_JOIN = "JOIN {s}.chunks c USING (chunk_pk) WHERE {filters} {constraint}"
# What a filtered leg reads its top from: the scored chunks best first, so that a nested loop
# looks up chunk rows only until enough pass (at 1M chunks a hash join read the row of every
# scored chunk: 0.2 s p50, 1.1 s p95 under a corpus filter). The outer ORDER BY stays: a join
# may return rows in another order (migration 0009), and then the result is still exact.
# Only the best {head} are sorted (a top-N heapsort) when {fetch} of them pass the filters, as
# then the first {fetch} that pass are among them; otherwise all are (LIMIT NULL). Sorting all
# of them was most of a slow filtered query at 1M: 66k scored chunks.
_BEST_FIRST = """(SELECT * FROM {cte} ORDER BY score DESC, chunk_pk
    LIMIT CASE WHEN (SELECT count(*) FROM (
                         SELECT 1 FROM (SELECT chunk_pk FROM {cte}
                                        ORDER BY score DESC, chunk_pk LIMIT {head}) k
                         {{join}} LIMIT {fetch}) z) >= {fetch} THEN {head} END)"""
# The head _BEST_FIRST tries first: a filter one chunk in 64 passes still fills a fetch of 15
# from it. Measured at 1M (keyword leg, 60 queries, interleaved; p95 ms, all rows sorted / 256 /
# 1024 / 4096): a third of the chunks 34.7 / 28.4 / 29.6 / 35.9, a quarter 35.2 / 28.9 / 30.9 /
# 36.1, a 40th 48.0 / 57.1 / 42.9 / 51.4.
BEST_FIRST_HEAD = 1024

# HNSW: the ORDER BY expression is exactly the partial index's expression, and the model
# predicate matches the index predicate (as a literal, so every plan can use the index).
_VECTOR = """
vec_near AS (
    SELECT c.chunk_pk, {expr} <=> %(query_vector)s::{vtype}({dim}) AS distance
    FROM {s}.chunks c
    WHERE c.embed_model = {model}
      AND c.version_pk IN (SELECT version_pk FROM {s}.snapshot_members
                           WHERE snapshot_id = %(snapshot_id)s)
      AND {filters} {constraint}
    ORDER BY {expr} <=> %(query_vector)s::{vtype}({dim})
    LIMIT {fetch}
), vec AS (
    SELECT chunk_pk, distance, row_number() OVER (ORDER BY distance, chunk_pk) AS rank,
           {norm_similarity} AS norm
    FROM vec_near
)"""

# Min-max normalisation over a leg's own candidates (1 when they all score the same): the
# convex fusion compares legs on this common 0..1 scale.
_NORM = ("coalesce(({x} - min({x}) OVER ()) / nullif(max({x}) OVER () - min({x}) OVER (), 0),"
         " 1.0)")

_EMPTY_KW = ("kw AS (SELECT NULL::bigint AS chunk_pk, NULL::float8 AS score, NULL::bigint AS rank,"
             " NULL::float8 AS norm WHERE false)")
_EMPTY_EVIDENCE = ("evidence AS (SELECT NULL::float8 AS coverage,"
                   " NULL::float8 AS best_coverage, NULL::bigint AS unknown_names,"
                   " NULL::integer AS query_terms)")
_EMPTY_VEC = ("vec AS (SELECT NULL::bigint AS chunk_pk, NULL::float8 AS distance,"
              " NULL::bigint AS rank, NULL::float8 AS norm WHERE false)")

# Reciprocal rank fusion: rank-only, robust to the legs' score scales.
_RRF = ("coalesce(%(w_keyword)s / (%(rrf_k)s + k.rank), 0)"
        " + coalesce(%(w_vector)s / (%(rrf_k)s + v.rank), 0)")
# Convex combination of min-max normalised scores, weights scaled to sum to 1.
_CONVEX = ("(%(w_keyword)s * coalesce(k.norm, 0) + %(w_vector)s * coalesce(v.norm, 0))"
           " / (%(w_keyword)s + %(w_vector)s)")

_FUSE = """
SELECT coalesce(k.chunk_pk, v.chunk_pk) AS chunk_pk,
       {fusion} AS fused,
       k.rank AS kw_rank, k.score AS kw_score, v.rank AS vec_rank, v.distance,
       -- over every candidate, before the LIMIT: abstention must not depend on top_k
       1 - min(v.distance) OVER () AS best_similarity,
       {evidence}
       c.id, c.document_id, c.citation, c.author, c.corpus, c.date_start, c.date_end,
       c.source, c.locator, c.title, c.body, c.metadata
FROM kw k FULL OUTER JOIN vec v ON v.chunk_pk = k.chunk_pk
JOIN {s}.chunks c ON c.chunk_pk = coalesce(k.chunk_pk, v.chunk_pk)
CROSS JOIN evidence e
ORDER BY fused DESC, coalesce(v.rank, 1e9), coalesce(k.rank, 1e9), c.chunk_pk
LIMIT {limit}
"""
_FUSION_SQL: dict[Fusion, str] = {"rrf": _RRF, "convex": _CONVEX}
# How far the best cosine stands above the EVIDENCE_DEPTH-th best, and how many of the legs'
# top EVIDENCE_DEPTH both legs found (answerability signals), over every candidate.
_EVIDENCE_COLUMNS = """
       max(v.distance) FILTER (WHERE v.rank <= {depth}) OVER () - min(v.distance) OVER ()
           AS similarity_gap,
       count(*) FILTER (WHERE k.rank <= {depth} AND v.rank <= {depth}) OVER () AS leg_overlap,
       e.coverage, e.best_coverage, e.unknown_names, e.query_terms,"""
_NO_EVIDENCE_COLUMNS = ("NULL::float8 AS similarity_gap, NULL::bigint AS leg_overlap,"
                        " e.coverage, e.best_coverage, e.unknown_names, e.query_terms,")
# The ranks the gap and overlap signals look at: fixed, so that they do not move with top_k
# (each leg fetches at least 3 x top_k candidates, so from top_k = 2 on all five are there).
EVIDENCE_DEPTH = 5


def build_search_sql(
    *,
    schema: sql.Identifier,
    ts_config: str,
    model_key: str,
    dim: int,
    halfvec: bool,
    mode: Mode,
    filters: sql.Composable,
    constraint: bool,
    filtered: bool = True,
    fusion: Fusion = DEFAULT_FUSION,
    fetch: int,
    limit: int | None,
    term_depth: int | None = None,
    pruning: bool = False,
    evidence: bool = True,
) -> sql.Composed:
    """The statement for one search; values are left as named placeholders.

    ``filtered=False`` promises that ``filters`` is trivially true, so the keyword leg may skip
    joining the chunk rows. ``fetch`` candidates per leg, ``limit`` fused rows (None: all);
    ``term_depth`` counts only each term's N best postings per segment (None: exact BM25), and
    only in an unfiltered leg (a filtered one is always exact). ``pruning``: the exact leg scores
    by keyword_top (same top-k, fewer postings read), filtered or not; it needs the parameter
    ``kw_filter`` (:func:`inline_filter`). term_depth, where it applies, wins over it.
    ``evidence=False`` leaves the answerability signals out (NULL), to measure their cost.
    """
    counts = {name: sql.Literal(_count(name, value))
              for name, value in (("fetch", fetch), ("limit", limit), ("term_depth", term_depth))}
    constraint_sql = sql.SQL(
        "AND c.tsv @@ websearch_to_tsquery({cfg}::regconfig, %(constraint)s)" if constraint else ""
    ).format(cfg=sql.Literal(ts_config))
    vtype = vector_type(dim, halfvec)
    ctes: list[sql.Composable] = []
    if mode in ("keyword", "hybrid"):
        join: sql.Composable | None = None
        if filtered or constraint:
            join = sql.SQL(_KEYWORD_JOIN).format(s=schema, filters=filters,
                                                 constraint=constraint_sql)
            term_depth = None
        ctes.append(keyword_leg(schema=schema, ts_config=ts_config, join=join, fetch=fetch,
                                term_depth=term_depth, pruning=pruning))
        ctes.append(sql.SQL(_EVIDENCE if evidence else _EMPTY_EVIDENCE).format(
            s=schema, cfg=sql.Literal(ts_config)))
    else:
        ctes.extend([sql.SQL(_EMPTY_KW), sql.SQL(_EMPTY_EVIDENCE)])
    if mode in ("vector", "hybrid"):
        ctes.append(sql.SQL(_VECTOR).format(
            s=schema, expr=vector_expression(dim, halfvec), vtype=sql.SQL(vtype),
            dim=sql.Literal(dim), model=sql.Literal(model_key), filters=filters,
            constraint=constraint_sql, fetch=counts["fetch"],
            norm_similarity=sql.SQL(_NORM.format(x="(1 - distance)"))))
    else:
        ctes.append(sql.SQL(_EMPTY_VEC))
    return sql.SQL("WITH {ctes} {fuse}").format(
        ctes=sql.SQL(",").join(ctes),
        fuse=sql.SQL(_FUSE).format(
            s=schema, fusion=sql.SQL(_FUSION_SQL[fusion]), limit=counts["limit"],
            evidence=sql.SQL(_EVIDENCE_COLUMNS if evidence else _NO_EVIDENCE_COLUMNS).format(
                depth=sql.Literal(EVIDENCE_DEPTH))))


def keyword_leg(*, schema: sql.Identifier, ts_config: str, join: sql.Composable | None,
                fetch: int, term_depth: int | None, pruning: bool) -> sql.Composed:
    """The keyword leg's CTEs (ending in ``kw``), as :func:`build_search_sql` describes them;
    ``join`` joins the chunk rows and applies the filters (None: unfiltered). The long-list size
    is :data:`LONG_LIST` as it is now (tests lower it)."""
    fetch_sql = sql.Literal(_count("fetch", fetch))
    norm_score = sql.SQL(_NORM.format(x="score"))
    filters = join if join is not None else sql.SQL("")

    def ranked(cte: str) -> sql.Composable:
        if join is None:
            return sql.SQL(cte)
        return sql.SQL(_BEST_FIRST.format(cte=cte, head=BEST_FIRST_HEAD, fetch=fetch)).format(
            join=join)

    if pruning and term_depth is None:
        return sql.SQL(_KEYWORD_PRUNED).format(
            s=schema, cfg=sql.Literal(ts_config), fetch=fetch_sql,
            exhaustive=sql.Literal(PRUNING_EXHAUSTIVE_BELOW), norm_score=norm_score)
    if term_depth is not None:
        scored = sql.SQL(_SUMMED).format(postings=sql.SQL(_TOP_POSTINGS).format(
            term_depth=sql.Literal(_count("term_depth", term_depth))))
    else:
        scored = sql.SQL(_SKIPPING).format(
            s=schema, postings=sql.SQL(_ALL_POSTINGS), join=filters,
            long_list=sql.Literal(LONG_LIST), probe_cost=sql.Literal(PROBE_COST),
            dense_block=sql.Literal(DENSE_BLOCK), dense_cost=sql.Literal(DENSE_COST),
            completion_cost=sql.Literal(COMPLETION_COST), fetch=fetch_sql,
            ranked_short=ranked("kw_short"))
    return sql.SQL(_KEYWORD).format(s=schema, cfg=sql.Literal(ts_config), join=filters,
                                    fetch=fetch_sql, scored=scored, ranked=ranked("kw_scored"),
                                    norm_score=norm_score)


def _count(name: str, value: int | None) -> int | None:
    """A row count for the statement: an int (bool is not one) or None, nothing else."""
    if value is not None and (type(value) is not int or value < 1):
        raise ValueError(f"{name} must be a positive int or None, not {value!r}")
    return value


_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def inline_filter(filters: sql.Composable, params: Mapping[str, Any], *,
                  filtered: bool, constraint: str | None, ts_config: str) -> str | None:
    """The keyword leg's filters (and quoted constraint) as one SQL expression over ``c`` with
    its values as quoted literals, for keyword_top to run; None when nothing filters.

    keyword_top runs it with the caller's own rights (it is not SECURITY DEFINER), and every
    value in it is a literal psycopg quoted, as when it is bound."""
    parts: list[sql.Composable] = []
    if filtered:
        parts.append(filters)
    if constraint is not None:
        parts.append(sql.SQL("c.tsv @@ websearch_to_tsquery({cfg}::regconfig, {q})").format(
            cfg=sql.Literal(ts_config), q=sql.Literal(constraint)))
    if not parts:
        return None
    text = sql.SQL(" AND ").join(parts).as_string(None)
    return _PLACEHOLDER.sub(lambda m: sql.Literal(params[m[1]]).as_string(None), text)
