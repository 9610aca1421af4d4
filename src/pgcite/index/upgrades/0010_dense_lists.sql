-- Dense term frequencies for a segment's commonest lists (docs/retrieval.md, "Large collections").
--
-- The exact keyword leg does not sum the postings of a long list whose bound cannot reach its
-- threshold; it only needs that term's weight in each of its candidates (retrieve/_sql.py,
-- _SKIPPING). Probing the list's postings for them reads every posting (at 1M chunks, 27-50 ms
-- for lists of 100k-360k postings). A list that holds at least 1/16 of the chunk_pks of the
-- 4000-wide blocks it touches costs no more as one byte per chunk_pk than as its postings
-- (16 bytes each: roaring bitmaps switch to dense containers at the same share), and then a
-- candidate's tf is one get_byte. Such lists also get their term frequencies here, one row per
-- block of 4000 chunk_pks (byte i: the tf of chunk_pk block * 4000 + i, 0 where the list lacks
-- it). Rows stay small and uncompressed in their page (STORAGE PLAIN): get_byte on a compressed
-- or TOASTed value would first expand all of it, once per call. A list with a tf above 255 (a
-- byte's range; a tsvector keeps at most 256 positions of a lexeme) is left sparse, and the leg
-- probes its postings as before. Like segment_blocks, the rows hold no statistics and never
-- change with the segment; a trigger on segment_postings fills them, so merges get them too.
CREATE TABLE {schema}.segment_dense (
    segment_id integer NOT NULL REFERENCES {schema}.segments ON DELETE CASCADE,
    term       text NOT NULL,
    block      bigint NOT NULL,  -- chunk_pk / 4000
    tfs        bytea NOT NULL,   -- 4000 bytes: two rows fill a page
    PRIMARY KEY (segment_id, term, block)
);
ALTER TABLE {schema}.segment_dense ALTER COLUMN tfs SET STORAGE PLAIN;

-- Make this segment's lists of at least p_min_postings postings dense where they hold at least
-- 1/p_ratio of the chunk_pks of the blocks they touch (tests densify every list of a tiny
-- corpus with (1, 4000)). A list made dense already is left as it is.
CREATE FUNCTION {schema}.densify(p_segment integer, p_min_postings integer DEFAULT 1024,
                                 p_ratio integer DEFAULT 16) RETURNS void
LANGUAGE sql AS $fn$
INSERT INTO {schema}.segment_dense (segment_id, term, block, tfs)
SELECT p.segment_id, p.term, x.block,
       -- each posting's byte after the zeros of the gap before it, then the zeros after the
       -- last (a row per posting, not per byte: 12.7 s -> 9.6 s for the 44 dense lists of 1M)
       (SELECT decode(string_agg(repeat('00', y.o - coalesce(y.prev, -1) - 1)
                                 || lpad(to_hex(y.tf), 2, '0'), '' ORDER BY y.o)
                      || repeat('00', 3999 - max(y.o)), 'hex')
        FROM (SELECT u.o, u.tf, lag(u.o) OVER (ORDER BY u.o) AS prev
              FROM unnest(x.offsets, x.tfs) AS u(o, tf)) y)
FROM {schema}.segment_postings p
-- the list's length from its block bounds (their trigger runs first, by name), which spares
-- expanding every short list's arrays to count them
JOIN {schema}.segment_blocks b USING (segment_id, term)
CROSS JOIN LATERAL (
    SELECT u.pk / 4000 AS block, array_agg(mod(u.pk, 4000)::integer) AS offsets,
           array_agg(u.tf) AS tfs
    FROM unnest(p.chunk_pks, p.tfs) AS u(pk, tf) GROUP BY 1) x
WHERE p.segment_id = p_segment AND b.postings >= p_min_postings
  AND (SELECT max(t) FROM unnest(p.tfs) AS t) <= 255
  AND b.postings::bigint * p_ratio
      >= 4000 * (SELECT count(DISTINCT pk / 4000) FROM unnest(p.chunk_pks) AS pk)
  AND NOT EXISTS (SELECT 1 FROM {schema}.segment_dense d
                  WHERE d.segment_id = p.segment_id AND d.term = p.term)
$fn$;

CREATE FUNCTION {schema}.segment_dense_fill() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM {schema}.densify(s.segment_id) FROM (SELECT DISTINCT segment_id FROM new_postings) s;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER segment_postings_dense AFTER INSERT ON {schema}.segment_postings
    REFERENCING NEW TABLE AS new_postings
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.segment_dense_fill();

-- Segments written before this migration.
SELECT {schema}.densify(segment_id) FROM {schema}.segments;
