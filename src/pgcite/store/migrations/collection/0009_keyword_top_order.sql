-- keyword_top (0007) exact under every plan the planner may choose.
--
-- Its threshold theta, the p_k-th best partial score among the candidates that pass the filter,
-- was read as "OFFSET p_k - 1 LIMIT 1" over a subquery sorted by score, with the filter applied
-- OUTSIDE that subquery as an EXISTS on chunks. SQL keeps a subquery's order only as far as the
-- outer query does not reorder it, and a semi-join may: once the tables had statistics (a small
-- collection after ANALYZE) the planner made the EXISTS a hash join that read the filtered chunks
-- and probed a hash of the sorted candidates (or a merge join, sorted by chunk_pk), so the rows
-- came out in chunk order and the row at OFFSET p_k - 1 was an arbitrary candidate's score. A
-- theta above the true one then pruned candidates of the true top p_k: fewer than p_k hits in
-- 19-22 of the 225 cases of each randomized corpus of tests/test_pruning.py, under every plan
-- it forces on analyzed tables and under none without statistics (why it had passed before the
-- builds analyzed). Unfiltered, the order held: nothing sat between the sort and the OFFSET.
--
-- Here the threshold query orders its own output (the inner sort stays: a nested-loop semi-join
-- keeps it, and then the planner needs no second sort and stops after p_k passing candidates),
-- and every array built from a set is built with an explicit order, so no result depends on a
-- plan. The function's signature, arguments and results are unchanged.

-- The exact BM25 top p_k of a snapshot for these lexemes: the same chunks and scores (ties by
-- chunk_pk) as summing every posting, reading only prefixes of the impact-ordered lists.
--
-- A threshold algorithm with MaxScore's skipping. Each round reads every list to its depth;
-- theta is the p_k-th best partial score (a lower bound of the p_k-th best score: weights are
-- positive); a chunk no prefix holds scores at most the sum, over its segment's lists, of the
-- best block bound past each prefix. Once that is below theta, no unseen chunk can enter the
-- top p_k; otherwise the lists with the largest remaining bounds (those whose bounds alone could
-- still reach theta, MaxScore's "essential" lists) read four times deeper and the round runs
-- again. Read to the end, a list's bound is 0, so the loop ends, at worst in exhaustive scoring.
-- Seen chunks whose partial score plus their unseen lists' bounds may still reach theta are
-- completed from their own tsvector (the source of the postings' tf), so every returned score
-- is the full one. Lists whose lengths sum to at most p_exhaustive are read whole at once
-- (rare terms: one round, no completion); longer ones start at p_first postings (tests start
-- small lists shallow with it, to reach the rounds a large collection needs).
--
-- p_filter: NULL, or a boolean SQL expression over the chunk row `c` (values inlined as
-- literals by the caller, pgcite.retrieve._sql). Then theta and the top p_k count only the
-- chunks that pass it, so a filtered leg is exact and never under-filled.
CREATE OR REPLACE FUNCTION {schema}.keyword_top(p_snapshot integer, p_terms text[], p_k integer,
                                     p_exhaustive integer DEFAULT 4096,
                                     p_filter text DEFAULT NULL, p_first integer DEFAULT 256)
RETURNS TABLE (hit_pk bigint, hit_score float8, rounds integer, postings_read bigint)
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_n float8; v_avgdl float8; v_k1 float8; v_b float8;
    l_seg integer[]; l_term text[]; l_len integer[]; l_idf float8[];
    l_depth integer[]; l_rem float8[];
    v_theta float8; v_bound float8; v_round integer := 0; v_read bigint; v_open bigint;
    -- the filter, on a candidate chunk `q` (one lookup per candidate, not per posting)
    v_where text := CASE WHEN p_filter IS NULL THEN ''
                         ELSE ' WHERE EXISTS (SELECT 1 FROM {schema}.chunks c'
                              ' WHERE c.chunk_pk = q.chunk_pk AND (' || p_filter || '))' END;
    -- the scored postings of one round: each list's prefix, live chunks only
    v_post text;
BEGIN
    SELECT coalesce(s.n_chunks, 0)::float8, coalesce(s.avg_length, 1), s.bm25_k1::float8,
           s.bm25_b::float8
    INTO v_n, v_avgdl, v_k1, v_b
    FROM {schema}.snapshots s WHERE s.snapshot_id = p_snapshot;
    -- the lists and each term's idf, as the exhaustive leg computes it (kw_idf)
    SELECT array_agg(g.segment_id ORDER BY g.segment_id, g.term),
           array_agg(g.term ORDER BY g.segment_id, g.term),
           array_agg(g.postings ORDER BY g.segment_id, g.term),
           array_agg(t.idf ORDER BY g.segment_id, g.term)
    INTO l_seg, l_term, l_len, l_idf
    FROM {schema}.snapshot_segments ss
    JOIN {schema}.segment_blocks g USING (segment_id)
    JOIN (SELECT x.term, ln(1 + (v_n - x.df + 0.5) / (x.df + 0.5)) AS idf
          FROM (SELECT b.term, (sum(b.postings) - coalesce(max(d.df), 0))::float8 AS df
                FROM {schema}.snapshot_segments s2
                JOIN {schema}.segment_blocks b USING (segment_id)
                LEFT JOIN {schema}.snapshot_deleted_df d
                  ON d.snapshot_id = p_snapshot AND d.term = b.term
                WHERE s2.snapshot_id = p_snapshot AND b.term = ANY(p_terms)
                GROUP BY b.term) x
          WHERE x.df > 0) t USING (term)
    WHERE ss.snapshot_id = p_snapshot AND g.term = ANY(p_terms);
    IF l_seg IS NULL THEN
        RETURN;
    END IF;
    IF (SELECT sum(x) FROM unnest(l_len) x) <= p_exhaustive THEN
        l_depth := l_len;
    ELSE
        l_depth := ARRAY(SELECT least(x, p_first) FROM unnest(l_len) WITH ORDINALITY AS u(x, o)
                         ORDER BY u.o);
    END IF;
    v_post := $q$
        SELECT l.segment_id, l.term, u.chunk_pk, u.len,
               l.idf * u.tf * ($5 + 1) / (u.tf + $5 * (1 - $6 + $6 * u.len / $7)) AS w
        FROM unnest($1, $2, $3, $4) AS l(segment_id, term, idf, depth)
        JOIN {schema}.segment_postings p USING (segment_id, term),
             unnest(p.chunk_pks[1:l.depth], p.tfs[1:l.depth], p.lengths[1:l.depth])
                 AS u(chunk_pk, tf, len)
        WHERE l.depth > 0 $q$;
    v_post := 'SELECT * FROM (' || v_post || ') post WHERE NOT EXISTS (SELECT 1 FROM'
              ' {schema}.snapshot_segments ss, unnest(ss.deleted) AS d(chunk_pk)'
              ' WHERE ss.snapshot_id = $8 AND ss.segment_id = post.segment_id'
              ' AND d.chunk_pk = post.chunk_pk)';
    LOOP
        v_round := v_round + 1;
        -- the best bound past each list's prefix (0 when read to the end)
        l_rem := ARRAY(
            SELECT coalesce((SELECT max(u.idf * b.mt * (v_k1 + 1)
                                        / (b.mt + v_k1 * (1 - v_b + v_b * b.ml / v_avgdl)))
                             FROM unnest(g.max_tfs, g.min_lengths) WITH ORDINALITY AS b(mt, ml, o)
                             WHERE u.depth < u.len AND b.o > u.depth / g.block_size), 0)
            FROM unnest(l_seg, l_term, l_idf, l_depth, l_len) WITH ORDINALITY
                 AS u(segment_id, term, idf, depth, len, o)
            JOIN {schema}.segment_blocks g USING (segment_id, term)
            ORDER BY u.o);
        -- a relative margin over the bounds: they and the scores round differently
        SELECT max(s) * (1 + 1e-9) INTO v_bound
        FROM (SELECT sum(r) AS s FROM unnest(l_seg, l_rem) AS x(seg, r) GROUP BY seg) y;
        EXIT WHEN v_bound = 0;
        -- The p_k-th best partial score among those that pass the filter. The ORDER BY after
        -- the filter is what makes it that: a join may return the sorted candidates in any
        -- order (0009). The sort inside (OFFSET 0 keeps it there) lets a nested-loop plan
        -- look up only as many candidates as it takes to find p_k that pass.
        EXECUTE 'SELECT q.partial FROM (SELECT chunk_pk, sum(w) AS partial FROM ('
                || v_post || ') post GROUP BY chunk_pk ORDER BY 2 DESC OFFSET 0) q'
                || v_where || ' ORDER BY q.partial DESC OFFSET $9 LIMIT 1'
            INTO v_theta
            USING l_seg, l_term, l_idf, l_depth, v_k1, v_b, v_avgdl, p_snapshot, p_k - 1;
        IF v_theta IS NOT NULL AND v_bound < v_theta THEN
            -- no unseen chunk can enter; but completing a seen one from its tsvector costs as
            -- much as reading ~50 postings (measured), so while many could still enter, the
            -- unfinished lists read deeper instead (a list read to the end needs no completion)
            EXECUTE 'WITH post AS (' || v_post || '), cand AS ('
                '    SELECT segment_id, chunk_pk, sum(w) AS partial, array_agg(term) AS seen'
                '    FROM post GROUP BY segment_id, chunk_pk'
                '), missing AS (SELECT c.partial, (SELECT sum(r.rem)'
                '    FROM unnest($1, $2, $9) AS r(segment_id, term, rem)'
                '    WHERE r.segment_id = c.segment_id AND r.rem > 0'
                '      AND r.term <> ALL(c.seen)) AS m FROM cand c'
                ') SELECT count(*) FROM missing WHERE m > 0 AND partial + m * (1 + 1e-9) >= $10'
                INTO v_open
                USING l_seg, l_term, l_idf, l_depth, v_k1, v_b, v_avgdl, p_snapshot, l_rem,
                      v_theta * (1 - 1e-9);
            EXIT WHEN v_open <= 4 * p_k;
            l_depth := ARRAY(SELECT CASE WHEN r > 0 THEN least(x, 4 * d) ELSE d END
                             FROM unnest(l_depth, l_len, l_rem) WITH ORDINALITY AS u(d, x, r, o)
                             ORDER BY u.o);
            CONTINUE;
        END IF;
        -- deepen the lists that could still carry an unseen chunk past theta: per segment,
        -- all but those with the smallest bounds whose sum stays below theta
        l_depth := ARRAY(
            SELECT CASE WHEN v_theta IS NOT NULL AND y.below < v_theta THEN y.depth
                        ELSE least(y.len, 4 * y.depth) END
            FROM (SELECT u.o, u.depth, u.len,
                         sum(u.rem) OVER (PARTITION BY u.seg ORDER BY u.rem, u.o) AS below
                  FROM unnest(l_seg, l_depth, l_len, l_rem) WITH ORDINALITY
                       AS u(seg, depth, len, rem, o)) y
            ORDER BY y.o);
    END LOOP;
    SELECT sum(least(d, x)) INTO v_read FROM unnest(l_depth, l_len) AS u(d, x);
    -- Complete: a candidate's partial score plus the bounds of the lists it was not seen in;
    -- those that may still reach theta get their full score from their tsvector.
    RETURN QUERY EXECUTE
        'WITH post AS (' || v_post || '), cand AS ('
        '    SELECT segment_id, chunk_pk, sum(w) AS partial, array_agg(term) AS seen,'
        '           max(len) AS len FROM post GROUP BY segment_id, chunk_pk'
        '), rem AS ('
        '    SELECT * FROM unnest($1, $2, $3, $10) AS r(segment_id, term, idf, rem)'
        '), bounded AS ('
        '    SELECT c.*, coalesce((SELECT sum(r.rem) FROM rem r WHERE r.segment_id = c.segment_id'
        '                          AND r.rem > 0 AND r.term <> ALL(c.seen)), 0) AS missing'
        '    FROM cand c'
        '), kept AS ('
        '    SELECT * FROM bounded q WHERE $9 IS NULL OR q.partial + q.missing * (1 + 1e-9) >= $9'
        '), passing AS ('
        '    SELECT * FROM kept q' || v_where ||
        '), scored AS ('
        '    SELECT b.chunk_pk, CASE WHEN b.missing = 0 THEN b.partial ELSE ('
        '        SELECT sum(r.idf * x.tf * ($5 + 1) / (x.tf + $5 * (1 - $6 + $6 * b.len / $7)))'
        '        FROM {schema}.chunks ch,'
        '             LATERAL (SELECT t.lexeme, cardinality(t.positions) AS tf'
        '                      FROM unnest(ch.tsv) AS t) x'
        '        JOIN rem r ON r.term = x.lexeme AND r.segment_id = b.segment_id'
        '        WHERE ch.chunk_pk = b.chunk_pk) END AS score'
        '    FROM passing b'
        ')'
        ' SELECT chunk_pk, score::float8, $11, $12 FROM scored'
        ' ORDER BY score DESC, chunk_pk LIMIT $13'
        USING l_seg, l_term, l_idf, l_depth, v_k1, v_b, v_avgdl, p_snapshot,
              v_theta * (1 - 1e-9), l_rem, v_round, v_read, p_k;
END
$fn$;
