-- Claim the pending episodes of due conversations for one run.
-- Due: at least %(threshold)s pending episodes, or one with surprise >= %(flashbulb)s.
-- A conversation is taken whole or not at all: skipped while any of its pending episodes is
-- under another run's live lease, and guarded by a transaction-level advisory lock so that two
-- claimers running this statement at the same moment cannot split it between them.
WITH due AS (
    SELECT conversation_id, min(start_at) AS oldest
    FROM episodic_memory
    WHERE consolidated_at IS NULL AND quarantined_at IS NULL
      AND (%(conversations)s::text[] IS NULL OR conversation_id = ANY(%(conversations)s::text[]))
    GROUP BY conversation_id
    HAVING (count(*) >= %(threshold)s OR max(surprise) >= %(flashbulb)s)
       AND bool_and(claimed_until IS NULL OR claimed_until < now())
    ORDER BY oldest, conversation_id
    LIMIT %(max_conversations)s
), locked AS (
    SELECT conversation_id FROM due
    WHERE pg_try_advisory_xact_lock(hashtextextended('slowwave:claim:' || conversation_id, 0))
)
-- The locked conversations as one array probed through the pending index: a join against the
-- CTE was planned as a nested loop (quadratic) on a table not yet analysed after a bulk load.
UPDATE episodic_memory e
SET claimed_by = %(run_id)s, claimed_until = now() + make_interval(secs => %(lease_s)s)
WHERE e.conversation_id = ANY (ARRAY(SELECT conversation_id FROM locked))
  AND e.consolidated_at IS NULL AND e.quarantined_at IS NULL
  AND (e.claimed_until IS NULL OR e.claimed_until < now())
RETURNING e.id, e.conversation_id, e.external_key, e.messages, e.summary, e.surprise,
          e.start_at, e.end_at
