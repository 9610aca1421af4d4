kw_cand AS MATERIALIZED (
    SELECT k.chunk_pk, k.len, k.score FROM kw_short k CROSS JOIN kw_bound bd
    WHERE k.score + bd.rest >= bd.theta * (1 - 1e-9)
)
