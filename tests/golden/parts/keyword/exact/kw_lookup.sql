kw_lookup AS MATERIALIZED (
    -- complete the candidates from their tsvectors where that costs less than
    -- probing the long lists for them (their sparse postings and their dense rows)
    SELECT (SELECT count(*) FROM kw_cand) * 100
           < (SELECT sum(sparse) * 0.3 + sum(dense) * 4 FROM kw_long)
           AS tsv
)
