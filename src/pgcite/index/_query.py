"""The keyword leg of the search statement, as named parts (common table expressions) composed
with psycopg.sql: identifiers by ``sql.Identifier``, values as named placeholders the caller
binds (%(ranking_text)s), the snapshot, row counts and tuning constants as literals. Each
part has its golden rendering (tests/golden/parts/keyword/).

BM25 over the snapshot's segments (docs/retrieval.md): each segment's postings carry raw term
frequencies and chunk lengths, the snapshot its statistics (N, average length; a term's df is
its postings' lengths over the segments minus its df among the snapshot's deleted chunks), so a
chunk scores exactly as in an index built for that snapshot alone. The query is analysed by the
same to_tsvector configuration as the documents. Chunks a snapshot deleted from a segment are
dropped before the sum, and filters apply before the LIMIT: the leg is never under-filled.

The parts, in order: kw_terms (the query's lexemes), kw_stats (the snapshot's statistics),
kw_idf (each lexeme's idf and weight factor), kw_postings (the lists), kw_dead (deleted chunks),
the scoring (kw_scored: summed, or by the skipping parts below), kw_top and kw (the fetch best,
ranked and normalised).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from psycopg import sql

from pgcite.index import _bm25
from pgcite.index._layout import DENSE_BLOCK

# Lists of at least this many postings (over a snapshot's segments) are "long" for the skipping
# parts: skipping a shorter one saves less than the theta it needs costs; a snapshot whose
# segments hold fewer chunks has no such list and gets no skipping parts. Read when a statement
# is built (tests lower it, and clear the cache of built statements).
LONG_LIST = 32768
# What completing one candidate from its tsvector costs, in postings summed (~15 us against
# ~0.3 us at 1M), and what probing one long posting for the candidates costs in the same unit:
# kw_lookup completes from tsvectors only where that is cheaper. Measured at 1M, interleaved:
# probe_cost 0.3 gave p95 26.4 ms, 0.1 27.4, 1 26.7, always probing 28.6.
COMPLETION_COST = 100
PROBE_COST = 0.3
# What reading one dense row costs in postings summed (a 1M-chunk list's 250 rows, 1 MB, took
# ~0.3 ms).
DENSE_COST = 4
# The head a filtered leg tries first (_best_first): a filter one chunk in 64 passes still fills
# a fetch of 15 from it. Measured at 1M (keyword leg, 60 queries, interleaved; p95 ms, all rows
# sorted / 256 / 1024 / 4096): a third of the chunks 34.7 / 28.4 / 29.6 / 35.9, a quarter 35.2 /
# 28.9 / 30.9 / 36.1, a 40th 48.0 / 57.1 / 42.9 / 51.4.
BEST_FIRST_HEAD = 1024


# The snapshot a statement reads, when it is not given as a literal.
SNAPSHOT = sql.Placeholder("snapshot_id")


@dataclass(frozen=True)
class Cte:
    """One named part of a statement: ``name AS [MATERIALIZED] (body)``."""

    name: str
    body: sql.Composable
    materialized: bool = False

    def render(self) -> sql.Composed:
        return sql.SQL("{name} AS {m}(\n    {body}\n)").format(
            name=sql.SQL(self.name),  # the code's own names, never user text
            m=sql.SQL("MATERIALIZED " if self.materialized else ""), body=self.body)


def with_ctes(ctes: list[Cte]) -> sql.Composed:
    """The parts as one WITH list (without the WITH)."""
    return sql.SQL(", ").join(cte.render() for cte in ctes)


def count(name: str, value: int | None) -> int | None:
    """A row count for a statement: an int (bool is not one) or None, nothing else."""
    if value is not None and (type(value) is not int or value < 1):
        raise ValueError(f"{name} must be a positive int or None, not {value!r}")
    return value


@dataclass(frozen=True)
class KeywordLeg:
    """The keyword leg of one search: ``fetch`` chunks of the snapshot ``snapshot``, best
    first, for the query text %(ranking_text)s.

    ``join`` joins the chunk rows (as ``c``) and applies the filters, or None (unfiltered: the
    postings alone rank, half the work). ``term_depth`` counts only each term's N best postings
    per segment (approximate, only unfiltered: a prefix cut before the filters could leave the
    leg empty); None is exact BM25. ``snapshot``: the snapshot's id as a literal (what a
    search passes: see pgcite.retrieve._sql), or a placeholder.

    What the snapshot's lists can hold, where the caller knows it: ``longest_list``, at most
    how many postings one list has (the chunks its segments indexed; None: any number), and
    ``deletions``, whether its segments hold chunks it deleted. A snapshot none of whose lists
    can be long gets no skipping parts, and one without deleted chunks no check for them: on
    SciFact (10k chunks) the parts that never ran still cost ~0.5 ms of a keyword statement's
    2.4 (server execution, p50 of 200 claims, interleaved), as PostgreSQL readies every node of
    a plan before it runs any."""

    schema: sql.Identifier
    ts_config: str
    fetch: int
    join: sql.Composable | None = None
    term_depth: int | None = None
    snapshot: sql.Composable = field(default_factory=lambda: SNAPSHOT)
    longest_list: int | None = None
    deletions: bool = True

    def __post_init__(self) -> None:
        count("fetch", self.fetch)
        count("term_depth", self.term_depth)
        if self.join is not None and self.term_depth is not None:
            raise ValueError("a filtered keyword leg is exact: term_depth needs join=None")

    def ctes(self) -> list[Cte]:
        """Every part, in statement order, ending in ``kw`` (chunk_pk, score, rank, norm)."""
        if self.term_depth is not None:
            scored = [self.scored_top()]
        elif self.longest_list is not None and self.longest_list < LONG_LIST:
            scored = [self.scored_summed()]
        else:
            scored = [*self.skipping(), self.scored_skipping()]
        dead = [self.dead()] if self.deletions else []
        return [self.terms(), self.stats(), self.idf(), self.postings(), *dead, *scored,
                self.top(), self.ranked()]

    # --- the query, its statistics, its lists ----------------------------------------------

    def terms(self) -> Cte:
        return Cte("kw_terms", sql.SQL(
            "SELECT coalesce(array_agg(lexeme), '{{}}') AS terms\n"
            "    FROM unnest(to_tsvector({cfg}::regconfig, %(ranking_text)s))").format(
            cfg=sql.Literal(self.ts_config)))

    def stats(self) -> Cte:
        k1, b = sql.SQL("k1"), sql.SQL("b")
        return Cte("kw_stats", sql.SQL(
            "-- BM25's length norm as base + slope * len (pgcite/index/_bm25.py)\n"
            "    SELECT n, k1, {base} AS base, {slope} AS slope\n"
            "    FROM (SELECT coalesce(n_chunks, 0)::float8 AS n, coalesce(avg_length, 1) AS avgdl,\n"
            "                 bm25_k1::float8 AS k1, bm25_b::float8 AS b\n"
            "          FROM {s}.snapshots WHERE snapshot_id = {snap}) s").format(
            s=self.schema, snap=self.snapshot, base=_bm25.norm_base(k1, b),
            slope=_bm25.norm_slope(k1, b, sql.SQL("avgdl"))))

    def idf(self) -> Cte:
        return Cte("kw_idf", sql.SQL(
            "-- the idf of each query lexeme the snapshot holds, once per lexeme (inlined, it\n"
            "    -- was evaluated per posting, in numeric: 15 of 18 ms of a 100k-chunk query),\n"
            "    -- and the factor of its postings' weights\n"
            "    SELECT q.term, q.idf, {wt} AS wt, q.postings\n"
            "    FROM (SELECT t.term, {idf} AS idf, st.k1, t.postings\n"
            "          FROM (SELECT b.term, sum(b.postings) AS postings,\n"
            "                       (sum(b.postings) - coalesce(max(d.df), 0))::float8 AS df\n"
            "                FROM {s}.snapshot_segments ss JOIN {s}.segment_blocks b USING (segment_id)\n"
            "                CROSS JOIN kw_terms\n"
            "                LEFT JOIN {s}.snapshot_deleted_df d\n"
            "                  ON d.snapshot_id = {snap} AND d.term = b.term\n"
            "                WHERE ss.snapshot_id = {snap} AND b.term = ANY(kw_terms.terms)\n"
            "                GROUP BY b.term) t CROSS JOIN kw_stats st\n"
            "          WHERE t.df > 0) q").format(
            s=self.schema, snap=self.snapshot,
            wt=_bm25.term_factor(sql.SQL("q.idf"), sql.SQL("q.k1")),
            idf=_bm25.idf(sql.SQL("st.n"), sql.SQL("t.df"))), materialized=True)

    def postings(self) -> Cte:
        # A list's length (its df in the segment) is read from segment_blocks, not as the
        # cardinality of its postings array, which detoasted every array once more only to
        # count it (3.4 of 336 ms of a 390k-posting query at 1M).
        return Cte("kw_postings", sql.SQL(
            "SELECT ss.segment_id, cardinality(ss.deleted) > 0 AS dead, p.term, p.chunk_pks,\n"
            "           p.tfs, p.lengths, EXISTS (SELECT 1 FROM {s}.segment_dense d\n"
            "                              WHERE d.segment_id = p.segment_id AND d.term = p.term)"
            " AS dense\n"
            "    FROM {s}.snapshot_segments ss JOIN {s}.segment_postings p USING (segment_id)\n"
            "    CROSS JOIN kw_terms\n"
            "    WHERE ss.snapshot_id = {snap} AND p.term = ANY(kw_terms.terms)").format(
            s=self.schema, snap=self.snapshot), materialized=True)

    def dead(self) -> Cte:
        return Cte("kw_dead", sql.SQL(
            "SELECT ss.segment_id, d.chunk_pk\n"
            "    FROM {s}.snapshot_segments ss, unnest(ss.deleted) AS d(chunk_pk)\n"
            "    WHERE ss.snapshot_id = {snap}").format(s=self.schema, snap=self.snapshot))

    # --- scoring -------------------------------------------------------------------------

    def scored_top(self) -> Cte:
        """term_depth: each list's first term_depth postings, summed (approximate)."""
        return Cte("kw_scored", _summed(_top_postings(self.term_depth),
                                        deletions=self.deletions))

    def scored_summed(self) -> Cte:
        """Every posting summed, for a snapshot without long lists (nothing to skip)."""
        return Cte("kw_scored", _summed(_ALL_POSTINGS, deletions=self.deletions))

    def skipping(self) -> list[Cte]:
        """The exact sum without reading the query's long lists where they cannot matter
        (MaxScore's skipping, for whole lists); kw_scored picks the branch at run time.

        On 1M chunks a query's time is its postings': ~0.06 us each to read, ~0.15 us more to
        sum per chunk (a hash aggregate), and the slowest 5-10% of six-word queries hold one
        list of 100k-390k postings, of a term so common that one posting of it weighs little.
        The lists of at least LONG_LIST postings are "long"; the others are summed first
        (kw_short), and theta, the fetch-th best of those partial scores among chunks that
        pass the filters (kw_head), is a lower bound of the fetch-th best full score (weights
        are positive). A chunk only long lists hold scores at most the sum of their bounds
        (each term's idf times its best block bound). When that sum is below theta no such
        chunk can enter the top fetch (kw_skip), so only the candidates (kw_cand: short-list
        chunks whose partial score plus that sum reaches theta) need the long terms' weights,
        and every score that can reach the top is the full one."""
        long_list = sql.Literal(LONG_LIST)
        return [
            Cte("kw_long", sql.SQL(_LONG).format(
                s=self.schema, snap=self.snapshot, long_list=long_list,
                bound=_bm25.weight(sql.SQL("(st.k1 + 1)"), sql.SQL("x.mt"), sql.SQL("x.ml"),
                                   base=sql.SQL("st.base"), slope=sql.SQL("st.slope"))),
                materialized=True),
            Cte("kw_short", _summed(_ALL_POSTINGS, lists=sql.SQL(" WHERE i.postings < {}").format(
                long_list), length=True, deletions=self.deletions), materialized=True),
            Cte("kw_head", sql.SQL(
                "-- the fetch best partial scores of chunks that pass the filters; theta is the"
                " last\n"
                "    SELECT k.chunk_pk, k.score FROM {ranked} k {join}\n"
                "    ORDER BY k.score DESC, k.chunk_pk LIMIT {fetch}").format(
                ranked=self._best_first("kw_short"), join=self._join(),
                fetch=sql.Literal(self.fetch)), materialized=True),
            Cte("kw_bound", sql.SQL(
                "SELECT (SELECT sum(ub) FROM kw_long) AS rest,\n"
                "           (SELECT min(score) FROM kw_head HAVING count(*) >= {fetch}) AS theta"
                ).format(fetch=sql.Literal(self.fetch))),
            Cte("kw_skip", sql.SQL(
                "-- (a relative margin: the bounds and the scores are summed in other orders)\n"
                "    SELECT l.present, l.present\n"
                "           AND coalesce((SELECT bd.rest * (1 + 1e-9) < bd.theta FROM kw_bound bd),"
                " false) AS skip\n"
                "    FROM (SELECT EXISTS (SELECT 1 FROM kw_long) AS present) l"),
                materialized=True),
            Cte("kw_cand", sql.SQL(
                "SELECT k.chunk_pk, k.len, k.score FROM kw_short k CROSS JOIN kw_bound bd\n"
                "    WHERE k.score + bd.rest >= bd.theta * (1 - 1e-9)"), materialized=True),
            Cte("kw_dense", sql.SQL(
                "-- the long lists' dense rows, read whole (one hash join with the candidates:\n"
                "    -- looked up one candidate at a time through the index, 30k candidates took\n"
                "    -- 34 ms at 1M)\n"
                "    SELECT d.segment_id, d.block, d.tfs, l.wt, p.dead\n"
                "    FROM kw_long l JOIN kw_postings p USING (term)\n"
                "    JOIN {s}.segment_dense d ON d.segment_id = p.segment_id AND d.term = p.term\n"
                "    WHERE p.dense").format(s=self.schema), materialized=True),
            Cte("kw_lookup", sql.SQL(
                "-- complete the candidates from their tsvectors where that costs less than\n"
                "    -- probing the long lists for them (their sparse postings and their dense"
                " rows)\n"
                "    SELECT (SELECT count(*) FROM kw_cand) * {completion_cost}\n"
                "           < (SELECT sum(sparse) * {probe_cost} + sum(dense) * {dense_cost}"
                " FROM kw_long)\n"
                "           AS tsv").format(
                completion_cost=sql.Literal(COMPLETION_COST),
                probe_cost=sql.Literal(PROBE_COST), dense_cost=sql.Literal(DENSE_COST)),
                materialized=True),
        ]

    def completed(self) -> sql.Composed:
        """kw_scored's branch that completes the candidates from their own tsvectors (the
        source of the postings' term frequencies; its length is the one its postings carry)."""
        return sql.SQL(_COMPLETED).format(s=self.schema, weight=_bm25.weight(
            sql.SQL("l.wt"), sql.SQL("x.tf"), sql.SQL("k.len"),
            base=sql.SQL("st.base"), slope=sql.SQL("st.slope")))

    def probed(self) -> sql.Composed:
        """kw_scored's branch that probes the long lists for the candidates: their sparse
        postings against a hash of the candidates (read whole, only the few that match summed)
        and, where a segment holds a list densely, its dense rows, one get_byte a candidate (at
        1M a query's p95 went from 52 to 26 ms with the postings probe against tsvectors
        alone, and to 21 ms with the dense rows besides). A candidate the probes do not find
        keeps its partial score, so of those only the fetch best (kw_head) can reach the top
        (hybrid p95 at 1M 24.0 -> 22.0 ms, where 30k candidates had been hashed and sorted)."""
        sparse = _live(_ALL_POSTINGS, lists=sql.SQL(
            " WHERE i.postings >= {} AND NOT p.dense").format(sql.Literal(LONG_LIST)),
            deletions=self.deletions)
        return sql.SQL(_PROBED).format(
            sparse=sparse, block=sql.Literal(DENSE_BLOCK),
            alive=_and(_alive("x", self.deletions)),
            weight=_bm25.weight(sql.SQL("x.wt"), sql.SQL("x.tf"), sql.SQL("x.len"),
                                **_INITPLAN_NORM))

    def added(self) -> sql.Composed:
        """kw_scored's branch when the bound does not skip (theta too low, or fewer than fetch
        chunks): the long lists' postings added to the short sums."""
        return sql.SQL(_ADDED).format(long=_live(_ALL_POSTINGS, lists=sql.SQL(
            " WHERE i.postings >= {}").format(sql.Literal(LONG_LIST)), deletions=self.deletions))

    def every(self) -> sql.Composed:
        """kw_scored's branch with no long list: every posting summed. theta is then never
        computed: initplans run when first read, and AND reads its second operand only when
        the first is true."""
        return _summed(_ALL_POSTINGS, gate=sql.SQL("NOT (SELECT present FROM kw_skip)"),
                       deletions=self.deletions)

    def scored_skipping(self) -> Cte:
        return Cte("kw_scored", sql.SQL("\n    UNION ALL\n    ").join(
            [self.completed(), self.probed(), self.added(), self.every()]))

    # --- the result ----------------------------------------------------------------------

    def top(self) -> Cte:
        return Cte("kw_top", sql.SQL(
            "SELECT k.chunk_pk, k.score::float8 AS score\n"
            "    FROM {ranked} k {join}\n"
            "    ORDER BY k.score DESC, k.chunk_pk\n"
            "    LIMIT {fetch}").format(ranked=self._best_first("kw_scored"), join=self._join(),
                                         fetch=sql.Literal(self.fetch)))

    def ranked(self) -> Cte:
        return Cte("kw", sql.SQL(
            "-- ranked after the LIMIT, so the sort above can be a top-N heapsort\n"
            "    SELECT *, row_number() OVER (ORDER BY score DESC, chunk_pk) AS rank,\n"
            "           {norm} AS norm\n"
            "    FROM kw_top").format(norm=min_max(sql.SQL("score"))))

    def _join(self) -> sql.Composable:
        return self.join if self.join is not None else _NOTHING

    def _best_first(self, cte: str) -> sql.Composable:
        """What a filtered leg reads its top from: the scored chunks best first, so that a
        nested loop looks up chunk rows only until enough pass (at 1M chunks a hash join read
        the row of every scored chunk: 0.2 s p50, 1.1 s p95 under a corpus filter). The outer
        ORDER BY stays: a join may return rows in another order, and then the result is still
        exact. Only the best BEST_FIRST_HEAD are sorted (a top-N heapsort) when fetch of them
        pass the filters, as then the first fetch that pass are among them; otherwise all are
        (LIMIT NULL): sorting all was most of a slow filtered query at 1M (66k chunks)."""
        name = sql.SQL(cte)
        if self.join is None:
            return name
        return sql.SQL(
            "(SELECT * FROM {cte} ORDER BY score DESC, chunk_pk\n"
            "    LIMIT CASE WHEN (SELECT count(*) FROM (\n"
            "                         SELECT 1 FROM (SELECT chunk_pk FROM {cte}\n"
            "                                        ORDER BY score DESC, chunk_pk LIMIT {head})"
            " k\n"
            "                         {join} LIMIT {fetch}) z) >= {fetch} THEN {head} END)"
        ).format(cte=name, head=sql.Literal(BEST_FIRST_HEAD), join=self.join,
                 fetch=sql.Literal(self.fetch))


def min_max(x: sql.Composable) -> sql.Composed:
    """Min-max normalisation over a leg's own candidates (1 when they all score the same): the
    convex fusion compares legs on this common 0..1 scale."""
    return sql.SQL("coalesce(({x} - min({x}) OVER ()) / nullif(max({x}) OVER () - min({x})"
                   " OVER (), 0), 1.0)").format(x=x)


def absent(lexeme: sql.Composable, schema: sql.Identifier,
           snapshot: sql.Composable = SNAPSHOT) -> sql.Composed:
    """Whether the snapshot ``snapshot`` holds ``lexeme`` in no live chunk. Its lists' lengths
    come from segment_blocks (counting a list's elements detoasted it)."""
    return sql.SQL(
        "coalesce((SELECT sum(b.postings)\n"
        "                            FROM {s}.snapshot_segments ss\n"
        "                            JOIN {s}.segment_blocks b USING (segment_id)\n"
        "                            WHERE ss.snapshot_id = {snap} AND b.term = {t}), 0)\n"
        "                  <= coalesce((SELECT d.df FROM {s}.snapshot_deleted_df d\n"
        "                               WHERE d.snapshot_id = {snap}\n"
        "                                 AND d.term = {t}), 0)").format(
        s=schema, t=lexeme, snap=snapshot)


# The statistics as scalar subqueries (initplans, run once) rather than a join per posting with
# their one row: with the hashed kw_dead lookup below, 7% of a 1M-chunk query (bench/scale.py
# interleaved: p50 9.9 -> 9.3 ms).
_INITPLAN_NORM = {"base": sql.SQL("(SELECT base FROM kw_stats)"),
                  "slope": sql.SQL("(SELECT slope FROM kw_stats)")}

# Exact BM25 unnests whole arrays; slicing them (even to their full length) copies each one
# first, which made the keyword leg ~25% slower on SciFact (measured), so the slice is only
# there when term_depth bounds it (each segment's postings are impact-ordered by its own
# statistics, so the slice is their best N). Set-returning functions in one select list advance
# in lockstep; a segment's three arrays have the same length, so each row is one posting. In a
# select list (a ProjectSet node) they stream; in FROM (a function scan) every posting is first
# copied into a tuplestore that spills to disk past work_mem.
_ALL_POSTINGS = sql.SQL("unnest(p.chunk_pks) AS chunk_pk, unnest(p.tfs) AS tf,"
                        " unnest(p.lengths) AS len")


def _top_postings(term_depth: int | None) -> sql.Composed:
    depth = sql.Literal(count("term_depth", term_depth))
    return sql.SQL("unnest(p.chunk_pks[1:{d}]) AS chunk_pk, unnest(p.tfs[1:{d}]) AS tf,"
                   " unnest(p.lengths[1:{d}]) AS len").format(d=depth)


def _alive(r: str, deletions: bool) -> sql.Composed | None:
    """Whether the posting (or dense byte) of chunk_pk in segment_id of row ``r`` counts: its
    segment deleted no chunk (dead is false; only then is kw_dead, a hashed subplan, read), or
    not this one. None (every posting counts) where the snapshot deleted no chunk."""
    if not deletions:
        return None
    return sql.SQL("(NOT {r}.dead OR NOT EXISTS (SELECT 1 FROM kw_dead d"
                   " WHERE d.segment_id = {r}.segment_id AND d.chunk_pk = {r}.chunk_pk))"
                   ).format(r=sql.SQL(r))


_NOTHING = sql.SQL("")


def _and(condition: sql.Composable | None) -> sql.Composable:
    return _NOTHING if condition is None else sql.SQL(" AND {}").format(condition)


def _live(postings: sql.Composable, *, deletions: bool, lists: sql.Composable = _NOTHING,
          gate: sql.Composable | None = None) -> sql.Composed:
    """One row per live posting of the query's lists (those ``lists``, a WHERE clause or
    nothing, keeps): its chunk, the chunk's length and the posting's weight. ``gate`` is a
    condition without columns, which the planner runs once, before any posting is read."""
    weight = _bm25.weight(sql.SQL("u.wt"), sql.SQL("u.tf"), sql.SQL("u.len"), **_INITPLAN_NORM)
    conditions = [c for c in (gate, _alive("u", deletions)) if c is not None]
    where = (sql.SQL("\n        WHERE {}").format(sql.SQL(" AND ").join(conditions))
             if conditions else _NOTHING)
    return sql.SQL(
        "SELECT u.chunk_pk, u.len, {weight} AS w\n"
        "        FROM (SELECT p.segment_id, p.dead, i.wt, {postings}\n"
        "              FROM kw_postings p JOIN kw_idf i USING (term){lists}) u{where}").format(
        weight=weight, postings=postings, lists=lists, where=where)


def _summed(postings: sql.Composable, *, deletions: bool, lists: sql.Composable = _NOTHING,
            gate: sql.Composable | None = None, length: bool = False) -> sql.Composed:
    """Those postings summed per chunk (chunk_pk, score), and with ``length`` each chunk's
    length (a second aggregate a posting: only partial sums that may be completed need it)."""
    return sql.SQL(
        "SELECT x.chunk_pk,{length} sum(x.w) AS score\n"
        "    FROM ({live}) x\n"
        "    GROUP BY x.chunk_pk").format(
        length=sql.SQL(" max(x.len) AS len," if length else ""),
        live=_live(postings, deletions=deletions, lists=lists, gate=gate))


# Each long list's bound (its idf times its best block bound: segment_blocks' (max tf, min
# length) pairs bound every posting under any statistics), how many of its postings are sparse
# (in segments where the list has no dense rows), and how many dense rows it has.
_LONG = """SELECT b.term, i.wt, i.postings, i.idf * max(m.bound) AS ub,
           coalesce(sum(b.postings) FILTER (WHERE NOT p.dense), 0) AS sparse,
           sum(r.blocks) AS dense
    FROM {s}.snapshot_segments ss JOIN {s}.segment_blocks b USING (segment_id)
    JOIN kw_idf i USING (term) JOIN kw_postings p USING (segment_id, term)
    CROSS JOIN kw_stats st,
         LATERAL (SELECT max({bound}) FROM unnest(b.max_tfs, b.min_lengths) AS x(mt, ml)) m(bound),
         LATERAL (SELECT count(*) AS blocks FROM {s}.segment_dense d
                  WHERE p.dense AND d.segment_id = p.segment_id AND d.term = p.term) r
    WHERE ss.snapshot_id = {snap} AND i.postings >= {long_list}
    GROUP BY b.term, i.idf, i.wt, i.postings"""

_COMPLETED = """SELECT k.chunk_pk, k.score + coalesce((
               SELECT sum({weight})
               FROM (SELECT t.lexeme, cardinality(t.positions) AS tf FROM unnest(c.tsv) AS t) x
               JOIN kw_long l ON l.term = x.lexeme), 0) AS score
    FROM kw_cand k JOIN {s}.chunks c USING (chunk_pk) CROSS JOIN kw_stats st
    WHERE (SELECT skip FROM kw_skip) AND (SELECT tsv FROM kw_lookup)"""

_PROBED = """SELECT u.chunk_pk, max(u.partial) + sum(u.w) FROM (
        SELECT chunk_pk, score AS partial, 0::float8 AS w FROM kw_head
        UNION ALL
        SELECT v.chunk_pk, c.score, v.w FROM ({sparse}) v JOIN kw_cand c USING (chunk_pk)
        UNION ALL
        SELECT x.chunk_pk, x.score, {weight} FROM (
            SELECT c.chunk_pk, c.len, c.score, d.wt, d.segment_id, d.dead,
                   get_byte(d.tfs, mod(c.chunk_pk, {block})::integer) AS tf
            FROM kw_dense d JOIN kw_cand c ON c.chunk_pk / {block} = d.block) x
        WHERE x.tf > 0{alive}) u
    WHERE (SELECT skip FROM kw_skip) AND NOT (SELECT tsv FROM kw_lookup)
    GROUP BY u.chunk_pk"""

_ADDED = """SELECT x.chunk_pk, sum(x.score) FROM (
        SELECT chunk_pk, len, score FROM kw_short
        UNION ALL
        {long}) x
    WHERE (SELECT present AND NOT skip FROM kw_skip)
    GROUP BY x.chunk_pk"""
