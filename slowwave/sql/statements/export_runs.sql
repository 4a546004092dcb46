-- Export: the consolidation runs and what each did, partitioned by the UTC day it started. A
-- run belongs to no tenant (it may span several). Its summary and error text are left out:
-- they may name a conversation, and a forget does not rewrite this table's files. A run still
-- marked running (at work, or killed before it could say so) is exported with what it
-- committed so far (slowwave_run_counts, as runs_list reads it); its partition is written
-- again once it ends.
SELECT NULL::text AS tenant,
       (r.started_at AT TIME ZONE 'UTC')::date AS day,
       r.id::text AS id, r.flow_run_id, r.kind, r.status, r.started_at, r.finished_at,
       coalesce(c.conversations::integer, r.conversations) AS conversations,
       coalesce(c.chunks::integer, r.chunks) AS chunks,
       coalesce(c.chunks_failed::integer, r.chunks_failed) AS chunks_failed,
       coalesce(c.episodes_consolidated::integer, r.episodes_consolidated)
           AS episodes_consolidated,
       coalesce(c.episodes_skipped::integer, r.episodes_skipped) AS episodes_skipped,
       coalesce(c.episodes_quarantined::integer, r.episodes_quarantined) AS episodes_quarantined,
       coalesce(c.facts_inserted::integer, r.facts_inserted) AS facts_inserted,
       coalesce(c.facts_reinforced::integer, r.facts_reinforced) AS facts_reinforced,
       coalesce(c.facts_updated::integer, r.facts_updated) AS facts_updated,
       coalesce(c.facts_invalidated::integer, r.facts_invalidated) AS facts_invalidated,
       coalesce(c.dedupe_merges::integer, r.dedupe_merges) AS dedupe_merges,
       coalesce(c.actions_rejected::integer, r.actions_rejected) AS actions_rejected,
       coalesce(c.prompt_tokens, r.prompt_tokens) AS prompt_tokens,
       coalesce(c.prompt_tokens_cached, r.prompt_tokens_cached) AS prompt_tokens_cached,
       coalesce(c.completion_tokens, r.completion_tokens) AS completion_tokens
FROM consolidation_runs r
LEFT JOIN LATERAL (  -- OFFSET 0: not pulled up, so the status gates the count (One-Time Filter)
    SELECT * FROM slowwave_run_counts(r.id) WHERE r.status = 'running' OFFSET 0
) AS c ON true
