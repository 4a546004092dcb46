-- The recorded outcome of chunks, by id (chunk ids are derived from the run and the chunk's
-- episodes, so a retried chunk has the id of its first try): read before chunks are applied
-- or charged again, and after a connection was lost during their COMMIT. Their decisions are
-- counted from the decision log.
SELECT c.id, c.status, c.error, c.conversation_id, c.episode_ids,
       (SELECT count(*) FROM episodic_memory e
        WHERE e.id = ANY(c.episode_ids) AND e.gated) AS gated,
       count(d.id) FILTER (WHERE d.action = 'new') AS new,
       count(d.id) FILTER (WHERE d.action = 'reinforce') AS reinforce,
       count(d.id) FILTER (WHERE d.action = 'merge') AS merge,
       count(d.id) FILTER (WHERE d.action = 'update') AS update,
       count(d.id) FILTER (WHERE d.action = 'invalidate') AS invalidate,
       count(d.id) FILTER (WHERE d.action = 'rejected') AS rejected
FROM consolidation_chunks c
LEFT JOIN decision_log d ON d.chunk_id = c.id
WHERE c.id = ANY(%(chunk_ids)s::uuid[])
GROUP BY c.id
