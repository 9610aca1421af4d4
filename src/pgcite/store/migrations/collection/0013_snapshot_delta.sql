-- What a snapshot was built from (pgcite/store/_snapshots.py, build_snapshot): the snapshot it
-- started from and the sha256 of the versions it added and dropped. Together they name its
-- members exactly, so a build run again (after a crash, or of the same documents) finds it
-- without comparing member lists (at 1M members, a pass over the collection per candidate).
-- Snapshots built before have neither: a build equal to one of them makes a new snapshot.
ALTER TABLE {schema}.snapshots ADD COLUMN base_id integer, ADD COLUMN delta_sha256 bytea;
