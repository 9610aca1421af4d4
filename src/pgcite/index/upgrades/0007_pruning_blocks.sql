-- Block upper bounds for the impact-ordered postings (docs/retrieval.md, "Large collections").
-- This step also created keyword_top, the pruned keyword leg, removed since (0012 drops it where
-- it exists; docs/retrieval.md, "Pruned keyword leg (removed)").
--
-- Each segment's postings of a term are impact-ordered (0004). Here every such list gets block
-- upper bounds: per block of BLOCK postings, its largest term frequency and its smallest chunk
-- length. BM25's per-posting weight idf * tf (k1 + 1) / (tf + k1 (1 - b + b len / avgdl)) grows
-- with tf and shrinks with len, so a block's (max tf, min len) bounds every posting in it under
-- ANY snapshot's idf and avgdl: the bounds hold no statistics and never change, like the segment.
-- They are filled by a trigger on segment_postings, so whatever writes postings (index_segment,
-- merges) gets them without a change there.
CREATE TABLE {schema}.segment_blocks (
    segment_id  integer NOT NULL REFERENCES {schema}.segments ON DELETE CASCADE,
    term        text NOT NULL,
    postings    integer NOT NULL,   -- the list's length (its df in the segment)
    block_size  integer NOT NULL,
    max_tfs     integer[] NOT NULL, -- per block, in list order
    min_lengths integer[] NOT NULL,
    PRIMARY KEY (segment_id, term)
);

CREATE FUNCTION {schema}.segment_blocks_fill() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    -- 64 postings a block: a 76k-posting list has ~1,200 bounds, cheap to scan at query time,
    -- and the first round of a query reads a few blocks of each list
    INSERT INTO {schema}.segment_blocks
        (segment_id, term, postings, block_size, max_tfs, min_lengths)
    SELECT n.segment_id, n.term, cardinality(n.chunk_pks), 64, b.max_tfs, b.min_lengths
    FROM new_postings n CROSS JOIN LATERAL (
        SELECT array_agg(x.mt ORDER BY x.blk) AS max_tfs, array_agg(x.ml ORDER BY x.blk) AS min_lengths
        FROM (SELECT (u.o - 1) / 64 AS blk, max(u.tf) AS mt, min(u.len) AS ml
              FROM unnest(n.tfs, n.lengths) WITH ORDINALITY AS u(tf, len, o)
              GROUP BY 1) x) b;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER segment_postings_blocks AFTER INSERT ON {schema}.segment_postings
    REFERENCING NEW TABLE AS new_postings
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.segment_blocks_fill();

-- Postings written before this migration.
INSERT INTO {schema}.segment_blocks
    (segment_id, term, postings, block_size, max_tfs, min_lengths)
SELECT n.segment_id, n.term, cardinality(n.chunk_pks), 64, b.max_tfs, b.min_lengths
FROM {schema}.segment_postings n CROSS JOIN LATERAL (
    SELECT array_agg(x.mt ORDER BY x.blk) AS max_tfs, array_agg(x.ml ORDER BY x.blk) AS min_lengths
    FROM (SELECT (u.o - 1) / 64 AS blk, max(u.tf) AS mt, min(u.len) AS ml
          FROM unnest(n.tfs, n.lengths) WITH ORDINALITY AS u(tf, len, o)
          GROUP BY 1) x) b;
