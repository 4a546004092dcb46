-- reembed_windows_write: the new model's vectors of episode windows, in their shadow column;
-- a window that grew since it was read (its messages_to moved on) takes none: it is read again.
UPDATE episode_windows w
SET embedding_next = v.embedding
FROM unnest(%(episodes)s::uuid[], %(froms)s::integer[], %(tos)s::integer[],
            %(embeddings)s::vector[]) AS v(episode_id, messages_from, messages_to, embedding)
WHERE w.episode_id = v.episode_id AND w.messages_from = v.messages_from
  AND w.messages_to = v.messages_to
