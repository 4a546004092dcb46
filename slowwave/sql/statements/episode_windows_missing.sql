-- The episodes of a conversation whose windows are not all embedded (episode_windows): new
-- ones, and those that grew since (a pending episode takes messages as they are recorded).
-- Each with its messages and the first message not yet in a full window of
-- %(window)s: from there its windows are embedded again. Quarantined episodes are left out, as
-- search leaves them out.
SELECT e.id, e.messages, coalesce(w.full_to, 0) AS messages_from
FROM episodic_memory e
LEFT JOIN LATERAL (
    SELECT max(messages_to) AS covered,
           max(messages_to) FILTER (WHERE messages_to - messages_from = %(window)s) AS full_to
    FROM episode_windows
    WHERE episode_id = e.id
) AS w ON true
WHERE e.conversation_id = %(conversation_id)s AND e.quarantined_at IS NULL
  AND jsonb_array_length(e.messages) > coalesce(w.covered, 0)
ORDER BY e.id
