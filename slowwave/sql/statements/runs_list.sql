-- The latest runs, newest first, with their counts (slowwave runs list, GET /v1/runs): what each
-- committed. A run still marked running (at work, or killed before it could say so) is counted
-- from its recorded chunks (slowwave_run_counts, migration 0026: a scan of the chunks, only for
-- such a run); a run that ended stored its counts as it ended.
SELECT r.id, r.kind, r.status, r.started_at, r.finished_at,
       coalesce(c.conversations, r.conversations) AS conversations,
       coalesce(c.chunks, r.chunks) AS chunks,
       coalesce(c.chunks_failed, r.chunks_failed) AS chunks_failed,
       coalesce(c.episodes_consolidated, r.episodes_consolidated) AS episodes_consolidated,
       coalesce(c.episodes_skipped, r.episodes_skipped) AS episodes_skipped,
       coalesce(c.episodes_quarantined, r.episodes_quarantined) AS episodes_quarantined,
       coalesce(c.facts_inserted, r.facts_inserted) AS facts_inserted,
       coalesce(c.facts_reinforced, r.facts_reinforced) AS facts_reinforced,
       coalesce(c.facts_updated, r.facts_updated) AS facts_updated,
       coalesce(c.facts_invalidated, r.facts_invalidated) AS facts_invalidated,
       coalesce(c.dedupe_merges, r.dedupe_merges) AS dedupe_merges,
       coalesce(c.actions_rejected, r.actions_rejected) AS actions_rejected,
       coalesce(c.prompt_tokens, r.prompt_tokens) AS prompt_tokens,
       coalesce(c.completion_tokens, r.completion_tokens) AS completion_tokens,
       coalesce(c.prompt_tokens_cached, r.prompt_tokens_cached) AS prompt_tokens_cached,
       r.error
FROM (SELECT * FROM consolidation_runs ORDER BY started_at DESC LIMIT %(limit)s) AS r
LEFT JOIN LATERAL (  -- OFFSET 0: not pulled up, so the status gates the count (One-Time Filter)
    SELECT * FROM slowwave_run_counts(r.id) WHERE r.status = 'running' OFFSET 0
) AS c ON true
ORDER BY r.started_at DESC
