-- How much a run would claim, without claiming: the due conversations (the rule of claim.sql,
-- leases of other runs respected) and their pending episodes, up to %(max_conversations)s
-- conversations. The run plans its shards from it; each shard then claims its own.
WITH due AS (
    SELECT count(*) AS episodes
    FROM episodic_memory
    WHERE consolidated_at IS NULL AND quarantined_at IS NULL
      AND slowwave_episode_closed(end_at, first_claimed_at, closed_at, %(open_s)s::integer)
      AND (%(conversations)s::text[] IS NULL OR conversation_id = ANY(%(conversations)s::text[]))
    GROUP BY conversation_id
    HAVING (%(everything)s
            OR slowwave_due(count(*), max(coalesce(surprise, novelty)),
                            bool_or(first_claimed_at IS NOT NULL OR closed_at IS NOT NULL),
                            min(created_at), %(threshold)s::integer, %(flashbulb)s::real,
                            now() - make_interval(secs => %(due_after_s)s)))
       AND bool_and(claimed_until IS NULL OR claimed_until < now() OR claimed_by = %(run_id)s)
       AND slowwave_quiet(conversation_id, %(quiet_s)s::integer)
    LIMIT %(max_conversations)s
)
SELECT count(*) AS conversations, coalesce(sum(episodes), 0)::bigint AS episodes FROM due
