kw_bound AS (
    SELECT (SELECT sum(ub) FROM kw_long) AS rest,
           (SELECT min(score) FROM kw_head HAVING count(*) >= 30) AS theta
)
