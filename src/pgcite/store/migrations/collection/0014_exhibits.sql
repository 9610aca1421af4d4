-- Exhibits (docs/exhibits.md): every definition of an exhibit is a new row, its version; the
-- newest row of a name is the one in force, unless it records the exhibit's deletion. They go
-- with the collection (its schema), as its snapshots do.
CREATE TABLE {schema}.exhibits (
    name       text NOT NULL,
    version    integer NOT NULL CHECK (version >= 1),
    settings   jsonb NOT NULL,      -- ExhibitSettings
    deleted    boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, version)
);

-- The page images of scans (docs/exhibits.md, "Scanned pages"): each page OCR read, downscaled
-- and re-encoded at ingest, stored with its document version in the transaction that stores
-- the version's chunks, and removed with it. A citation of an OCR'd passage shows its page with
-- the passage's block outlined; the blocks' boxes (chunk metadata 'ocr') are in the coordinates
-- of the page OCR read (ocr_width x ocr_height), the image may be smaller.
CREATE TABLE {schema}.page_images (
    version_pk bigint NOT NULL REFERENCES {schema}.versions ON DELETE CASCADE,
    page       integer NOT NULL CHECK (page >= 1),
    media_type text NOT NULL,
    width      integer NOT NULL,
    height     integer NOT NULL,
    ocr_width  integer NOT NULL,
    ocr_height integer NOT NULL,
    data       bytea NOT NULL,
    PRIMARY KEY (version_pk, page)
);
