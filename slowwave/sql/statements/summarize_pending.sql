-- summarize: a batch of pending episodes that have no summary (the source gave none) and are
-- longer than a summary would be (`speaker: text` lines, as the summary prompt shows them).
SELECT id, conversation_id, external_key, messages, summary,
       coalesce(surprise, novelty) AS surprise, start_at, end_at
FROM episodic_memory e
WHERE summary IS NULL AND consolidated_at IS NULL AND quarantined_at IS NULL
  AND (%(conversations)s::text[] IS NULL OR conversation_id = ANY(%(conversations)s::text[]))
  AND (SELECT coalesce(sum(length(m ->> 'speaker') + length(m ->> 'text') + 3), 0)
       FROM jsonb_array_elements(e.messages) AS m) > %(min_chars)s
ORDER BY conversation_id, start_at, id
LIMIT %(batch)s OFFSET %(offset)s
