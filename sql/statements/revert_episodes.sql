-- Revert, 4: the episodes the run consolidated go back to pending as they were before it: not
-- consolidated, not gated, no progress, unclaimed, first claimed only if another run's chunk
-- held them. The attempts its failed chunks charged are taken back (and a quarantine they
-- caused lifted) without touching what a later run made of those episodes. Chunks it lost to
-- another run (conflicts) name episodes that are that run's: left alone.
WITH mine AS (
    SELECT e AS id,
           bool_or(c.status = 'applied') AS applied,
           count(*) FILTER (WHERE c.status IN ('failed', 'quarantined')) AS charged,
           bool_or(c.status = 'quarantined') AS quarantined
    FROM consolidation_chunks c, unnest(c.episode_ids) AS e
    WHERE c.run_id = %(run_id)s AND c.status <> 'conflict'
    GROUP BY e
)
UPDATE episodic_memory ep
SET consolidated_at = CASE WHEN m.applied THEN NULL ELSE ep.consolidated_at END,
    consolidation_run_id = CASE WHEN m.applied THEN NULL ELSE ep.consolidation_run_id END,
    gated = CASE WHEN m.applied THEN false ELSE ep.gated END,
    consolidated_messages = CASE WHEN m.applied THEN 0 ELSE ep.consolidated_messages END,
    claimed_by = CASE WHEN m.applied THEN NULL ELSE ep.claimed_by END,
    claimed_until = CASE WHEN m.applied THEN NULL ELSE ep.claimed_until END,
    attempts = greatest(ep.attempts - m.charged, 0),
    quarantined_at = CASE WHEN m.quarantined THEN NULL ELSE ep.quarantined_at END,
    last_error = CASE
        WHEN m.applied OR (m.charged > 0 AND ep.attempts <= m.charged) THEN NULL
        ELSE ep.last_error END,
    first_claimed_at = CASE
        WHEN m.applied AND NOT EXISTS (SELECT 1 FROM consolidation_chunks o
                                       WHERE o.run_id <> %(run_id)s AND ep.id = ANY(o.episode_ids))
        THEN NULL
        ELSE ep.first_claimed_at END
FROM mine m
WHERE ep.id = m.id
RETURNING ep.id
