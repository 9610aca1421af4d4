-- One schema per collection. {schema} and {tsconfig} are filled in with psycopg.sql
-- (Identifier and Literal); nothing else is ever formatted into this text.

CREATE SCHEMA {schema};

-- A document version is immutable: a changed source (or chunking/embedding setup) gives a new
-- content_hash and so a new version; an unchanged one is found and reused.
CREATE TABLE {schema}.versions (
    version_pk   bigserial PRIMARY KEY,
    document_id  text NOT NULL,
    content_hash text NOT NULL,
    source       text,
    n_chunks     integer NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (document_id, content_hash)
);

-- The unit of citation. `embedding` has no fixed dimension so that a model change (a new
-- dimension) can live beside the old one; each model gets its own partial HNSW index over
-- `embedding::vector(dim)`, created by pgcite.
CREATE TABLE {schema}.chunks (
    chunk_pk       bigserial PRIMARY KEY,
    version_pk     bigint NOT NULL REFERENCES {schema}.versions ON DELETE CASCADE,
    id             text NOT NULL,
    document_id    text NOT NULL,
    ordinal        integer NOT NULL,
    corpus         text,
    date_start     date,
    date_end       date,
    author         text,
    source         text,
    locator        text,
    citation       text NOT NULL,
    title          text,
    body           text NOT NULL,
    metadata       jsonb NOT NULL DEFAULT '{{}}',
    tsv            tsvector GENERATED ALWAYS AS (
                       setweight(to_tsvector({tsconfig}::regconfig, coalesce(title, '')), 'A')
                       || to_tsvector({tsconfig}::regconfig, body)) STORED,
    embedding      vector NOT NULL,
    embed_model    text NOT NULL,
    corpus_version text,
    content_hash   text NOT NULL,
    UNIQUE (version_pk, ordinal),
    CHECK (date_end IS NULL OR date_start IS NULL OR date_end >= date_start)
);
CREATE INDEX ON {schema}.chunks USING gin (tsv);
CREATE INDEX ON {schema}.chunks (corpus, date_end);
CREATE INDEX ON {schema}.chunks USING gin (metadata jsonb_path_ops);
CREATE INDEX ON {schema}.chunks (version_pk);

-- A snapshot is an immutable set of document versions, embedded with one model.
CREATE TABLE {schema}.snapshots (
    snapshot_id     serial PRIMARY KEY,
    state           text NOT NULL DEFAULT 'building'
                    CHECK (state IN ('building', 'ready', 'failed')),
    embed_model     text NOT NULL,
    embed_dim       integer NOT NULL,
    ts_config       text NOT NULL,
    corpus_version  text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    finalized_at    timestamptz,
    n_documents     integer,
    n_chunks        integer,
    avg_length      double precision,
    bm25_k1         real,
    bm25_b          real,
    metadata_fields jsonb,      -- key -> the JSON types seen in this snapshot, for filter checks
    evaluation      jsonb,
    note            text
);

CREATE TABLE {schema}.snapshot_members (
    snapshot_id integer NOT NULL REFERENCES {schema}.snapshots ON DELETE CASCADE,
    version_pk  bigint NOT NULL REFERENCES {schema}.versions,
    PRIMARY KEY (snapshot_id, version_pk)
);
CREATE INDEX ON {schema}.snapshot_members (version_pk);

-- BM25 postings, precomputed per snapshot (its statistics are frozen with it): one row per
-- term, chunks ordered by descending weight, weight = idf * saturated, length-normalised tf.
CREATE TABLE {schema}.postings (
    snapshot_id integer NOT NULL REFERENCES {schema}.snapshots ON DELETE CASCADE,
    term        text NOT NULL,
    chunk_pks   bigint[] NOT NULL,
    weights     real[] NOT NULL,
    PRIMARY KEY (snapshot_id, term)
);

-- Exactly one active snapshot (or none yet).
CREATE TABLE {schema}.active (
    singleton    boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    snapshot_id  integer NOT NULL REFERENCES {schema}.snapshots,
    previous_id  integer REFERENCES {schema}.snapshots,
    activated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE {schema}.activations (
    at          timestamptz NOT NULL DEFAULT now(),
    snapshot_id integer NOT NULL,
    previous_id integer,
    forced      boolean NOT NULL DEFAULT false,
    detail      jsonb
);
