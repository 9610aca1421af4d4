kw_postings AS MATERIALIZED (
    SELECT ss.segment_id, cardinality(ss.deleted) > 0 AS dead, p.term, p.chunk_pks,
           p.tfs, p.lengths, EXISTS (SELECT 1 FROM "pgc_diary".segment_dense d
                              WHERE d.segment_id = p.segment_id AND d.term = p.term) AS dense
    FROM "pgc_diary".snapshot_segments ss JOIN "pgc_diary".segment_postings p USING (segment_id)
    CROSS JOIN kw_terms
    WHERE ss.snapshot_id = %(snapshot_id)s AND p.term = ANY(kw_terms.terms)
)
