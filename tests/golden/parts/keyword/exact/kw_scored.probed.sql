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
