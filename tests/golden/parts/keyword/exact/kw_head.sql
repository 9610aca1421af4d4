kw_head AS MATERIALIZED (
    -- the fetch best partial scores of chunks that pass the filters; theta is the last
    SELECT k.chunk_pk, k.score FROM kw_short k
    ORDER BY k.score DESC, k.chunk_pk LIMIT 30
)
