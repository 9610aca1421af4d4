-- API keys for the HTTP service, each scoped to one collection and one role. Only the sha256 of
-- a token is stored (the token is shown once, at creation); a key goes with its collection.
CREATE TABLE pgcite.api_keys (
    key_id     text PRIMARY KEY,              -- public handle, also the token's prefix
    key_sha256 bytea NOT NULL UNIQUE,
    collection text NOT NULL REFERENCES pgcite.collections (name) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('reader', 'admin')),
    note       text,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX ON pgcite.api_keys (collection);
