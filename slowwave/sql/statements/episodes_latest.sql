-- The latest episodes of a conversation (a context's episodic memories: what was said most
-- recently), newest first: not quarantined, begun by %(as_of)s (event time; null: all), up to
-- %(limit)s, through episodic_memory_latest_idx.
SELECT id, conversation_id, start_at, end_at, consolidated_at IS NULL AS pending, messages
FROM episodic_memory
WHERE conversation_id = %(conversation_id)s AND quarantined_at IS NULL
  AND (%(as_of)s::timestamptz IS NULL OR start_at <= %(as_of)s::timestamptz)
ORDER BY end_at DESC, id
LIMIT %(limit)s
