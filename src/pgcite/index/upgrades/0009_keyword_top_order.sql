-- This step re-created keyword_top (0007), the pruned keyword leg, so that its threshold did
-- not depend on a plan's row order. The leg was removed (docs/retrieval.md, "Pruned keyword leg
-- (removed)"; 0012 drops the function where it exists), so the step does nothing now; its
-- version stays, so that collections keep one sequence of versions.
SELECT 1;
