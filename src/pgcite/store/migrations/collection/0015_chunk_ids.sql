-- Passages are asked for by their id (a citation's check, the neighbours an answer reads, the
-- entity boost's mentions, the inspector's passage page): without an index each lookup read
-- every chunk row, ~3-10 ms on SciFact's 10k chunks for the entity boost's 50 ids and a full
-- table pass at a million. Ids repeat across a document's versions, so it is not unique.
CREATE INDEX ON {schema}.chunks (id);
