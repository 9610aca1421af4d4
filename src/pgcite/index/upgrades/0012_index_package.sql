-- The keyword index became one package (pgcite/index): its segment writer, statistics and
-- dense rows are statements composed there with the one BM25 formula of _bm25.py, so the
-- plpgsql functions and triggers that wrote them go. So does keyword_top, the pruned keyword
-- leg (0007, 0009): exact but slower than summing every posting (docs/retrieval.md, "Pruned
-- keyword leg (removed)"). A segment counts its documents (finish_snapshot's N of documents
-- without a pass over the snapshot's members), filled in here for the segments there are.
DROP TRIGGER IF EXISTS segment_postings_blocks ON {schema}.segment_postings;
DROP TRIGGER IF EXISTS segment_postings_dense ON {schema}.segment_postings;
DROP FUNCTION IF EXISTS {schema}.segment_blocks_fill();
DROP FUNCTION IF EXISTS {schema}.segment_dense_fill();
DROP FUNCTION IF EXISTS {schema}.densify(integer, integer, integer);
DROP FUNCTION IF EXISTS {schema}.index_segment(integer, float8, float8);
DROP FUNCTION IF EXISTS {schema}.finish_snapshot(integer);
DROP FUNCTION IF EXISTS {schema}.keyword_top(integer, text[], integer, integer, text, integer);

ALTER TABLE {schema}.segments ADD COLUMN n_documents integer NOT NULL DEFAULT 0;
UPDATE {schema}.segments g SET n_documents = c.n
FROM (SELECT sv.segment_id, count(*) AS n FROM {schema}.segment_versions sv
      JOIN {schema}.versions v USING (version_pk) WHERE v.n_chunks > 0
      GROUP BY sv.segment_id) c
WHERE c.segment_id = g.segment_id;
