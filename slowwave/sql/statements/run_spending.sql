-- The billed tokens (prompt + completion) and the model calls of a run's recorded chunks,
-- failed ones too, by tenant: what every shard of the run has spent so far, wherever it ran.
SELECT slowwave_tenant(conversation_id) AS tenant,
       sum(prompt_tokens + completion_tokens)::bigint AS tokens,
       sum(model_calls)::bigint AS calls
FROM consolidation_chunks
WHERE run_id = %(run)s
GROUP BY 1
