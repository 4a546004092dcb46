-- Revert: the conversations the runs applied, failed or lost chunks in (held exclusively
-- before anything is read: a run in flight on them commits first, or waits).
SELECT DISTINCT conversation_id FROM consolidation_chunks WHERE run_id = ANY(%(runs)s::uuid[])
