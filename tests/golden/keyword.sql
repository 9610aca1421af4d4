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
), kw_long AS MATERIALIZED (
    SELECT b.term, i.wt, i.postings, i.idf * max(m.bound) AS ub,
           coalesce(sum(b.postings) FILTER (WHERE NOT p.dense), 0) AS sparse,
           sum(r.blocks) AS dense
    FROM "pgc_diary".snapshot_segments ss JOIN "pgc_diary".segment_blocks b USING (segment_id)
    JOIN kw_idf i USING (term) JOIN kw_postings p USING (segment_id, term)
    CROSS JOIN kw_stats st,
         LATERAL (SELECT max((st.k1 + 1) * x.mt / (x.mt + st.base + st.slope * x.ml)) FROM unnest(b.max_tfs, b.min_lengths) AS x(mt, ml)) m(bound),
         LATERAL (SELECT count(*) AS blocks FROM "pgc_diary".segment_dense d
                  WHERE p.dense AND d.segment_id = p.segment_id AND d.term = p.term) r
    WHERE ss.snapshot_id = %(snapshot_id)s AND i.postings >= 32768
    GROUP BY b.term, i.idf, i.wt, i.postings
), kw_short AS MATERIALIZED (
    SELECT x.chunk_pk, max(x.len) AS len, sum(x.w) AS score
    FROM (SELECT u.chunk_pk, u.len, u.wt * u.tf / (u.tf + (SELECT base FROM kw_stats) + (SELECT slope FROM kw_stats) * u.len) AS w
        FROM (SELECT p.segment_id, p.dead, i.wt, unnest(p.chunk_pks) AS chunk_pk, unnest(p.tfs) AS tf, unnest(p.lengths) AS len
              FROM kw_postings p JOIN kw_idf i USING (term) WHERE i.postings < 32768) u
        WHERE (NOT u.dead OR NOT EXISTS (SELECT 1 FROM kw_dead d WHERE d.segment_id = u.segment_id AND d.chunk_pk = u.chunk_pk))) x
    GROUP BY x.chunk_pk
), kw_head AS MATERIALIZED (
    -- the fetch best partial scores of chunks that pass the filters; theta is the last
    SELECT k.chunk_pk, k.score FROM (SELECT * FROM kw_short ORDER BY score DESC, chunk_pk
    LIMIT CASE WHEN (SELECT count(*) FROM (
                         SELECT 1 FROM (SELECT chunk_pk FROM kw_short
                                        ORDER BY score DESC, chunk_pk LIMIT 1024) k
                         JOIN "pgc_diary".chunks c USING (chunk_pk) WHERE (c.corpus = ANY(%(f0)s)) AND (c.date_end <= %(f1)s)  LIMIT 30) z) >= 30 THEN 1024 END) k JOIN "pgc_diary".chunks c USING (chunk_pk) WHERE (c.corpus = ANY(%(f0)s)) AND (c.date_end <= %(f1)s)
    ORDER BY k.score DESC, k.chunk_pk LIMIT 30
), kw_bound AS (
    SELECT (SELECT sum(ub) FROM kw_long) AS rest,
           (SELECT min(score) FROM kw_head HAVING count(*) >= 30) AS theta
), kw_skip AS MATERIALIZED (
    -- (a relative margin: the bounds and the scores are summed in other orders)
    SELECT l.present, l.present
           AND coalesce((SELECT bd.rest * (1 + 1e-9) < bd.theta FROM kw_bound bd), false) AS skip
    FROM (SELECT EXISTS (SELECT 1 FROM kw_long) AS present) l
), kw_cand AS MATERIALIZED (
    SELECT k.chunk_pk, k.len, k.score FROM kw_short k CROSS JOIN kw_bound bd
    WHERE k.score + bd.rest >= bd.theta * (1 - 1e-9)
), kw_dense AS MATERIALIZED (
    -- the long lists' dense rows, read whole (one hash join with the candidates:
    -- looked up one candidate at a time through the index, 30k candidates took
    -- 34 ms at 1M)
    SELECT d.segment_id, d.block, d.tfs, l.wt, p.dead
    FROM kw_long l JOIN kw_postings p USING (term)
    JOIN "pgc_diary".segment_dense d ON d.segment_id = p.segment_id AND d.term = p.term
    WHERE p.dense
), kw_lookup AS MATERIALIZED (
    -- complete the candidates from their tsvectors where that costs less than
    -- probing the long lists for them (their sparse postings and their dense rows)
    SELECT (SELECT count(*) FROM kw_cand) * 100
           < (SELECT sum(sparse) * 0.3 + sum(dense) * 4 FROM kw_long)
           AS tsv
), kw_scored AS (
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
), kw_top AS (
    SELECT k.chunk_pk, k.score::float8 AS score
    FROM (SELECT * FROM kw_scored ORDER BY score DESC, chunk_pk
    LIMIT CASE WHEN (SELECT count(*) FROM (
                         SELECT 1 FROM (SELECT chunk_pk FROM kw_scored
                                        ORDER BY score DESC, chunk_pk LIMIT 1024) k
                         JOIN "pgc_diary".chunks c USING (chunk_pk) WHERE (c.corpus = ANY(%(f0)s)) AND (c.date_end <= %(f1)s)  LIMIT 30) z) >= 30 THEN 1024 END) k JOIN "pgc_diary".chunks c USING (chunk_pk) WHERE (c.corpus = ANY(%(f0)s)) AND (c.date_end <= %(f1)s)
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
), vec AS (
    SELECT NULL::bigint AS chunk_pk, NULL::float8 AS distance, NULL::bigint AS rank, NULL::float8 AS norm WHERE false
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
