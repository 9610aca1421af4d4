-- What each document version says about its document and where each value came from
-- (ingest/_provenance.py, record): its dates, title, author, corpus and metadata, and under
-- "sources" the source of each ("catalogue", "flag", "file" ...). A re-ingest reads it to keep
-- what the user gave (a flag, a catalogue row, a --map key) over what a file says, and to
-- report each field it changes. NULL for versions stored before it existed: they keep the old
-- rule (a stored value stays where the run gives none).
ALTER TABLE {schema}.versions ADD COLUMN IF NOT EXISTS provenance jsonb;
