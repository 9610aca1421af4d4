-- A new collection's schema, squashed: what steps 0001-0013 leave (pgcite/store/_migrations.py;
-- tests/test_upgrade.py compares the two). {schema} and {tsconfig} are filled in with psycopg.sql
-- (Identifier and Literal), and the index placeholder below with the keyword index's tables
-- (pgcite/index/schema.sql); nothing else is ever formatted into this text. Later changes are
-- steps numbered after 0013.

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
    -- what the version says about its document and where each value came from (dates, title,
    -- author, corpus, metadata; "sources": "catalogue", "flag", "file" ...): ingest/_provenance.py
    provenance   jsonb,
    UNIQUE (document_id, content_hash)
);

-- The unit of citation. `embedding` has no fixed dimension so that a model change (a new
-- dimension) can live beside the old one; each model gets its own partial HNSW index over
-- `embedding::vector(dim)`, created by pgcite. `context`: the LLM-written sentence that
-- situates a chunk in its document (contextual = "llm"), part of what was embedded, kept so
-- that a re-embed embeds exactly the same text; NULL otherwise.
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
    context        text,
    UNIQUE (version_pk, ordinal),
    CHECK (date_end IS NULL OR date_start IS NULL OR date_end >= date_start)
);
-- Vectors inline (they do not compress): a distance computed over a chunk then needs no TOAST
-- lookup. Bodies stay TOASTable.
ALTER TABLE {schema}.chunks ALTER COLUMN embedding SET STORAGE PLAIN;
CREATE INDEX ON {schema}.chunks USING gin (tsv);
CREATE INDEX ON {schema}.chunks (corpus, date_end);
CREATE INDEX ON {schema}.chunks USING gin (metadata jsonb_path_ops);
CREATE INDEX ON {schema}.chunks (version_pk);

-- A snapshot is an immutable set of document versions, embedded with one model; its members
-- and BM25 statistics are its keyword index's (below). base_id and delta_sha256 say what it
-- was built from: the snapshot it started from and the sha256 of its versions added and
-- dropped, which name its members exactly (a build run again finds it by them).
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
    note            text,
    base_id         integer,
    delta_sha256    bytea
);
COMMENT ON COLUMN {schema}.snapshots.avg_length IS
    'BM25 average chunk length: lexeme occurrences per chunk, over chunks with at least one';

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

-- Named entities per chunk (pgcite.store._entities). Chunks are immutable rows, so a
-- snapshot's entities -- those of its member chunks -- are frozen with it.
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

-- The keyword index: segments, postings, a snapshot's segments and statistics, its members.
{index}

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
