-- Search served these facts: remember when (at most once a minute per fact, so a hot fact
-- does not turn every search into a write). A fact a consolidation holds locked is passed
-- over this time: a search never waits behind a run's locks.
UPDATE semantic_memory
SET last_retrieved_at = now()
WHERE id IN (SELECT id FROM semantic_memory
             WHERE id = ANY(%(ids)s::uuid[])
               AND (last_retrieved_at IS NULL OR last_retrieved_at < now() - interval '1 minute')
             FOR UPDATE SKIP LOCKED)
