kw_long AS MATERIALIZED (
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
)
