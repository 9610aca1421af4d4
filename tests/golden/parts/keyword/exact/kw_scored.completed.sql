SELECT k.chunk_pk, k.score + coalesce((
               SELECT sum(l.wt * x.tf / (x.tf + st.base + st.slope * k.len))
               FROM (SELECT t.lexeme, cardinality(t.positions) AS tf FROM unnest(c.tsv) AS t) x
               JOIN kw_long l ON l.term = x.lexeme), 0) AS score
    FROM kw_cand k JOIN "pgc_diary".chunks c USING (chunk_pk) CROSS JOIN kw_stats st
    WHERE (SELECT skip FROM kw_skip) AND (SELECT tsv FROM kw_lookup)
