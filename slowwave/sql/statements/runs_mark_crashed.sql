-- Runs that died: marked crashed, with the counts of what they committed (slowwave_run_counts,
-- migration 0026: their chunks, the decisions and the episodes those applied; tokens of work
-- that recorded no chunk, and timings, died with the process). Only rows still running are
-- touched. Their summary holds the same counts: the metrics read a run's summary.
UPDATE consolidation_runs r
SET status = 'crashed',
    finished_at = greatest(now(), r.started_at),
    error = %(reason)s,
    conversations = c.conversations,
    chunks = c.chunks,
    chunks_failed = c.chunks_failed,
    episodes_consolidated = c.episodes_consolidated,
    episodes_skipped = c.episodes_skipped,
    episodes_quarantined = c.episodes_quarantined,
    facts_inserted = c.facts_inserted,
    facts_reinforced = c.facts_reinforced,
    facts_updated = c.facts_updated,
    facts_invalidated = c.facts_invalidated,
    dedupe_merges = c.dedupe_merges,
    actions_rejected = c.actions_rejected,
    prompt_tokens = c.prompt_tokens,
    completion_tokens = c.completion_tokens,
    prompt_tokens_cached = c.prompt_tokens_cached,
    summary = jsonb_build_object('run_id', r.id, 'kind', r.kind, 'status', 'crashed',
                                 'started_at', r.started_at)
              || to_jsonb(c)
FROM unnest(%(ids)s::uuid[]) AS dead(id)
CROSS JOIN LATERAL slowwave_run_counts(dead.id) AS c
WHERE r.id = dead.id AND r.status = 'running'
RETURNING r.id
