-- An upgrade step for collections made before the baseline (pgcite/store/_migrations.py),
-- kept as it shipped: its index_segment and finish_snapshot wrote this version's layout, with
-- their own copy of the impact order; 0012 drops them (the writer and the one BM25 formula are
-- pgcite/index/_writer.py and _bm25.py now).
--
-- The BM25 index as Lucene-style segments (docs/snapshots.md). A segment indexes a set of
-- document versions once, with raw term frequencies and chunk lengths (no statistics of any
-- snapshot in it), so it never changes and many snapshots share it. A snapshot is a set of
-- segments, each with the chunks of it that the snapshot no longer holds (replaced or removed
-- versions), plus its own collection statistics: N and the average length on the snapshot row,
-- and the document frequencies of its deleted chunks (a term's df = the lengths of its postings
-- in the snapshot's segments minus that). BM25 is scored at query time from these, so a new
-- snapshot writes what changed, not the whole collection. Replaces the per-snapshot `postings`.

CREATE TABLE {schema}.segments (
    segment_id      serial PRIMARY KEY,
    n_chunks        integer NOT NULL DEFAULT 0,   -- chunks indexed
    n_nonempty      integer NOT NULL DEFAULT 0,   -- of them, those with at least one lexeme
    total_length    bigint NOT NULL DEFAULT 0,    -- their lengths (lexeme occurrences), summed
    metadata_counts jsonb NOT NULL DEFAULT '{{}}', -- metadata key -> JSON type -> chunks
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE {schema}.segment_versions (
    segment_id integer NOT NULL REFERENCES {schema}.segments ON DELETE CASCADE,
    version_pk bigint NOT NULL REFERENCES {schema}.versions,
    PRIMARY KEY (segment_id, version_pk)
);
CREATE INDEX ON {schema}.segment_versions (version_pk);

-- One row per term: its chunks ordered by the segment's own BM25 impact (highest first, so that
-- term_depth can take a prefix), with each chunk's term frequency and length.
CREATE TABLE {schema}.segment_postings (
    segment_id integer NOT NULL REFERENCES {schema}.segments ON DELETE CASCADE,
    term       text NOT NULL,
    chunk_pks  bigint[] NOT NULL,
    tfs        integer[] NOT NULL,
    lengths    integer[] NOT NULL,
    PRIMARY KEY (segment_id, term)
);

CREATE TABLE {schema}.snapshot_segments (
    snapshot_id integer NOT NULL REFERENCES {schema}.snapshots ON DELETE CASCADE,
    segment_id  integer NOT NULL REFERENCES {schema}.segments,
    deleted     bigint[] NOT NULL DEFAULT '{{}}',  -- chunks of the segment the snapshot lacks
    PRIMARY KEY (snapshot_id, segment_id)
);
CREATE INDEX ON {schema}.snapshot_segments (segment_id);

CREATE TABLE {schema}.snapshot_deleted_df (
    snapshot_id integer NOT NULL REFERENCES {schema}.snapshots ON DELETE CASCADE,
    term        text NOT NULL,
    df          integer NOT NULL,
    PRIMARY KEY (snapshot_id, term)
);

-- A member version is always live in one of its snapshot's segments, whose segment_versions row
-- references it (and snapshot_segments references the segment): that chain keeps gc from
-- removing it. The direct foreign key was 3/4 of the time of writing a snapshot's member list
-- (one check and row lock per member: 4.6 of 6.2 s for 100k members, measured).
ALTER TABLE {schema}.snapshot_members DROP CONSTRAINT IF EXISTS snapshot_members_version_pk_fkey;

COMMENT ON COLUMN {schema}.snapshots.avg_length IS
    'BM25 average chunk length: lexeme occurrences per chunk, over chunks with at least one';

-- Index a segment's versions (segment_versions filled first). Term frequencies and lengths come
-- from the same tsvector the GIN index uses: exactly PostgreSQL's analyser for the language.
CREATE FUNCTION {schema}.index_segment(p_segment integer, p_k1 float8, p_b float8)
RETURNS void LANGUAGE sql AS $fn$
WITH members AS (
    SELECT c.chunk_pk, c.tsv, c.metadata FROM {schema}.chunks c
    JOIN {schema}.segment_versions v USING (version_pk) WHERE v.segment_id = p_segment
), tf AS (
    SELECT m.chunk_pk, t.lexeme AS term, cardinality(t.positions) AS tf
    FROM members m, unnest(m.tsv) AS t
), dl AS (
    SELECT chunk_pk, sum(tf)::integer AS dl FROM tf GROUP BY chunk_pk
), stats AS (
    SELECT (SELECT count(*) FROM members) AS n, count(*) AS nonempty,
           coalesce(sum(dl), 0) AS total, coalesce(avg(dl), 1)::float8 AS avgdl FROM dl
), fields AS (
    SELECT coalesce(jsonb_object_agg(key, types), '{{}}'::jsonb) AS f FROM (
        SELECT key, jsonb_object_agg(typ, n) AS types FROM (
            SELECT e.key, jsonb_typeof(e.value) AS typ, count(*) AS n
            FROM members, jsonb_each(members.metadata) AS e GROUP BY 1, 2) kt
        GROUP BY key) k
), counted AS (
    UPDATE {schema}.segments s SET n_chunks = st.n, n_nonempty = st.nonempty,
           total_length = st.total, metadata_counts = (SELECT f FROM fields)
    FROM stats st WHERE s.segment_id = p_segment
)
INSERT INTO {schema}.segment_postings (segment_id, term, chunk_pks, tfs, lengths)
SELECT p_segment, term,
       array_agg(chunk_pk ORDER BY impact DESC, chunk_pk),
       array_agg(tf ORDER BY impact DESC, chunk_pk),
       array_agg(dl ORDER BY impact DESC, chunk_pk)
FROM (SELECT tf.term, tf.chunk_pk, tf.tf, dl.dl,
             tf.tf / (tf.tf + p_k1 * (1 - p_b + p_b * dl.dl / st.avgdl)) AS impact
      FROM tf JOIN dl USING (chunk_pk) CROSS JOIN stats st) w
GROUP BY term
$fn$;

-- A snapshot's statistics from its segments and deleted chunks (snapshot_segments filled
-- first); work in proportion to its segments and deleted chunks, never to the collection.
-- Marks it ready. Run again after a merge, it gives the same numbers.
CREATE FUNCTION {schema}.finish_snapshot(p_snapshot integer)
RETURNS void LANGUAGE sql AS $fn$
DELETE FROM {schema}.snapshot_deleted_df WHERE snapshot_id = p_snapshot;
WITH dead AS (
    SELECT c.chunk_pk, c.tsv FROM {schema}.snapshot_segments ss, unnest(ss.deleted) AS d(pk)
    JOIN {schema}.chunks c ON c.chunk_pk = d.pk WHERE ss.snapshot_id = p_snapshot
)
INSERT INTO {schema}.snapshot_deleted_df (snapshot_id, term, df)
SELECT p_snapshot, t.lexeme, count(*) FROM dead, unnest(dead.tsv) AS t GROUP BY t.lexeme;
WITH segs AS (
    SELECT g.* FROM {schema}.snapshot_segments ss JOIN {schema}.segments g USING (segment_id)
    WHERE ss.snapshot_id = p_snapshot
), dead AS (
    SELECT c.chunk_pk, c.metadata,
           (SELECT coalesce(sum(cardinality(t.positions)), 0) FROM unnest(c.tsv) AS t) AS dl
    FROM {schema}.snapshot_segments ss, unnest(ss.deleted) AS d(pk)
    JOIN {schema}.chunks c ON c.chunk_pk = d.pk WHERE ss.snapshot_id = p_snapshot
), totals AS (
    SELECT (SELECT coalesce(sum(n_chunks), 0) FROM segs) - (SELECT count(*) FROM dead) AS n,
           (SELECT coalesce(sum(n_nonempty), 0) FROM segs)
               - (SELECT count(*) FROM dead WHERE dl > 0) AS nonempty,
           (SELECT coalesce(sum(total_length), 0) FROM segs)
               - (SELECT coalesce(sum(dl), 0) FROM dead) AS total
), field_counts AS (
    SELECT key, typ, sum(n) AS n FROM (
        SELECT k.key, t.key AS typ, t.value::bigint AS n
        FROM segs, jsonb_each(segs.metadata_counts) AS k, jsonb_each_text(k.value) AS t
        UNION ALL
        SELECT e.key, jsonb_typeof(e.value), -count(*)
        FROM dead, jsonb_each(dead.metadata) AS e GROUP BY 1, 2) x
    GROUP BY key, typ HAVING sum(n) > 0
), fields AS (
    SELECT coalesce(jsonb_object_agg(key, types), '{{}}'::jsonb) AS f FROM (
        SELECT key, jsonb_agg(to_jsonb(typ) ORDER BY typ) AS types FROM field_counts
        GROUP BY key) k
)
UPDATE {schema}.snapshots SET
    state = 'ready',
    finalized_at = coalesce(finalized_at, now()),
    n_documents = (SELECT count(DISTINCT v.document_id) FROM {schema}.snapshot_members m
                   JOIN {schema}.versions v USING (version_pk)
                   WHERE m.snapshot_id = p_snapshot AND v.n_chunks > 0),
    n_chunks = (SELECT n FROM totals),
    avg_length = (SELECT CASE WHEN nonempty > 0 THEN total::float8 / nonempty ELSE 1 END
                  FROM totals),
    metadata_fields = (SELECT f FROM fields)
WHERE snapshot_id = p_snapshot;
$fn$;

-- Existing snapshots: one segment indexes every version any of them holds; each snapshot gets it
-- with the chunks of the versions it lacks deleted, and its statistics (recomputed the same way
-- as for a new snapshot, so old and new snapshots score alike).
DO $do$
DECLARE
    seg integer;
    snap integer;
BEGIN
    IF EXISTS (SELECT 1 FROM {schema}.snapshot_members) THEN
        INSERT INTO {schema}.segments DEFAULT VALUES RETURNING segment_id INTO seg;
        INSERT INTO {schema}.segment_versions (segment_id, version_pk)
        SELECT DISTINCT seg, version_pk FROM {schema}.snapshot_members;
        PERFORM {schema}.index_segment(seg, 1.2, 0.75);
        INSERT INTO {schema}.snapshot_segments (snapshot_id, segment_id, deleted)
        SELECT s.snapshot_id, seg, ARRAY(
            SELECT c.chunk_pk FROM {schema}.chunks c
            JOIN {schema}.segment_versions sv ON sv.version_pk = c.version_pk
                                               AND sv.segment_id = seg
            WHERE NOT EXISTS (SELECT 1 FROM {schema}.snapshot_members m
                              WHERE m.snapshot_id = s.snapshot_id
                                AND m.version_pk = c.version_pk)
            ORDER BY c.chunk_pk)
        FROM {schema}.snapshots s;
        FOR snap IN SELECT snapshot_id FROM {schema}.snapshots WHERE state = 'ready' LOOP
            PERFORM {schema}.finish_snapshot(snap);
        END LOOP;
    END IF;
END
$do$;

DROP TABLE {schema}.postings;
