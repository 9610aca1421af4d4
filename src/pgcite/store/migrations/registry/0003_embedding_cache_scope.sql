-- The embedding cache is scoped to one collection. Shared, it was a side channel: an admin of
-- collection A learned whether an exact guessed text exists in collection B from an upload's
-- "cached" count (and from its speed). The unscoped rows are dropped, not guessed an owner: they
-- are only a cache (every chunk keeps its own vector), refilled by each collection's next ingest.
DELETE FROM pgcite.embedding_cache;
ALTER TABLE pgcite.embedding_cache
    ADD COLUMN collection text NOT NULL
        REFERENCES pgcite.collections (name) ON DELETE CASCADE,
    DROP CONSTRAINT embedding_cache_pkey,
    ADD PRIMARY KEY (collection, model_key, text_sha256);
