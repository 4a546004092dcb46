-- The latest runs, newest first, with their counts (slowwave runs list).
SELECT id, kind, status, started_at, finished_at, conversations, chunks, chunks_failed,
       episodes_consolidated, facts_inserted, facts_reinforced, facts_updated,
       facts_invalidated, error
FROM consolidation_runs
ORDER BY started_at DESC
LIMIT %(limit)s
