"""What the keyword index says of words outside a search: the lexemes texts hold under the
collection's text-search configuration, and each lexeme's BM25 idf in a snapshot, counted as the
keyword leg counts it (its segments' postings less the snapshot's deleted ones, ``kw_idf`` in
``_query``): evidence read off a few sentences without running the keyword leg over them."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg import sql

from pgcite.index._bm25 import idf_value


def lexemes(conn: psycopg.Connection, ts_config: str, texts: Sequence[str]) -> list[frozenset[str]]:
    """Each text's lexemes, in order (an empty set for a text of stop words only)."""
    if not texts:
        return []
    rows = conn.execute(
        "SELECT u.i, coalesce(array_agg(t.lexeme) FILTER (WHERE t.lexeme IS NOT NULL), '{}')"
        " FROM unnest(%s::text[]) WITH ORDINALITY u(s, i)"
        " LEFT JOIN LATERAL unnest(to_tsvector(%s::regconfig, u.s)) t ON true"
        " GROUP BY u.i ORDER BY u.i", (list(texts), ts_config)).fetchall()
    return [frozenset(r[1]) for r in rows]


def idfs(conn: psycopg.Connection, schema: str, snapshot_id: int,
         terms: Sequence[str]) -> dict[str, float]:
    """The idf of each of ``terms`` in the snapshot; a term no chunk holds gets df 0, the
    largest idf (as the coverage signals count it)."""
    if not terms:
        return {}
    s = sql.Identifier(schema)
    (n,) = conn.execute(sql.SQL(
        "SELECT coalesce(n_chunks, 0)::float8 FROM {s}.snapshots WHERE snapshot_id = %s")
        .format(s=s), (snapshot_id,)).fetchone() or (0.0,)
    rows = conn.execute(sql.SQL(
        "SELECT b.term, (sum(b.postings) - coalesce(max(d.df), 0))::float8"
        " FROM {s}.snapshot_segments ss JOIN {s}.segment_blocks b USING (segment_id)"
        " LEFT JOIN {s}.snapshot_deleted_df d"
        "   ON d.snapshot_id = ss.snapshot_id AND d.term = b.term"
        " WHERE ss.snapshot_id = %s AND b.term = ANY(%s) GROUP BY b.term").format(s=s),
        (snapshot_id, list(terms))).fetchall()
    df = {term: count for term, count in rows}
    return {t: idf_value(n, df.get(t, 0.0)) for t in terms}
