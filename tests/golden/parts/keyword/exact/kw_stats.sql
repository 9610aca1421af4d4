kw_stats AS (
    -- BM25's length norm as base + slope * len (pgcite/index/_bm25.py)
    SELECT n, k1, k1 * (1 - b) AS base, k1 * b / avgdl AS slope
    FROM (SELECT coalesce(n_chunks, 0)::float8 AS n, coalesce(avg_length, 1) AS avgdl,
                 bm25_k1::float8 AS k1, bm25_b::float8 AS b
          FROM "pgc_diary".snapshots WHERE snapshot_id = %(snapshot_id)s) s
)
