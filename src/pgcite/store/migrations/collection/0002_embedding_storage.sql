-- Keep vectors inline (they do not compress): a distance computed over a chunk then needs no
-- TOAST lookup. Bodies stay TOASTable. Only affects rows written from now on.
ALTER TABLE {schema}.chunks ALTER COLUMN embedding SET STORAGE PLAIN;
