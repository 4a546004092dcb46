-- Export: the decision log, every action the apply stage took or refused, with its tenant;
-- partitioned by the tenant and the UTC day it was recorded.
SELECT slowwave_tenant(conversation_id) AS tenant,
       (recorded_at AT TIME ZONE 'UTC')::date AS day,
       id,
       run_id::text AS run_id,
       slowwave_conversation(conversation_id) AS conversation_id,
       chunk_id::text AS chunk_id,
       proposed_action, action,
       fact_id::text AS fact_id,
       previous_fact_id::text AS previous_fact_id,
       proposed_fact, similarity,
       episode_ids::text[] AS episode_ids,
       event_time, recorded_at, reason
FROM decision_log
