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
