-- Episodes' windows embedded (episode_windows_missing): a window embedded before as a shorter
-- one takes its new end and vector (and loses a re-embedding's shadow vector of its shorter
-- text: 0035_reembed). An episode forgotten meanwhile takes none (the join).
INSERT INTO episode_windows (episode_id, messages_from, messages_to, conversation_id, embedding)
SELECT w.episode_id, w.messages_from, w.messages_to, e.conversation_id, w.embedding
FROM unnest(%(episodes)s::uuid[], %(froms)s::integer[], %(tos)s::integer[],
            %(embeddings)s::vector[]) AS w(episode_id, messages_from, messages_to, embedding)
JOIN episodic_memory e ON e.id = w.episode_id
ON CONFLICT (episode_id, messages_from) DO UPDATE
SET messages_to = excluded.messages_to, embedding = excluded.embedding,
    embedding_next = NULL
