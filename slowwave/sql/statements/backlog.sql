-- The backlog, per tenant: episodes waiting for a run (pending: neither consolidated nor
-- quarantined) and when the oldest of them was recorded (wall clock: how long it has waited,
-- whatever its event time). For /metrics, `slowwave db status` and GET /v1/conversations/{id};
-- read through episodic_memory_pending_idx (the pending episodes only).
SELECT slowwave_tenant(conversation_id) AS tenant,
       count(*) AS episodes_pending,
       min(created_at) AS oldest_pending_at
FROM episodic_memory
WHERE consolidated_at IS NULL AND quarantined_at IS NULL
GROUP BY 1
ORDER BY 1
