kw AS (
    -- ranked after the LIMIT, so the sort above can be a top-N heapsort
    SELECT *, row_number() OVER (ORDER BY score DESC, chunk_pk) AS rank,
           coalesce((score - min(score) OVER ()) / nullif(max(score) OVER () - min(score) OVER (), 0), 1.0) AS norm
    FROM kw_top
)
