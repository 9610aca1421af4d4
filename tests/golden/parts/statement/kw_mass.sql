kw_mass AS (
    -- all the query's idf mass: a lexeme the snapshot lacks counts with df = 0
    SELECT (SELECT coalesce(sum(idf), 0) FROM kw_idf)
           + (cardinality(t.terms) - (SELECT count(*) FROM kw_idf)) * ln(1 + (st.n - 0 + 0.5) / (0 + 0.5))
           AS total
    FROM kw_terms t CROSS JOIN kw_stats st
)
