-- load: new episodes only; an external key seen before (consolidated or not) is left alone.
INSERT INTO episodic_memory (id, conversation_id, external_key, messages, summary, surprise,
                             start_at, end_at)
SELECT DISTINCT ON (external_key)
       id, conversation_id, external_key, messages, summary, surprise, start_at, end_at
FROM slowwave_staged_episodes
ORDER BY external_key, start_at
ON CONFLICT (external_key) DO NOTHING
RETURNING jsonb_array_length(messages)
