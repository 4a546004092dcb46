-- Revert, 4: the run's episodes go back to pending as they were before it: not consolidated,
-- not gated, no progress, unclaimed; the attempts its failed chunks charged are taken back
-- (and a quarantine they caused lifted); first claimed only if another run's chunk held them.
WITH mine AS (
    SELECT e AS id,
           count(*) FILTER (WHERE c.status IN ('failed', 'quarantined')) AS charged,
           bool_or(c.status = 'quarantined') AS quarantined
    FROM consolidation_chunks c, unnest(c.episode_ids) AS e
    WHERE c.run_id = %(run_id)s
    GROUP BY e
)
UPDATE episodic_memory ep
SET consolidated_at = NULL,
    consolidation_run_id = NULL,
    gated = false,
    consolidated_messages = 0,
    claimed_by = NULL,
    claimed_until = NULL,
    attempts = greatest(ep.attempts - m.charged, 0),
    quarantined_at = CASE WHEN m.quarantined THEN NULL ELSE ep.quarantined_at END,
    last_error = CASE WHEN m.charged > 0 OR ep.consolidation_run_id = %(run_id)s THEN NULL
                      ELSE ep.last_error END,
    first_claimed_at = CASE
        WHEN EXISTS (SELECT 1 FROM consolidation_chunks o
                     WHERE o.run_id <> %(run_id)s AND ep.id = ANY(o.episode_ids))
        THEN ep.first_claimed_at END
FROM mine m
WHERE ep.id = m.id
RETURNING ep.id
