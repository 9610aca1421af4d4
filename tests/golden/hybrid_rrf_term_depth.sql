WITH kw_terms AS (
    SELECT coalesce(array_agg(lexeme), '{}') AS terms
    FROM unnest(to_tsvector('english'::regconfig, %(ranking_text)s))
), kw_stats AS (
    -- BM25's length norm as base + slope * len (pgcite/index/_bm25.py)
    SELECT n, k1, k1 * (1 - b) AS base, k1 * b / avgdl AS slope
    FROM (SELECT coalesce(n_chunks, 0)::float8 AS n, coalesce(avg_length, 1) AS avgdl,
                 bm25_k1::float8 AS k1, bm25_b::float8 AS b
          FROM "pgc_diary".snapshots WHERE snapshot_id = %(snapshot_id)s) s
), kw_idf AS MATERIALIZED (
    -- the idf of each query lexeme the snapshot holds, once per lexeme (inlined, it
    -- was evaluated per posting, in numeric: 15 of 18 ms of a 100k-chunk query),
    -- and the factor of its postings' weights
    SELECT q.term, q.idf, q.idf * (q.k1 + 1) AS wt, q.postings
    FROM (SELECT t.term, ln(1 + (st.n - t.df + 0.5) / (t.df + 0.5)) AS idf, st.k1, t.postings
          FROM (SELECT b.term, sum(b.postings) AS postings,
                       (sum(b.postings) - coalesce(max(d.df), 0))::float8 AS df
                FROM "pgc_diary".snapshot_segments ss JOIN "pgc_diary".segment_blocks b USING (segment_id)
                CROSS JOIN kw_terms
                LEFT JOIN "pgc_diary".snapshot_deleted_df d
                  ON d.snapshot_id = %(snapshot_id)s AND d.term = b.term
                WHERE ss.snapshot_id = %(snapshot_id)s AND b.term = ANY(kw_terms.terms)
                GROUP BY b.term) t CROSS JOIN kw_stats st
          WHERE t.df > 0) q
), kw_postings AS MATERIALIZED (
    SELECT ss.segment_id, cardinality(ss.deleted) > 0 AS dead, p.term, p.chunk_pks,
           p.tfs, p.lengths, EXISTS (SELECT 1 FROM "pgc_diary".segment_dense d
                              WHERE d.segment_id = p.segment_id AND d.term = p.term) AS dense
    FROM "pgc_diary".snapshot_segments ss JOIN "pgc_diary".segment_postings p USING (segment_id)
    CROSS JOIN kw_terms
    WHERE ss.snapshot_id = %(snapshot_id)s AND p.term = ANY(kw_terms.terms)
), kw_dead AS (
    SELECT ss.segment_id, d.chunk_pk
    FROM "pgc_diary".snapshot_segments ss, unnest(ss.deleted) AS d(chunk_pk)
    WHERE ss.snapshot_id = %(snapshot_id)s
), kw_scored AS (
    SELECT x.chunk_pk, sum(x.w) AS score
    FROM (SELECT u.chunk_pk, u.len, u.wt * u.tf / (u.tf + (SELECT base FROM kw_stats) + (SELECT slope FROM kw_stats) * u.len) AS w
        FROM (SELECT p.segment_id, p.dead, i.wt, unnest(p.chunk_pks[1:1000]) AS chunk_pk, unnest(p.tfs[1:1000]) AS tf, unnest(p.lengths[1:1000]) AS len
              FROM kw_postings p JOIN kw_idf i USING (term)) u
        WHERE (NOT u.dead OR NOT EXISTS (SELECT 1 FROM kw_dead d WHERE d.segment_id = u.segment_id AND d.chunk_pk = u.chunk_pk))) x
    GROUP BY x.chunk_pk
), kw_top AS (
    SELECT k.chunk_pk, k.score::float8 AS score
    FROM kw_scored k
    ORDER BY k.score DESC, k.chunk_pk
    LIMIT 30
), kw AS (
    -- ranked after the LIMIT, so the sort above can be a top-N heapsort
    SELECT *, row_number() OVER (ORDER BY score DESC, chunk_pk) AS rank,
           coalesce((score - min(score) OVER ()) / nullif(max(score) OVER () - min(score) OVER (), 0), 1.0) AS norm
    FROM kw_top
), kw_mass AS (
    -- all the query's idf mass: a lexeme the snapshot lacks counts with df = 0
    SELECT (SELECT coalesce(sum(idf), 0) FROM kw_idf)
           + (cardinality(t.terms) - (SELECT count(*) FROM kw_idf)) * ln(1 + (st.n - 0 + 0.5) / (0 + 0.5))
           AS total
    FROM kw_terms t CROSS JOIN kw_stats st
), evidence AS (
    SELECT (SELECT coalesce(sum(idf), 0) FROM kw_idf) / nullif(m.total, 0) AS coverage,
           -- (the best hit's lexemes an initplan: as a join filter they were
           -- read from its tsvector once per query lexeme)
           (SELECT coalesce(sum(i.idf), 0) FROM kw_idf i
            WHERE i.term = ANY((SELECT tsvector_to_array(c.tsv) FROM "pgc_diary".chunks c
                                WHERE c.chunk_pk = (SELECT chunk_pk FROM kw WHERE rank = 1))::text[])) / nullif(m.total, 0) AS best_coverage,
           -- a name is unknown when the snapshot's segments hold it in no live chunk
           (SELECT count(*) FROM unnest(to_tsvector('english'::regconfig, %(names_text)s)) n
            WHERE coalesce((SELECT sum(b.postings)
                            FROM "pgc_diary".snapshot_segments ss
                            JOIN "pgc_diary".segment_blocks b USING (segment_id)
                            WHERE ss.snapshot_id = %(snapshot_id)s AND b.term = n.lexeme), 0)
                  <= coalesce((SELECT d.df FROM "pgc_diary".snapshot_deleted_df d
                               WHERE d.snapshot_id = %(snapshot_id)s
                                 AND d.term = n.lexeme), 0)) AS unknown_names,
           (SELECT cardinality(terms) FROM kw_terms) AS query_terms
    FROM kw_mass m
), vec_near AS (
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
), vec AS (
    SELECT chunk_pk, distance, row_number() OVER (ORDER BY distance, chunk_pk) AS rank,
           coalesce(((1 - distance) - min((1 - distance)) OVER ()) / nullif(max((1 - distance)) OVER () - min((1 - distance)) OVER (), 0), 1.0) AS norm
    FROM vec_near
)
SELECT f.*, (SELECT terms FROM kw_terms) AS lexemes,
       c.id, c.document_id, c.citation, c.author, c.corpus, c.date_start, c.date_end,
       c.source, c.locator, c.title, c.body, c.metadata
FROM (SELECT coalesce(k.chunk_pk, v.chunk_pk) AS chunk_pk,
             coalesce(%(w_keyword)s / (%(rrf_k)s + k.rank), 0) + coalesce(%(w_vector)s / (%(rrf_k)s + v.rank), 0) AS fused,
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
