-- Exhibits (docs/exhibits.md): visitors reach one at /exhibit/{name}, so a name is unique across
-- collections. The definitions and their versions live in the collection's own schema
-- ({schema}.exhibits); this directory names the collection each one is on, and binds the
-- visitor keys to it (deleting the exhibit deletes its keys).
CREATE TABLE pgcite.exhibit_names (
    name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    collection text NOT NULL REFERENCES pgcite.collections (name) ON DELETE CASCADE
);
CREATE INDEX ON pgcite.exhibit_names (collection);

-- A visitor key is bound to one exhibit: it may ask that exhibit, under its settings, and
-- nothing else (service/_visitor.py).
ALTER TABLE pgcite.api_keys
    ADD COLUMN exhibit text REFERENCES pgcite.exhibit_names (name) ON DELETE CASCADE,
    DROP CONSTRAINT api_keys_role_check,
    ADD CONSTRAINT api_keys_role_check CHECK (role IN ('reader', 'admin', 'visitor')),
    ADD CONSTRAINT api_keys_visitor_exhibit CHECK ((role = 'visitor') = (exhibit IS NOT NULL));
