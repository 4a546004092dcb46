-- The decisions of the log about any version of a fact (%(ids)s: its versions; an update's
-- decision names the version it made, an invalidation or a reinforcement the one it touched),
-- oldest first: which run, which chunk, what the model proposed and what was decided, and why.
SELECT id, run_id, chunk_id, proposed_action, action, fact_id, previous_fact_id, similarity,
       episode_ids, event_time, recorded_at, reason, proposed_fact
FROM decision_log
WHERE fact_id = ANY(%(ids)s::uuid[])
ORDER BY recorded_at, id
