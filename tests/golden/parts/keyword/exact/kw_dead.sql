kw_dead AS (
    SELECT ss.segment_id, d.chunk_pk
    FROM "pgc_diary".snapshot_segments ss, unnest(ss.deleted) AS d(chunk_pk)
    WHERE ss.snapshot_id = %(snapshot_id)s
)
