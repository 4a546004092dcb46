-- A run's row with the counts it committed, in one place for every reader (statements runs_list,
-- runs_show): a run still marked running (at work, or killed before it could say so) is counted
-- from its recorded chunks (slowwave_run_counts, migration 0026), a run that ended as it stored
-- its counts. The lateral join is computed only for the rows a query keeps (a list's LIMIT, a
-- show's id), and OFFSET 0 keeps it from being pulled up, so that the status gates the count.
-- A run asked for by a key (POST /v1/conversations/ID/consolidate) records the tenant that
-- asked, so that GET /v1/runs/ID shows it to that tenant's keys (the default tenant's admin
-- keys see every run); a scheduled or an operator's run has none.
ALTER TABLE consolidation_runs ADD COLUMN requested_by_tenant text;

CREATE VIEW consolidation_run_totals AS
SELECT r.id, r.flow_run_id, r.kind, r.status, r.started_at, r.finished_at, r.host, r.pid,
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
       r.error,
       r.requested_by_tenant
FROM consolidation_runs r
LEFT JOIN LATERAL (
    SELECT * FROM slowwave_run_counts(r.id) WHERE r.status = 'running' OFFSET 0
) AS c ON true;

-- The newest runs first, without a sort of every run: a list reads only the rows it shows.
CREATE INDEX IF NOT EXISTS consolidation_runs_started_idx ON consolidation_runs (started_at DESC);
