kw_idf AS MATERIALIZED (
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
)
