-- profile: one conversation's stored profile (by primary key).
SELECT conversation_id, profile, facts, tokens, model, run_id, stale, updated_at
FROM conversation_profiles
WHERE conversation_id = %(conversation_id)s
