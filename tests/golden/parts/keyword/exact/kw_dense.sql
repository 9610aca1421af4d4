kw_dense AS MATERIALIZED (
    -- the long lists' dense rows, read whole (one hash join with the candidates:
    -- looked up one candidate at a time through the index, 30k candidates took
    -- 34 ms at 1M)
    SELECT d.segment_id, d.block, d.tfs, l.wt, p.dead
    FROM kw_long l JOIN kw_postings p USING (term)
    JOIN "pgc_diary".segment_dense d ON d.segment_id = p.segment_id AND d.term = p.term
    WHERE p.dense
)
