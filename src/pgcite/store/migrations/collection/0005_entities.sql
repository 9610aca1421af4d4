-- Named entities per chunk (pgcite.store._entities). Chunks are immutable rows, so a
-- snapshot's entities -- those of its member chunks -- are frozen with it, like its postings.
-- `key` is the normalised name (titles, punctuation and case dropped: "Sir W. Penn" -> "w penn");
-- aliases map keys to one canonical key at query time.
CREATE TABLE {schema}.chunk_entities (
    chunk_pk bigint NOT NULL REFERENCES {schema}.chunks ON DELETE CASCADE,
    key      text NOT NULL,
    label    text NOT NULL,      -- the model's label of the first mention (PERSON, GPE, ...)
    mention  text NOT NULL,      -- the first mention in the chunk, as written
    mentions integer NOT NULL,   -- how often the chunk mentions it
    PRIMARY KEY (chunk_pk, key)
);
CREATE INDEX ON {schema}.chunk_entities (key);

-- Which entity model read each document version: NULL when none was available for the
-- collection's language (such a version has no entities; it is not "mentions nobody").
CREATE TABLE {schema}.entity_runs (
    version_pk bigint PRIMARY KEY REFERENCES {schema}.versions ON DELETE CASCADE,
    model      text
);

-- alias key -> canonical key: from a user's alias list ('user') or an initial matched to the
-- one full first name with that surname in the collection ('initials').
CREATE TABLE {schema}.entity_aliases (
    alias     text PRIMARY KEY,
    canonical text NOT NULL,
    origin    text NOT NULL CHECK (origin IN ('user', 'initials')),
    CHECK (alias <> canonical)
);
