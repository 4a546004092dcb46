-- Revert, 1: the facts the run ended (updated, invalidated, or merged into a new sentence by
-- the gray zone: a merge with a previous fact) hold again.
UPDATE semantic_memory s
SET invalid_at = NULL
FROM decision_log d
WHERE d.run_id = %(run_id)s
  AND d.action IN ('update', 'invalidate', 'merge')
  AND s.id = CASE WHEN d.action = 'invalidate' THEN d.fact_id ELSE d.previous_fact_id END
  AND s.created_by_run_id IS DISTINCT FROM %(run_id)s
  AND s.invalid_at IS NOT NULL
RETURNING s.id
