-- Export: the consolidation runs and what each did, partitioned by the UTC day it started. A
-- run belongs to no tenant (it may span several). Its summary and error text are left out:
-- they may name a conversation, and a forget does not rewrite this table's files.
SELECT NULL::text AS tenant,
       (started_at AT TIME ZONE 'UTC')::date AS day,
       id::text AS id, flow_run_id, kind, status, started_at, finished_at,
       conversations, chunks, chunks_failed,
       episodes_consolidated, episodes_skipped, episodes_quarantined,
       facts_inserted, facts_reinforced, facts_updated, facts_invalidated,
       dedupe_merges, actions_rejected,
       prompt_tokens, prompt_tokens_cached, completion_tokens
FROM consolidation_runs
