kw_scored AS (
    SELECT k.chunk_pk, k.score + coalesce((
               SELECT sum(l.wt * x.tf / (x.tf + st.base + st.slope * k.len))
               FROM (SELECT t.lexeme, cardinality(t.positions) AS tf FROM unnest(c.tsv) AS t) x
               JOIN kw_long l ON l.term = x.lexeme), 0) AS score
    FROM kw_cand k JOIN "pgc_diary".chunks c USING (chunk_pk) CROSS JOIN kw_stats st
    WHERE (SELECT skip FROM kw_skip) AND (SELECT tsv FROM kw_lookup)
    UNION ALL
    SELECT u.chunk_pk, max(u.partial) + sum(u.w) FROM (
        SELECT chunk_pk, score AS partial, 0::float8 AS w FROM kw_head
        UNION ALL
        SELECT v.chunk_pk, c.score, v.w FROM (SELECT u.chunk_pk, u.len, u.wt * u.tf / (u.tf + (SELECT base FROM kw_stats) + (SELECT slope FROM kw_stats) * u.len) AS w
        FROM (SELECT p.segment_id, p.dead, i.wt, unnest(p.chunk_pks) AS chunk_pk, unnest(p.tfs) AS tf, unnest(p.lengths) AS len
              FROM kw_postings p JOIN kw_idf i USING (term) WHERE i.postings >= 32768 AND NOT p.dense) u
        WHERE (NOT u.dead OR NOT EXISTS (SELECT 1 FROM kw_dead d WHERE d.segment_id = u.segment_id AND d.chunk_pk = u.chunk_pk))) v JOIN kw_cand c USING (chunk_pk)
        UNION ALL
        SELECT x.chunk_pk, x.score, x.wt * x.tf / (x.tf + (SELECT base FROM kw_stats) + (SELECT slope FROM kw_stats) * x.len) FROM (
            SELECT c.chunk_pk, c.len, c.score, d.wt, d.segment_id, d.dead,
                   get_byte(d.tfs, mod(c.chunk_pk, 4000)::integer) AS tf
            FROM kw_dense d JOIN kw_cand c ON c.chunk_pk / 4000 = d.block) x
        WHERE x.tf > 0 AND (NOT x.dead OR NOT EXISTS (SELECT 1 FROM kw_dead d WHERE d.segment_id = x.segment_id AND d.chunk_pk = x.chunk_pk))) u
    WHERE (SELECT skip FROM kw_skip) AND NOT (SELECT tsv FROM kw_lookup)
    GROUP BY u.chunk_pk
    UNION ALL
    SELECT x.chunk_pk, sum(x.score) FROM (
        SELECT chunk_pk, len, score FROM kw_short
        UNION ALL
        SELECT u.chunk_pk, u.len, u.wt * u.tf / (u.tf + (SELECT base FROM kw_stats) + (SELECT slope FROM kw_stats) * u.len) AS w
        FROM (SELECT p.segment_id, p.dead, i.wt, unnest(p.chunk_pks) AS chunk_pk, unnest(p.tfs) AS tf, unnest(p.lengths) AS len
              FROM kw_postings p JOIN kw_idf i USING (term) WHERE i.postings >= 32768) u
        WHERE (NOT u.dead OR NOT EXISTS (SELECT 1 FROM kw_dead d WHERE d.segment_id = u.segment_id AND d.chunk_pk = u.chunk_pk))) x
    WHERE (SELECT present AND NOT skip FROM kw_skip)
    GROUP BY x.chunk_pk
    UNION ALL
    SELECT x.chunk_pk, sum(x.w) AS score
    FROM (SELECT u.chunk_pk, u.len, u.wt * u.tf / (u.tf + (SELECT base FROM kw_stats) + (SELECT slope FROM kw_stats) * u.len) AS w
        FROM (SELECT p.segment_id, p.dead, i.wt, unnest(p.chunk_pks) AS chunk_pk, unnest(p.tfs) AS tf, unnest(p.lengths) AS len
              FROM kw_postings p JOIN kw_idf i USING (term)) u
        WHERE NOT (SELECT present FROM kw_skip) AND (NOT u.dead OR NOT EXISTS (SELECT 1 FROM kw_dead d WHERE d.segment_id = u.segment_id AND d.chunk_pk = u.chunk_pk))) x
    GROUP BY x.chunk_pk
)
