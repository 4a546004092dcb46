-- A run ends: its counts, status, summary (the whole RunSummary as JSON) and error.
UPDATE consolidation_runs
SET conversations = %(conversations)s,
    chunks = %(chunks)s,
    chunks_failed = %(chunks_failed)s,
    episodes_consolidated = %(episodes_consolidated)s,
    episodes_skipped = %(episodes_skipped)s,
    episodes_quarantined = %(episodes_quarantined)s,
    facts_inserted = %(facts_inserted)s,
    facts_reinforced = %(facts_reinforced)s,
    facts_updated = %(facts_updated)s,
    facts_invalidated = %(facts_invalidated)s,
    dedupe_merges = %(dedupe_merges)s,
    actions_rejected = %(actions_rejected)s,
    prompt_tokens = %(prompt_tokens)s,
    completion_tokens = %(completion_tokens)s,
    prompt_tokens_cached = %(prompt_tokens_cached)s,
    status = %(status)s,
    finished_at = %(finished_at)s,
    summary = %(summary)s,
    error = %(error)s
WHERE id = %(run_id)s
