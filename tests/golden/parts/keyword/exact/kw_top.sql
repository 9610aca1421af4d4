kw_top AS (
    SELECT k.chunk_pk, k.score::float8 AS score
    FROM kw_scored k
    ORDER BY k.score DESC, k.chunk_pk
    LIMIT 30
)
