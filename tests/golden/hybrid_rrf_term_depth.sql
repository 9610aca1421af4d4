WITH
kw_terms AS (
    SELECT coalesce(array_agg(lexeme), '{}') AS terms
    FROM unnest(to_tsvector('english'::regconfig, %(ranking_text)s))
), kw_scored AS (
    SELECT p.chunk_pk, sum(p.weight) AS score
    FROM "pgc_diary".postings po CROSS JOIN kw_terms,
         unnest(po.chunk_pks[1:1000], po.weights[1:1000]) AS p(chunk_pk, weight)
    WHERE po.snapshot_id = %(snapshot_id)s AND po.term = ANY(kw_terms.terms)
    GROUP BY p.chunk_pk
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
),
vec_near AS (
    SELECT c.chunk_pk, (embedding::vector(384)) <=> %(query_vector)s::vector(384) AS distance
    FROM "pgc_diary".chunks c
    WHERE c.embed_model = 'minilm@1'
      AND c.version_pk IN (SELECT version_pk FROM "pgc_diary".snapshot_members
                           WHERE snapshot_id = %(snapshot_id)s)
      AND true
    ORDER BY (embedding::vector(384)) <=> %(query_vector)s::vector(384)
    LIMIT 30
), vec AS (
    SELECT chunk_pk, distance, row_number() OVER (ORDER BY distance, chunk_pk) AS rank,
           coalesce(((1 - distance) - min((1 - distance)) OVER ()) / nullif(max((1 - distance)) OVER () - min((1 - distance)) OVER (), 0), 1.0) AS norm
    FROM vec_near
)
SELECT coalesce(k.chunk_pk, v.chunk_pk) AS chunk_pk,
       coalesce(%(w_keyword)s / (%(rrf_k)s + k.rank), 0) + coalesce(%(w_vector)s / (%(rrf_k)s + v.rank), 0) AS fused,
       k.rank AS kw_rank, k.score AS kw_score, v.rank AS vec_rank, v.distance,
       -- over every candidate, before the LIMIT: abstention must not depend on top_k
       1 - min(v.distance) OVER () AS best_similarity,
       c.id, c.document_id, c.citation, c.author, c.corpus, c.date_start, c.date_end,
       c.source, c.locator, c.title, c.body, c.metadata
FROM kw k FULL OUTER JOIN vec v ON v.chunk_pk = k.chunk_pk
JOIN "pgc_diary".chunks c ON c.chunk_pk = coalesce(k.chunk_pk, v.chunk_pk)
ORDER BY fused DESC, coalesce(v.rank, 1e9), coalesce(k.rank, 1e9), c.chunk_pk
LIMIT 10
