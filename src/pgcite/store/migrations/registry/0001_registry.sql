-- The registry: which collections exist, what they were made with, and shared caches.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE pgcite.collections (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,47}$'),
    schema_name text NOT NULL UNIQUE,
    ts_config   text NOT NULL,
    embedder    jsonb NOT NULL,          -- EmbedderSpec: id, version, dim, prefixes, max tokens
    settings    jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Embeddings keyed by model (id@version) and the sha256 of the exact text embedded, so that
-- re-ingesting unchanged content, or resuming a killed ingest, embeds nothing twice.
CREATE TABLE pgcite.embedding_cache (
    model_key   text NOT NULL,
    text_sha256 bytea NOT NULL,
    embedding   vector NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model_key, text_sha256)
);
