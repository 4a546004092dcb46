-- After a run's shards: the pending episodes the run did not take, and why (counted per
-- reason). open: still open, their last message younger than %(open_s)s seconds and no request
-- closed them (slowwave_episode_closed, claim.sql); held: under another run's live lease;
-- not_due: their conversation is not due (slowwave_due, or still talking: slowwave_quiet);
-- over_cap: due, but beyond the run's %(max_conversations)s (or due only after the run planned
-- its shards). quarantined: episodes of the run's conversations (all, for a run that names none)
-- set aside by this run or an earlier one, left for an operator (slowwave quarantine list).
WITH episodes AS (
    SELECT *,
           NOT slowwave_episode_closed(end_at, first_claimed_at, closed_at, %(open_s)s::integer)
               AS open
    FROM episodic_memory
    WHERE consolidated_at IS NULL AND quarantined_at IS NULL
      AND claimed_by IS DISTINCT FROM %(run_id)s
      AND (%(conversations)s::text[] IS NULL OR conversation_id = ANY(%(conversations)s::text[]))
), pending AS (
    SELECT conversation_id,
           count(*) FILTER (WHERE NOT open) AS episodes,
           count(*) FILTER (WHERE open) AS open,
           coalesce(bool_or(claimed_until >= now()), false) AS held,
           %(everything)s
               OR slowwave_due(count(*) FILTER (WHERE NOT open),
                               max(coalesce(surprise, novelty)) FILTER (WHERE NOT open),
                               bool_or(first_claimed_at IS NOT NULL OR closed_at IS NOT NULL),
                               min(created_at) FILTER (WHERE NOT open),
                               %(threshold)s::integer, %(flashbulb)s::real,
                               now() - make_interval(secs => %(due_after_s)s))
           AND slowwave_quiet(conversation_id, %(quiet_s)s::integer) AS due
    FROM episodes
    GROUP BY conversation_id
)
SELECT coalesce(sum(episodes) FILTER (WHERE held), 0)::bigint AS held,
       coalesce(sum(episodes) FILTER (WHERE NOT held AND NOT due), 0)::bigint AS not_due,
       coalesce(sum(episodes) FILTER (WHERE NOT held AND due), 0)::bigint AS over_cap,
       coalesce(sum(open) FILTER (WHERE NOT held), 0)::bigint AS open,
       (SELECT count(*) FROM episodic_memory
        WHERE quarantined_at IS NOT NULL AND consolidated_at IS NULL
          AND (%(conversations)s::text[] IS NULL
               OR conversation_id = ANY(%(conversations)s::text[])))::bigint AS quarantined
FROM pending
