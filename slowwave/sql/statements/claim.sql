-- Claim the pending episodes of due conversations for one run.
-- Due (slowwave_due, migration 0005): at least %(threshold)s pending episodes, one with
-- surprise >= %(flashbulb)s, one that an earlier run already claimed (a crashed or failed
-- run's tail) or that a request closed (migration 0032: a run asked for that died before it
-- consolidated), or one recorded more than %(due_after_s)s seconds ago. With %(everything)s (a
-- backfill, or a run that names its conversations) every pending episode is due.
-- An episode still open is not taken: its last message is younger than %(open_s)s seconds (the
-- segmentation gap) by the wall clock, so the conversation may go on in it (ingest_segment),
-- unless a request closed it (slowwave_episode_closed, migration 0032).
-- With %(quiet_s)s (the soon deployment) a conversation is due only once it is quiet: none of
-- its episodes ended within that many seconds (slowwave_quiet, migration 0029).
-- A conversation is taken whole or not at all: skipped while any of its pending episodes is
-- under another run's live lease, and guarded by a transaction-level advisory lock so that two
-- claimers running this statement at the same moment cannot split it between them. A run
-- claims shard by shard (%(shard)s), its shards at the same time: the shard's own leases count
-- as free, so a retried claim (its first try's COMMIT unconfirmed) gets the same work back,
-- while what the run's other shards hold is theirs.
WITH due AS MATERIALIZED (  -- sorted first: the locks below are taken in order, up to the cap
    SELECT conversation_id, min(start_at) AS oldest
    FROM episodic_memory
    WHERE consolidated_at IS NULL AND quarantined_at IS NULL
      AND slowwave_episode_closed(end_at, first_claimed_at, closed_at, %(open_s)s::integer)
      AND (%(conversations)s::text[] IS NULL OR conversation_id = ANY(%(conversations)s::text[]))
      AND NOT conversation_id = ANY(%(taken)s::text[])
    GROUP BY conversation_id
    HAVING (%(everything)s
            OR slowwave_due(count(*), max(coalesce(surprise, novelty)),
                            bool_or(first_claimed_at IS NOT NULL OR closed_at IS NOT NULL),
                            min(created_at), %(threshold)s::integer, %(flashbulb)s::real,
                            now() - make_interval(secs => %(due_after_s)s)))
       AND bool_and(claimed_until IS NULL OR claimed_until < now()
                    OR (claimed_by = %(run_id)s AND claim_shard = %(shard)s))
       AND slowwave_quiet(conversation_id, %(quiet_s)s::integer)
    ORDER BY oldest, conversation_id
), locked AS (
    -- The cap counts conversations this run locked: runs claiming at the same moment each
    -- skip what the others locked and go on to the next due ones, instead of each taking a
    -- share of the same first few and leaving the rest for tomorrow.
    SELECT conversation_id FROM due
    WHERE pg_try_advisory_xact_lock(slowwave_conversation_key(conversation_id))
    LIMIT %(max_conversations)s
),
-- The locked conversations as one array probed through the pending index: a join against the
-- CTE was planned as a nested loop (quadratic) on a table not yet analysed after a bulk load.
claimed AS (
    UPDATE episodic_memory e
    SET claimed_by = %(run_id)s,
        claimed_until = now() + make_interval(secs => %(lease_s)s),
        claim_shard = %(shard)s,
        first_claimed_at = coalesce(e.first_claimed_at, now())
    WHERE e.conversation_id = ANY (ARRAY(SELECT conversation_id FROM locked))
      AND e.consolidated_at IS NULL AND e.quarantined_at IS NULL
      AND slowwave_episode_closed(e.end_at, e.first_claimed_at, e.closed_at, %(open_s)s::integer)
      AND (e.claimed_until IS NULL OR e.claimed_until < now()
           OR (e.claimed_by = %(run_id)s AND e.claim_shard = %(shard)s))
    RETURNING e.id, e.conversation_id, e.external_key, e.messages, e.summary,
              coalesce(e.surprise, e.novelty) AS surprise,
              e.start_at, e.end_at, e.consolidated_messages
)
-- How many conversations were locked, with the episodes claimed (one row of NULLs when none):
-- a conversation locked but not claimed was claimed by a run that committed after this
-- statement's snapshot, and the caller claims again for the room it left.
SELECT l.locked, c.*
FROM (SELECT count(*) AS locked FROM locked) l LEFT JOIN claimed c ON true
