WITH kw_terms AS (
    SELECT coalesce(array_agg(lexeme), '{}') AS terms
    FROM unnest(to_tsvector('english'::regconfig, %(ranking_text)s))
), kw AS (
    SELECT NULL::bigint AS chunk_pk, NULL::float8 AS score, NULL::bigint AS rank, NULL::float8 AS norm WHERE false
), evidence AS (
    SELECT NULL::float8 AS coverage, NULL::float8 AS best_coverage, NULL::bigint AS unknown_names, NULL::integer AS query_terms
), vec_near AS (
    SELECT c.chunk_pk, (embedding::halfvec(384)) <=> %(query_vector)s::halfvec(384) AS distance
    FROM "pgc_diary".chunks c
    WHERE c.embed_model = 'minilm@1'
      AND c.version_pk IN (SELECT version_pk FROM "pgc_diary".snapshot_members
                           WHERE snapshot_id = %(snapshot_id)s)
      AND (c.corpus = ANY(%(f0)s)) AND (c.date_end <= %(f1)s)
      AND (SELECT set_config('hnsw.ef_search', %(ef_search)s, true)
                 || set_config('hnsw.iterative_scan', 'strict_order', true)) IS NOT NULL
    ORDER BY (embedding::halfvec(384)) <=> %(query_vector)s::halfvec(384)
    LIMIT 30
), vec AS (
    SELECT chunk_pk, distance, row_number() OVER (ORDER BY distance, chunk_pk) AS rank,
           coalesce(((1 - distance) - min((1 - distance)) OVER ()) / nullif(max((1 - distance)) OVER () - min((1 - distance)) OVER (), 0), 1.0) AS norm
    FROM vec_near
)
SELECT f.*, (SELECT terms FROM kw_terms) AS lexemes,
       c.id, c.document_id, c.citation, c.author, c.corpus, c.date_start, c.date_end,
       c.source, c.locator, c.title, c.body, c.metadata
FROM (SELECT coalesce(k.chunk_pk, v.chunk_pk) AS chunk_pk,
             (%(w_keyword)s * coalesce(k.norm, 0) + %(w_vector)s * coalesce(v.norm, 0)) / (%(w_keyword)s + %(w_vector)s) AS fused,
             k.rank AS kw_rank, k.score AS kw_score, v.rank AS vec_rank, v.distance,
             1 - min(v.distance) OVER () AS "best_similarity",
             max(v.distance) FILTER (WHERE v.rank <= 5) OVER () - min(v.distance) OVER () AS "similarity_gap",
             count(*) FILTER (WHERE k.rank <= 5 AND v.rank <= 5) OVER () AS "leg_overlap",
             e.coverage AS "coverage",
             e.best_coverage AS "best_coverage",
             e.unknown_names AS "unknown_names",
             e.query_terms AS "query_terms"
      FROM kw k FULL OUTER JOIN vec v ON v.chunk_pk = k.chunk_pk
      CROSS JOIN evidence e
      ORDER BY fused DESC, coalesce(v.rank, 1e9), coalesce(k.rank, 1e9), coalesce(k.chunk_pk, v.chunk_pk)
      LIMIT 10) f
JOIN "pgc_diary".chunks c USING (chunk_pk)
ORDER BY f.fused DESC, coalesce(f.vec_rank, 1e9), coalesce(f.kw_rank, 1e9), f.chunk_pk
