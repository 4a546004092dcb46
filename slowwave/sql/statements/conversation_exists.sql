-- Whether a conversation exists: any episode (pending, consolidated or quarantined) or fact.
SELECT EXISTS (SELECT 1 FROM episodic_memory WHERE conversation_id = %(conversation_id)s)
    OR EXISTS (SELECT 1 FROM semantic_memory WHERE conversation_id = %(conversation_id)s)
