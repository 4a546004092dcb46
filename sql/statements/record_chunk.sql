-- One row per chunk a run worked on, whatever became of it (applied, failed, quarantined,
-- conflict): the audit of model calls and of the decision log's chunk ids.
INSERT INTO consolidation_chunks (id, run_id, conversation_id, episode_ids, status, model,
                                  prompt_tokens, completion_tokens, error)
VALUES (%(id)s, %(run_id)s, %(conversation_id)s, %(episode_ids)s, %(status)s, %(model)s,
        %(prompt_tokens)s, %(completion_tokens)s, %(error)s)
