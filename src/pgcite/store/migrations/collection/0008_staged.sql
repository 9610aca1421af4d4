-- Staged ingest (docs/snapshots.md, "Parallel ingest"): several workers store document versions
-- (chunks, vectors and, for the versions a worker wrote, a segment with their postings) in
-- their own transactions WITHOUT building a snapshot; one build later makes a single snapshot
-- of the active one plus everything staged. A staged version is in no snapshot, so search never
-- sees it; this table is what keeps gc from removing it (and its segment) meanwhile.

CREATE TABLE {schema}.staged (
    -- Staging order: of two staged versions of one document, the higher wins (a re-staged
    -- version takes a new number, as a later ingest would win).
    seq         bigserial NOT NULL UNIQUE,
    version_pk  bigint PRIMARY KEY REFERENCES {schema}.versions,
    document_id text NOT NULL,
    -- The segment that indexes this version (written by the worker that stored it), or NULL
    -- when the version existed already: the build then indexes it in a segment of its own.
    segment_id  integer REFERENCES {schema}.segments,
    staged_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON {schema}.staged (segment_id);
