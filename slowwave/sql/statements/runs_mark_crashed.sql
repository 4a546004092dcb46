-- Runs that died: marked crashed, with the counts of what their recorded chunks applied (the
-- chunks, the decision log and the episodes they consolidated know; tokens and timings died
-- with the process). Only rows still running are touched.
WITH chunks AS (
    SELECT run_id,
           count(*) AS chunks,
           count(*) FILTER (WHERE status IN ('failed', 'quarantined')) AS failed,
           coalesce(sum(prompt_tokens), 0) AS prompt_tokens,
           coalesce(sum(completion_tokens), 0) AS completion_tokens,
           coalesce(sum(cached_tokens), 0) AS cached_tokens
    FROM consolidation_chunks WHERE run_id = ANY(%(ids)s::uuid[])
    GROUP BY run_id
), decisions AS (
    SELECT run_id,
           count(*) FILTER (WHERE action = 'new') AS inserted,
           count(*) FILTER (WHERE action = 'reinforce') AS reinforced,
           count(*) FILTER (WHERE action = 'update') AS updated,
           count(*) FILTER (WHERE action = 'invalidate') AS invalidated,
           count(*) FILTER (WHERE action = 'merge') AS merged,
           count(*) FILTER (WHERE action = 'rejected') AS rejected
    FROM decision_log WHERE run_id = ANY(%(ids)s::uuid[])
    GROUP BY run_id
), episodes AS (
    SELECT consolidation_run_id AS run_id, count(*) AS consolidated,
           count(*) FILTER (WHERE gated) AS skipped
    FROM episodic_memory WHERE consolidation_run_id = ANY(%(ids)s::uuid[])
    GROUP BY consolidation_run_id
)
UPDATE consolidation_runs r
SET status = 'crashed',
    finished_at = greatest(now(), r.started_at),
    error = %(reason)s,
    chunks = coalesce(c.chunks, 0),
    chunks_failed = coalesce(c.failed, 0),
    prompt_tokens = coalesce(c.prompt_tokens, 0),
    completion_tokens = coalesce(c.completion_tokens, 0),
    prompt_tokens_cached = coalesce(c.cached_tokens, 0),
    episodes_consolidated = coalesce(e.consolidated, 0),
    episodes_skipped = coalesce(e.skipped, 0),
    facts_inserted = coalesce(d.inserted, 0),
    facts_reinforced = coalesce(d.reinforced, 0),
    facts_updated = coalesce(d.updated, 0),
    facts_invalidated = coalesce(d.invalidated, 0),
    dedupe_merges = coalesce(d.merged, 0),
    actions_rejected = coalesce(d.rejected, 0)
FROM unnest(%(ids)s::uuid[]) AS dead(id)
LEFT JOIN chunks c ON c.run_id = dead.id
LEFT JOIN decisions d ON d.run_id = dead.id
LEFT JOIN episodes e ON e.run_id = dead.id
WHERE r.id = dead.id AND r.status = 'running'
RETURNING r.id
