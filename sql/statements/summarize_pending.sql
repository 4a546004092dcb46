-- summarize: a batch of pending episodes that have no summary (the source gave none).
SELECT id, conversation_id, external_key, messages, summary,
       coalesce(surprise, novelty) AS surprise, start_at, end_at
FROM episodic_memory
WHERE summary IS NULL AND consolidated_at IS NULL AND quarantined_at IS NULL
  AND (%(conversations)s::text[] IS NULL OR conversation_id = ANY(%(conversations)s::text[]))
ORDER BY conversation_id, start_at, id
LIMIT %(batch)s OFFSET %(offset)s
