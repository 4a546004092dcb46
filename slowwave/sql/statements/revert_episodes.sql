-- Revert, 4: the episodes the run consolidated go back to pending as they were before it: not
-- consolidated, not gated, no progress, unclaimed, first claimed, scored (novelty) and their
-- words parsed only if another run's chunk held them. The attempts its failed chunks charged are taken back (and a quarantine they
-- caused lifted): not when an operator's release came after (it reset them), nor a
-- quarantine another run made later. Chunks it lost to
-- another run (conflicts) name episodes that are that run's: left alone.
WITH chunks AS (
    SELECT e AS id, c.status,
           -- after this chunk, another run's chunk took the episode (a quarantine now is
           -- that run's), or an operator released it (which reset its attempts)
           EXISTS (SELECT 1 FROM consolidation_chunks o
                   WHERE o.run_id <> %(run_id)s AND e = ANY(o.episode_ids)
                     AND o.recorded_at > c.recorded_at) AS taken_later,
           EXISTS (SELECT 1 FROM decision_log d
                   WHERE d.action = 'released' AND e = ANY(d.episode_ids)
                     AND d.recorded_at > c.recorded_at) AS released_later
    FROM consolidation_chunks c, unnest(c.episode_ids) AS e
    WHERE c.run_id = %(run_id)s AND c.status <> 'conflict'
), mine AS (
    SELECT id,
           bool_or(status = 'applied') AS applied,
           count(*) FILTER (WHERE status IN ('failed', 'quarantined') AND NOT released_later)
               AS charged,
           bool_or(status = 'quarantined' AND NOT released_later AND NOT taken_later)
               AS quarantined,
           bool_or(taken_later OR released_later) AS touched_later,
           -- no other run's chunk ever held the episode
           NOT EXISTS (SELECT 1 FROM consolidation_chunks o
                       WHERE o.run_id <> %(run_id)s AND chunks.id = ANY(o.episode_ids))
               AS only_this_run
    FROM chunks
    GROUP BY id
)
UPDATE episodic_memory ep
SET consolidated_at = CASE WHEN m.applied THEN NULL ELSE ep.consolidated_at END,
    consolidation_run_id = CASE WHEN m.applied THEN NULL ELSE ep.consolidation_run_id END,
    gated = CASE WHEN m.applied THEN false ELSE ep.gated END,
    consolidated_messages = CASE WHEN m.applied THEN 0 ELSE ep.consolidated_messages END,
    claimed_by = CASE WHEN m.applied THEN NULL ELSE ep.claimed_by END,
    claimed_until = CASE WHEN m.applied THEN NULL ELSE ep.claimed_until END,
    claim_shard = CASE WHEN m.applied THEN NULL ELSE ep.claim_shard END,
    attempts = greatest(ep.attempts - m.charged, 0),
    quarantined_at = CASE WHEN m.quarantined THEN NULL ELSE ep.quarantined_at END,
    last_error = CASE
        WHEN m.applied OR (m.charged > 0 AND ep.attempts <= m.charged AND NOT m.touched_later)
        THEN NULL
        ELSE ep.last_error END,
    first_claimed_at = CASE WHEN m.applied AND m.only_this_run THEN NULL
                            ELSE ep.first_claimed_at END,
    -- its words for search, parsed when its chunk was applied, unless another run's was first
    search_tsv = CASE WHEN m.applied AND m.only_this_run THEN NULL ELSE ep.search_tsv END,
    -- the novelty its chunks computed on opening (no other run's chunk held the episode)
    novelty = CASE WHEN m.only_this_run THEN NULL ELSE ep.novelty END
FROM mine m
WHERE ep.id = m.id
RETURNING ep.id
