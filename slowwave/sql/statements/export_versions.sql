-- Export: every version of every fact, as `slowwave facts --all --json` shows it, with its
-- tenant; partitioned by the tenant and the UTC day it was written (system time). The facts
-- export is the versions that have not ended.
SELECT slowwave_tenant(conversation_id) AS tenant,
       (created_at AT TIME ZONE 'UTC')::date AS day,
       id::text AS id,
       slowwave_conversation(conversation_id) AS conversation_id,
       category, fact, keywords,
       source_episodic_ids::text[] AS source_episodic_ids,
       valid_at, invalid_at,
       supersedes_id::text AS supersedes_id,
       created_at,
       created_by_run_id::text AS created_by_run_id,
       CASE WHEN supersedes_id IS NULL THEN 'new' ELSE 'update' END AS action
FROM semantic_memory
