kw_short AS MATERIALIZED (
    SELECT x.chunk_pk, max(x.len) AS len, sum(x.w) AS score
    FROM (SELECT u.chunk_pk, u.len, u.wt * u.tf / (u.tf + (SELECT base FROM kw_stats) + (SELECT slope FROM kw_stats) * u.len) AS w
        FROM (SELECT p.segment_id, p.dead, i.wt, unnest(p.chunk_pks) AS chunk_pk, unnest(p.tfs) AS tf, unnest(p.lengths) AS len
              FROM kw_postings p JOIN kw_idf i USING (term) WHERE i.postings < 32768) u
        WHERE (NOT u.dead OR NOT EXISTS (SELECT 1 FROM kw_dead d WHERE d.segment_id = u.segment_id AND d.chunk_pk = u.chunk_pk))) x
    GROUP BY x.chunk_pk
)
