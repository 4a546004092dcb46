-- A conversation's facts: active ones (the default), those valid at %(as_of)s (event time),
-- or all of them, every version, with %(all)s. Oldest first.
SELECT id, conversation_id, category, fact, keywords, source_episodic_ids, valid_at,
       invalid_at, created_at, created_by_run_id, supersedes_id
FROM semantic_memory
WHERE conversation_id = %(conversation_id)s
  AND (%(all)s
       OR CASE
              WHEN %(as_of)s::timestamptz IS NULL THEN invalid_at IS NULL
              ELSE valid_at <= %(as_of)s::timestamptz
                   AND (invalid_at IS NULL OR invalid_at > %(as_of)s::timestamptz)
          END)
ORDER BY valid_at, created_at, id
