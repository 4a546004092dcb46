-- apply: insert the staged facts (new facts and the new versions of updated ones).
INSERT INTO semantic_memory (id, conversation_id, category, fact, keywords, source_episodic_ids,
                             valid_at, embedding, supersedes_id, created_by_run_id)
SELECT id, %(conversation_id)s, category, fact, keywords, source_episodic_ids,
       valid_at, embedding, supersedes_id, %(run_id)s
FROM slowwave_staged_facts
