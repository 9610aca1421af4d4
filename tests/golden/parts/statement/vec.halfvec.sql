vec AS (
    SELECT chunk_pk, distance, row_number() OVER (ORDER BY distance, chunk_pk) AS rank,
           coalesce(((1 - distance) - min((1 - distance)) OVER ()) / nullif(max((1 - distance)) OVER () - min((1 - distance)) OVER (), 0), 1.0) AS norm
    FROM vec_near
)
