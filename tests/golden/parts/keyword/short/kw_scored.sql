kw_scored AS (
    SELECT x.chunk_pk, sum(x.w) AS score
    FROM (SELECT u.chunk_pk, u.len, u.wt * u.tf / (u.tf + (SELECT base FROM kw_stats) + (SELECT slope FROM kw_stats) * u.len) AS w
        FROM (SELECT p.segment_id, p.dead, i.wt, unnest(p.chunk_pks) AS chunk_pk, unnest(p.tfs) AS tf, unnest(p.lengths) AS len
              FROM kw_postings p JOIN kw_idf i USING (term)) u) x
    GROUP BY x.chunk_pk
)
