-- Export (only when asked for: raw conversation text): the episodes, their messages as JSON
-- text, with their tenant; partitioned by the tenant and the UTC day each was ingested.
SELECT slowwave_tenant(conversation_id) AS tenant,
       (created_at AT TIME ZONE 'UTC')::date AS day,
       id::text AS id,
       slowwave_conversation(conversation_id) AS conversation_id,
       messages::text AS messages,
       summary, surprise, start_at, end_at, created_at, consolidated_at,
       consolidation_run_id::text AS consolidation_run_id,
       quarantined_at
FROM episodic_memory
