vec_near AS (
    SELECT c.chunk_pk, (embedding::vector(384)) <=> %(query_vector)s::vector(384) AS distance
    FROM "pgc_diary".chunks c
    WHERE c.embed_model = 'minilm@1'
      AND c.version_pk IN (SELECT version_pk FROM "pgc_diary".snapshot_members
                           WHERE snapshot_id = %(snapshot_id)s)
      AND true
      AND (SELECT set_config('hnsw.ef_search', %(ef_search)s, true)
                 || set_config('hnsw.iterative_scan', 'strict_order', true)) IS NOT NULL
    ORDER BY (embedding::vector(384)) <=> %(query_vector)s::vector(384)
    LIMIT 30
)
