kw_terms AS (
    SELECT coalesce(array_agg(lexeme), '{}') AS terms
    FROM unnest(to_tsvector('english'::regconfig, %(ranking_text)s))
)
