-- What an entity model (spaCy NER) found in a chunk's text, keyed like the embedding cache by
-- (collection, model, sha256 of the exact text read): a document re-ingested as a new version
-- (renamed, re-dated, one paragraph edited) has its unchanged chunks' entities read from here
-- instead of by the model again (~7.5 ms of a core a chunk). `found` is the model's output as
-- it is, [[label, text], ...] in order: which labels are kept and how names become keys are
-- applied when it is read, so changing those needs no re-read. Per collection, as the
-- embedding cache is (0003_embedding_cache_scope.sql): shared, it would tell one collection's
-- admin whether a text exists in another. The rows go with their collection.
CREATE TABLE pgcite.entity_cache (
    collection  text NOT NULL REFERENCES pgcite.collections (name) ON DELETE CASCADE,
    model       text NOT NULL,           -- package@version of the pipeline that read the text
    text_sha256 bytea NOT NULL,
    found       jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection, model, text_sha256)
);
