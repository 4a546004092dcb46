-- summarize: pending episodes without a summary that are too short to need one (the
-- complement of summarize_pending's length test).
SELECT count(*)
FROM episodic_memory e
WHERE summary IS NULL AND consolidated_at IS NULL AND quarantined_at IS NULL
  AND (%(conversations)s::text[] IS NULL OR conversation_id = ANY(%(conversations)s::text[]))
  AND (SELECT coalesce(sum(length(m ->> 'speaker') + length(m ->> 'text') + 3), 0)
       FROM jsonb_array_elements(e.messages) AS m) <= %(min_chars)s
