-- reembed_windows_missing: episode windows whose shadow vector the re-embedding has not
-- written yet, after (%(after_episode)s, %(after_from)s) in key order, each with its messages
-- (the window's slice of its episode's, as tasks.memories embeds them).
SELECT w.episode_id, w.messages_from, w.messages_to,
       (SELECT jsonb_agg(m.message ORDER BY m.n)
        FROM jsonb_array_elements(e.messages) WITH ORDINALITY AS m(message, n)
        WHERE m.n > w.messages_from AND m.n <= w.messages_to) AS messages
FROM episode_windows w
JOIN episodic_memory e ON e.id = w.episode_id
WHERE w.embedding_next IS NULL
  AND (w.episode_id, w.messages_from) > (%(after_episode)s::uuid, %(after_from)s::integer)
ORDER BY w.episode_id, w.messages_from
LIMIT %(limit)s
