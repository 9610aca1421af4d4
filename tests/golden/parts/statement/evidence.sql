evidence AS (
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
)
