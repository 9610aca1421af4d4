kw_skip AS MATERIALIZED (
    -- (a relative margin: the bounds and the scores are summed in other orders)
    SELECT l.present, l.present
           AND coalesce((SELECT bd.rest * (1 + 1e-9) < bd.theta FROM kw_bound bd), false) AS skip
    FROM (SELECT EXISTS (SELECT 1 FROM kw_long) AS present) l
)
