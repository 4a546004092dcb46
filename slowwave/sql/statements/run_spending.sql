-- The billed tokens (prompt + completion) of a run's recorded chunks, failed ones too, by
-- tenant: what every shard of the run has spent so far, wherever it ran.
SELECT slowwave_tenant(conversation_id) AS tenant,
       sum(prompt_tokens + completion_tokens)::bigint AS tokens
FROM consolidation_chunks
WHERE run_id = %(run)s
GROUP BY 1
