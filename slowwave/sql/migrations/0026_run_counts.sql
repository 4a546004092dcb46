-- A run's counts are what it committed, a run killed by SIGKILL included: its recorded chunks
-- (a chunk is recorded by the transaction that applied it, or that charged its failure), their
-- decisions and the episodes they finished. Counted in one place:
--   * a run still marked running (at work, or killed before it could say so) is counted from
--     them whenever it is read (statements runs_list, runs_show);
--   * a run found dead is stored with them (runs_mark_crashed);
--   * a run that ends stores, column by column, the larger of them and its process's own count
--     (tasks.runs.finish_run): the process also counts what no chunk records (a chunk dropped
--     because its conversation was forgotten, the tokens of summaries and profiles), and an
--     interrupted process may have lost the counts of the shards it was waiting on.
-- An eviction (a fact retired over the cap, logged as an invalidation proposed as `evict`) is
-- not the model's invalidation: the run's summary counts it apart, as facts_evicted.
-- The run's chunks are found by a scan of the chunks (an index by run would cost every chunk's
-- insert, for a run that is read while it runs or found dead); their decisions by chunk and
-- their episodes by id, through decision_log_chunk_idx and the primary key for a run of a few
-- chunks, by a scan for a run that holds much of the tables (a backfill).
CREATE FUNCTION slowwave_run_counts(of_run uuid)
    RETURNS TABLE (
        conversations bigint,
        chunks bigint,
        chunks_failed bigint,
        episodes_consolidated bigint,
        episodes_skipped bigint,
        episodes_quarantined bigint,
        facts_inserted bigint,
        facts_reinforced bigint,
        facts_updated bigint,
        facts_invalidated bigint,
        dedupe_merges bigint,
        actions_rejected bigint,
        prompt_tokens bigint,
        completion_tokens bigint,
        prompt_tokens_cached bigint
    )
    LANGUAGE sql STABLE PARALLEL SAFE
BEGIN ATOMIC
    WITH recorded AS MATERIALIZED (
        SELECT c.id, c.conversation_id, c.episode_ids, c.status,
               c.prompt_tokens, c.completion_tokens, c.cached_tokens
        FROM consolidation_chunks c
        WHERE c.run_id = of_run
    ), chunks AS (
        SELECT count(DISTINCT conversation_id) AS conversations,
               count(*) AS chunks,
               count(*) FILTER (WHERE status IN ('failed', 'quarantined')) AS failed,
               coalesce(sum(cardinality(episode_ids)) FILTER (WHERE status = 'quarantined'), 0)
                   AS quarantined,
               coalesce(sum(prompt_tokens), 0) AS prompt_tokens,
               coalesce(sum(completion_tokens), 0) AS completion_tokens,
               coalesce(sum(cached_tokens), 0) AS cached_tokens
        FROM recorded
    ), decisions AS (
        SELECT count(*) FILTER (WHERE d.action = 'new') AS inserted,
               count(*) FILTER (WHERE d.action = 'reinforce') AS reinforced,
               count(*) FILTER (WHERE d.action = 'update') AS updated,
               count(*) FILTER (WHERE d.action = 'invalidate' AND d.proposed_action <> 'evict')
                   AS invalidated,
               count(*) FILTER (WHERE d.action = 'merge') AS merged,
               count(*) FILTER (WHERE d.action = 'rejected') AS rejected
        FROM recorded r
        JOIN decision_log d ON d.chunk_id = r.id
    ), finished AS (
        SELECT DISTINCT unnest(episode_ids) AS id FROM recorded WHERE status = 'applied'
    ), episodes AS (
        SELECT count(*) AS consolidated, count(*) FILTER (WHERE e.gated) AS skipped
        FROM finished f
        JOIN episodic_memory e ON e.id = f.id
        WHERE e.consolidation_run_id = of_run
    )
    SELECT c.conversations, c.chunks, c.failed, e.consolidated, e.skipped, c.quarantined,
           d.inserted, d.reinforced, d.updated, d.invalidated, d.merged, d.rejected,
           c.prompt_tokens, c.completion_tokens, c.cached_tokens
    FROM chunks c, decisions d, episodes e;
END;

-- The runs recorded before this one that ended without their process's counts (a crashed run
-- was stored without its conversations and quarantined episodes; an interrupted one with the
-- counts its process still held): the larger of what they stored and what they committed, in
-- their columns and in their summary, which the metrics read (a crashed run's was an empty
-- array, which they could not: it is now an object, as runs_mark_crashed writes it).
WITH fixed AS (
    SELECT r.id,
           greatest(r.conversations, c.conversations) AS conversations,
           greatest(r.chunks, c.chunks) AS chunks,
           greatest(r.chunks_failed, c.chunks_failed) AS chunks_failed,
           greatest(r.episodes_consolidated, c.episodes_consolidated) AS episodes_consolidated,
           greatest(r.episodes_skipped, c.episodes_skipped) AS episodes_skipped,
           greatest(r.episodes_quarantined, c.episodes_quarantined) AS episodes_quarantined,
           greatest(r.facts_inserted, c.facts_inserted) AS facts_inserted,
           greatest(r.facts_reinforced, c.facts_reinforced) AS facts_reinforced,
           greatest(r.facts_updated, c.facts_updated) AS facts_updated,
           greatest(r.facts_invalidated, c.facts_invalidated) AS facts_invalidated,
           greatest(r.dedupe_merges, c.dedupe_merges) AS dedupe_merges,
           greatest(r.actions_rejected, c.actions_rejected) AS actions_rejected,
           greatest(r.prompt_tokens, c.prompt_tokens) AS prompt_tokens,
           greatest(r.completion_tokens, c.completion_tokens) AS completion_tokens,
           greatest(r.prompt_tokens_cached, c.prompt_tokens_cached) AS prompt_tokens_cached
    FROM consolidation_runs r
    CROSS JOIN LATERAL slowwave_run_counts(r.id) AS c
    WHERE r.status IN ('crashed', 'interrupted')
)
UPDATE consolidation_runs r
SET conversations = f.conversations,
    chunks = f.chunks,
    chunks_failed = f.chunks_failed,
    episodes_consolidated = f.episodes_consolidated,
    episodes_skipped = f.episodes_skipped,
    episodes_quarantined = f.episodes_quarantined,
    facts_inserted = f.facts_inserted,
    facts_reinforced = f.facts_reinforced,
    facts_updated = f.facts_updated,
    facts_invalidated = f.facts_invalidated,
    dedupe_merges = f.dedupe_merges,
    actions_rejected = f.actions_rejected,
    prompt_tokens = f.prompt_tokens,
    completion_tokens = f.completion_tokens,
    prompt_tokens_cached = f.prompt_tokens_cached,
    summary = CASE WHEN jsonb_typeof(r.summary) = 'object' THEN r.summary
                   ELSE jsonb_build_object('run_id', r.id, 'kind', r.kind, 'status', r.status,
                                           'started_at', r.started_at) END
              || (to_jsonb(f) - 'id')
FROM fixed f
WHERE r.id = f.id;
