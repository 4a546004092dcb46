-- Revert, 5: the run's decisions and chunk records go; its row goes too, unless a fact it
-- wrote was kept (then it stays, marked reverted). Returns (decisions, chunks, run row kept).
WITH decisions AS (
    DELETE FROM decision_log WHERE run_id = %(run_id)s RETURNING id
), chunks AS (
    DELETE FROM consolidation_chunks WHERE run_id = %(run_id)s RETURNING id
), kept AS (
    UPDATE consolidation_runs SET status = 'reverted'
    WHERE id = %(run_id)s
      AND EXISTS (SELECT 1 FROM semantic_memory WHERE created_by_run_id = %(run_id)s)
    RETURNING id
), dropped AS (
    DELETE FROM consolidation_runs
    WHERE id = %(run_id)s
      AND NOT EXISTS (SELECT 1 FROM semantic_memory WHERE created_by_run_id = %(run_id)s)
    RETURNING id
)
SELECT (SELECT count(*) FROM decisions), (SELECT count(*) FROM chunks),
       (SELECT count(*) FROM kept)
