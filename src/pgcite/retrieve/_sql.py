"""The hybrid query: BM25 keyword leg, HNSW vector leg and their fusion (convex by default, or
reciprocal rank fusion) in ONE statement, composed from named parts.

The keyword leg's parts come from the keyword index (:class:`pgcite.index.KeywordLeg`); this
module adds the answerability signals (``evidence``), the vector leg (``vec_near``, ``vec``) and
the fusion. Both legs apply the same compiled filters inside their own WHERE clause, so nothing
outside the filters can come back from either, and each leg fetches ``fetch`` candidates. The
fused list keeps every candidate of either leg (FULL OUTER JOIN); Python cuts it to top_k and
keeps the rest for ``explain``. A new signal is one more column in :data:`SIGNAL_COLUMNS` (and a
part of its own if it needs one); tests/golden/ holds each part's rendering and the whole
statement's.

The row counts (``fetch``, the final limit, ``term_depth``) and the snapshot's id are literals,
not parameters: they are integers this module is given, never user text, and with them in the
statement PostgreSQL can reuse a cached plan of the prepared statement (psycopg prepares it after
five uses). With a parameter instead, a generic plan assumes 10% of the rows, drops the HNSW
index, and PostgreSQL plans every query afresh; on SciFact the literals took a top-10 hybrid query
from 5.1 to 3.9 ms (same rows, measured interleaved). The snapshot became one later: in a
collection of many snapshots and segments a generic plan's estimate for "this snapshot's
segments" differed from the custom plans', so PostgreSQL planned every search anew (~7 ms a
query under load; bench/results/merges), where a collection of one snapshot reused its plan.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from psycopg import sql

from pgcite._types import DEFAULT_FUSION, Fusion, Mode
from pgcite.index import SNAPSHOT, Cte, KeywordLeg, absent, bm25_idf, min_max, row_count, with_ctes
from pgcite.store._collections import vector_expression, vector_type

# The ranks the gap and overlap signals look at: fixed, so that they do not move with top_k
# (each leg fetches at least 3 x top_k candidates, so from top_k = 2 on all five are there).
EVIDENCE_DEPTH = 5


def evidence(schema: sql.Identifier, ts_config: str,
             snapshot: sql.Composable = SNAPSHOT) -> list[Cte]:
    """Answerability signals (pgcite.retrieve._answerability) of the keyword leg: the share of
    the query's idf mass that the snapshot holds at all, the share its best keyword hit holds,
    how many of the query's names (capitalised words, given as %(names_text)s) the snapshot has
    never seen, and how many distinct lexemes the query has (the scale the coverage shares are
    on). df and N are the snapshot's (kw_idf, kw_stats)."""
    mass = sql.SQL(
        "-- all the query's idf mass: a lexeme the snapshot lacks counts with df = 0\n"
        "    SELECT (SELECT coalesce(sum(idf), 0) FROM kw_idf)\n"
        "           + (cardinality(t.terms) - (SELECT count(*) FROM kw_idf)) * {idf0}\n"
        "           AS total\n"
        "    FROM kw_terms t CROSS JOIN kw_stats st").format(
        idf0=bm25_idf(sql.SQL("st.n"), sql.Literal(0)))
    signals = sql.SQL(
        "SELECT (SELECT coalesce(sum(idf), 0) FROM kw_idf) / nullif(m.total, 0) AS coverage,\n"
        "           -- (the best hit's lexemes an initplan: as a join filter they were\n"
        "           -- read from its tsvector once per query lexeme)\n"
        "           (SELECT coalesce(sum(i.idf), 0) FROM kw_idf i\n"
        "            WHERE i.term = ANY((SELECT tsvector_to_array(c.tsv) FROM {s}.chunks c\n"
        "                                WHERE c.chunk_pk = (SELECT chunk_pk FROM kw"
        " WHERE rank = 1))::text[])) / nullif(m.total, 0) AS best_coverage,\n"
        "           -- a name is unknown when the snapshot's segments hold it in no live chunk\n"
        "           (SELECT count(*) FROM unnest(to_tsvector({cfg}::regconfig, %(names_text)s)) n\n"
        "            WHERE {absent}) AS unknown_names,\n"
        "           (SELECT cardinality(terms) FROM kw_terms) AS query_terms\n"
        "    FROM kw_mass m").format(s=schema, cfg=sql.Literal(ts_config),
                                   absent=absent(sql.SQL("n.lexeme"), schema, snapshot))
    return [Cte("kw_mass", mass), Cte("evidence", signals)]


# The HNSW scan's knobs for this search, set by the statement itself: set_config(..., true)
# lasts until the statement's transaction ends (autocommit: the statement), so nothing leaks to
# the pooled connection, and as a one-time filter above the scan it runs before the scan's first
# tuple, where pgvector reads them. Set by a statement of their own they cost BEGIN, a SELECT
# and COMMIT around every search (SciFact hybrid top-10 p50 7.93 against 7.58 ms wall, side by
# side in bench/results/search_latency at f9a10ca). PostgreSQL plans under the connection's
# ef_search, so a deeper search sets it before the statement too (_search.planned_ef_search).
HNSW_KNOBS = sql.SQL("(SELECT set_config('hnsw.ef_search', %(ef_search)s, true)\n"
                     "                 || set_config('hnsw.iterative_scan', 'strict_order', true))"
                     " IS NOT NULL")


def vector_leg(*, schema: sql.Identifier, model_key: str, dim: int, halfvec: bool,
               filters: sql.Composable, constraint: sql.Composable, fetch: int,
               snapshot: sql.Composable = SNAPSHOT) -> list[Cte]:
    """HNSW: the ORDER BY expression is exactly the partial index's expression, and the model
    predicate matches the index predicate (as a literal, so every plan can use the index); the
    scan's knobs are set in the statement (:data:`HNSW_KNOBS`, %(ef_search)s)."""
    expr = vector_expression(dim, halfvec)
    distance = sql.SQL("{expr} <=> %(query_vector)s::{vtype}({dim})").format(
        expr=expr, vtype=sql.SQL(vector_type(dim, halfvec)), dim=sql.Literal(dim))
    near = sql.SQL(
        "SELECT c.chunk_pk, {distance} AS distance\n"
        "    FROM {s}.chunks c\n"
        "    WHERE c.embed_model = {model}\n"
        "      AND c.version_pk IN (SELECT version_pk FROM {s}.snapshot_members\n"
        "                           WHERE snapshot_id = {snapshot})\n"
        "      AND {filters} {constraint}\n"
        "      AND {knobs}\n"
        "    ORDER BY {distance}\n"
        "    LIMIT {fetch}").format(
        s=schema, snapshot=snapshot, distance=distance, model=sql.Literal(model_key),
        filters=filters, knobs=HNSW_KNOBS,
        constraint=constraint, fetch=sql.Literal(row_count("fetch", fetch)))
    ranked = sql.SQL(
        "SELECT chunk_pk, distance, row_number() OVER (ORDER BY distance, chunk_pk) AS rank,\n"
        "           {norm} AS norm\n"
        "    FROM vec_near").format(norm=min_max(sql.SQL("(1 - distance)")))
    return [Cte("vec_near", near), Cte("vec", ranked)]


# A leg the mode leaves out: no rows, the columns the fusion reads.
EMPTY_KEYWORD = Cte("kw", sql.SQL(
    "SELECT NULL::bigint AS chunk_pk, NULL::float8 AS score, NULL::bigint AS rank,"
    " NULL::float8 AS norm WHERE false"))
EMPTY_EVIDENCE = Cte("evidence", sql.SQL(
    "SELECT NULL::float8 AS coverage, NULL::float8 AS best_coverage,"
    " NULL::bigint AS unknown_names, NULL::integer AS query_terms"))
EMPTY_VECTOR = Cte("vec", sql.SQL(
    "SELECT NULL::bigint AS chunk_pk, NULL::float8 AS distance, NULL::bigint AS rank,"
    " NULL::float8 AS norm WHERE false"))

FUSION: dict[Fusion, sql.SQL] = {
    # Reciprocal rank fusion: rank-only, robust to the legs' score scales.
    "rrf": sql.SQL("coalesce(%(w_keyword)s / (%(rrf_k)s + k.rank), 0)"
                   " + coalesce(%(w_vector)s / (%(rrf_k)s + v.rank), 0)"),
    # Convex combination of min-max normalised scores, weights scaled to sum to 1.
    "convex": sql.SQL("(%(w_keyword)s * coalesce(k.norm, 0) + %(w_vector)s * coalesce(v.norm, 0))"
                      " / (%(w_keyword)s + %(w_vector)s)"),
}

# The answerability signals every fused row carries, computed over every candidate, before the
# LIMIT (abstention must not depend on top_k): the best cosine, how far it stands above the
# EVIDENCE_DEPTH-th best, how many of the legs' top EVIDENCE_DEPTH both legs found, and the
# keyword leg's (evidence). name -> SQL expression over k (keyword), v (vector), e (evidence).
SIGNAL_COLUMNS: dict[str, sql.Composable] = {
    "best_similarity": sql.SQL("1 - min(v.distance) OVER ()"),
    "similarity_gap": sql.SQL(
        "max(v.distance) FILTER (WHERE v.rank <= {depth}) OVER () - min(v.distance) OVER ()"
    ).format(depth=sql.Literal(EVIDENCE_DEPTH)),
    "leg_overlap": sql.SQL(
        "count(*) FILTER (WHERE k.rank <= {depth} AND v.rank <= {depth}) OVER ()").format(
        depth=sql.Literal(EVIDENCE_DEPTH)),
    "coverage": sql.SQL("e.coverage"),
    "best_coverage": sql.SQL("e.best_coverage"),
    "unknown_names": sql.SQL("e.unknown_names"),
    "query_terms": sql.SQL("e.query_terms"),
}


def fuse(schema: sql.Identifier, fusion: Fusion, limit: int | None,
         signals: Mapping[str, sql.Composable] = SIGNAL_COLUMNS) -> sql.Composed:
    """The fused rows: each candidate of either leg with both legs' ranks and scores, the
    ``signals``, the query's lexemes (kw_terms: what snippets mark) and its chunk, best first
    (ties: the vector rank, then the keyword rank).

    The candidates are ranked and cut to ``limit`` before their chunk rows are read: only the
    rows returned are looked up (at top-100 on SciFact ~525 candidates, 100 returned)."""
    columns = sql.SQL(",\n             ").join(
        sql.SQL("{} AS {}").format(expr, sql.Identifier(name)) for name, expr in signals.items())
    return sql.SQL(
        "SELECT f.*, (SELECT terms FROM kw_terms) AS lexemes,\n"
        "       c.id, c.document_id, c.citation, c.author, c.corpus, c.date_start, c.date_end,\n"
        "       c.source, c.locator, c.title, c.body, c.metadata\n"
        "FROM (SELECT coalesce(k.chunk_pk, v.chunk_pk) AS chunk_pk,\n"
        "             {fusion} AS fused,\n"
        "             k.rank AS kw_rank, k.score AS kw_score, v.rank AS vec_rank, v.distance,\n"
        "             {signals}\n"
        "      FROM kw k FULL OUTER JOIN vec v ON v.chunk_pk = k.chunk_pk\n"
        "      CROSS JOIN evidence e\n"
        "      ORDER BY fused DESC, coalesce(v.rank, 1e9), coalesce(k.rank, 1e9),"
        " coalesce(k.chunk_pk, v.chunk_pk)\n"
        "      LIMIT {limit}) f\n"
        "JOIN {s}.chunks c USING (chunk_pk)\n"
        "ORDER BY f.fused DESC, coalesce(f.vec_rank, 1e9), coalesce(f.kw_rank, 1e9), f.chunk_pk"
    ).format(fusion=FUSION[fusion], signals=columns, s=schema,
             limit=sql.Literal(row_count("limit", limit)))


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
    snapshot_id: int | None = None,
    longest_list: int | None = None,
    deletions: bool = True,
) -> sql.Composed:
    """The statement for one search of the snapshot ``snapshot_id`` (None: a placeholder
    %(snapshot_id)s); values are left as named placeholders.

    ``filtered=False`` promises that ``filters`` is trivially true, so the keyword leg may skip
    joining the chunk rows. ``fetch`` candidates per leg, ``limit`` fused rows (None: all);
    ``term_depth`` counts only each term's N best postings per segment (None: exact BM25), and
    only in an unfiltered leg (a filtered one is always exact). ``longest_list`` and
    ``deletions``: what the snapshot's lists can hold (:class:`pgcite.index.KeywordLeg`)."""
    return sql.SQL("WITH {ctes}\n{fuse}").format(
        ctes=with_ctes(search_ctes(
            schema=schema, ts_config=ts_config, model_key=model_key, dim=dim, halfvec=halfvec,
            mode=mode, filters=filters, constraint=constraint, filtered=filtered, fetch=fetch,
            term_depth=term_depth, snapshot_id=snapshot_id, longest_list=longest_list,
            deletions=deletions)),
        fuse=fuse(schema, fusion, limit))


@dataclass(frozen=True)
class StatementShape:
    """What a search statement's text depends on: :func:`build_search_sql`'s arguments, the
    schema by name and the compiled filters as their SQL text (values stay placeholders)."""

    schema: str
    ts_config: str
    model_key: str
    dim: int
    halfvec: bool
    mode: Mode
    filters: str
    constraint: bool
    filtered: bool
    fusion: Fusion
    fetch: int
    limit: int | None
    term_depth: int | None
    snapshot_id: int | None
    longest_list: int | None
    deletions: bool


# Composing the statement from its parts and rendering it took ~1.5 ms a search on SciFact
# (0.8 to compose, 0.6 to render: client work, at top-10 as long as half the server's); a
# collection's searches come in a handful of shapes, so each is rendered once (hybrid top-10 p50
# wall 8.6 -> 7.6 ms side by side, bench/results/search_latency). A new snapshot is a new shape;
# the least recently used go.
@functools.lru_cache(maxsize=256)
def search_statement(shape: StatementShape) -> sql.SQL:
    """:func:`build_search_sql` for ``shape``, rendered to its text once."""
    fields = asdict(shape)
    fields["schema"] = sql.Identifier(shape.schema)
    fields["filters"] = sql.SQL(shape.filters)
    return sql.SQL(build_search_sql(**fields).as_string())


def search_ctes(*, schema: sql.Identifier, ts_config: str, model_key: str, dim: int,
                halfvec: bool, mode: Mode, filters: sql.Composable, constraint: bool,
                filtered: bool, fetch: int, term_depth: int | None,
                snapshot_id: int | None = None, longest_list: int | None = None,
                deletions: bool = True) -> list[Cte]:
    """The statement's parts before the fusion: kw (and its parts; in vector mode only
    kw_terms, the query's lexemes), evidence, vec."""
    snapshot = SNAPSHOT if snapshot_id is None else sql.Literal(row_count("snapshot_id",
                                                                         snapshot_id))
    constraint_sql = sql.SQL(
        "AND c.tsv @@ websearch_to_tsquery({cfg}::regconfig, %(constraint)s)" if constraint else ""
    ).format(cfg=sql.Literal(ts_config))
    ctes: list[Cte] = []
    if mode in ("keyword", "hybrid"):
        join: sql.Composable | None = None
        if filtered or constraint:
            # Filters need the chunk row; without them, the postings alone rank (half the work).
            join = sql.SQL("JOIN {s}.chunks c USING (chunk_pk) WHERE {filters} {constraint}"
                           ).format(s=schema, filters=filters, constraint=constraint_sql)
            term_depth = None
        ctes += KeywordLeg(schema=schema, ts_config=ts_config, fetch=fetch, join=join,
                           term_depth=term_depth, snapshot=snapshot,
                           longest_list=longest_list, deletions=deletions).ctes()
        ctes += evidence(schema, ts_config, snapshot)
    else:  # the query's lexemes still: the snippets mark them (pgcite.retrieve._snippets)
        ctes += [KeywordLeg(schema=schema, ts_config=ts_config, fetch=fetch).terms(),
                 EMPTY_KEYWORD, EMPTY_EVIDENCE]
    if mode in ("vector", "hybrid"):
        ctes += vector_leg(schema=schema, model_key=model_key, dim=dim, halfvec=halfvec,
                           filters=filters, constraint=constraint_sql, fetch=fetch,
                           snapshot=snapshot)
    else:
        ctes.append(EMPTY_VECTOR)
    return ctes
