-- The latest forget of a conversation, if any: when, and when its bytes were purged.
SELECT done_at AS forgotten_at, purged_at
FROM history_operations
WHERE kind = 'forget_conversation' AND target = slowwave_digest(%(conversation_id)s)
ORDER BY done_at DESC
LIMIT 1
