kw_top AS (
    SELECT k.chunk_pk, k.score::float8 AS score
    FROM (SELECT * FROM kw_scored ORDER BY score DESC, chunk_pk
    LIMIT CASE WHEN (SELECT count(*) FROM (
                         SELECT 1 FROM (SELECT chunk_pk FROM kw_scored
                                        ORDER BY score DESC, chunk_pk LIMIT 1024) k
                         JOIN "pgc_diary".chunks c USING (chunk_pk) WHERE c.date_end <= %(cutoff)s  LIMIT 30) z) >= 30 THEN 1024 END) k JOIN "pgc_diary".chunks c USING (chunk_pk) WHERE c.date_end <= %(cutoff)s
    ORDER BY k.score DESC, k.chunk_pk
    LIMIT 30
)
