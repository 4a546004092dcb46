-- The recorded outcome of a chunk, by its id (chunk ids are derived from the run and the
-- chunk's episodes, so a retried chunk has the id of its first try): read before a chunk is
-- applied or charged again, and after a connection was lost during its COMMIT. Its decisions
-- are counted from the decision log.
SELECT c.status, c.error, c.conversation_id, c.episode_ids,
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
WHERE c.id = %(chunk_id)s
GROUP BY c.id
