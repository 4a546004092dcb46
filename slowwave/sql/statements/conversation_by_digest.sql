-- The conversations whose id's SHA-256 (hex) starts with %(prefix)s: a reference (c:…) or a
-- whole digest back to the id, while the conversation exists (at most two: one is an answer,
-- two an ambiguous prefix). Rare (an operator's forget from the UI): every id is hashed.
SELECT conversation_id
FROM (SELECT conversation_id FROM episodic_memory
      UNION SELECT conversation_id FROM semantic_memory) known
WHERE starts_with(slowwave_digest(conversation_id), %(prefix)s)
LIMIT 2
