-- ingest: the episode each staged conversation may go on in, its latest one, while it is
-- pending, no run ever claimed it and no request closed it (a claimed or closed episode never
-- grows: later messages start the next). Run after the conversations are held
-- (hold_conversations, exclusive): two ingests of one conversation take turns. The row stays locked until the ingest commits, so a claim
-- that comes meanwhile takes the episode grown, never half.
INSERT INTO slowwave_ingest_tails (episode_id, conversation_id, end_at, session_id, messages)
SELECT e.id, e.conversation_id, e.end_at, e.messages -> -1 ->> 'session_id',
       jsonb_array_length(e.messages)
FROM (SELECT DISTINCT ON (conversation_id) id
      FROM episodic_memory
      WHERE conversation_id IN (SELECT conversation_id FROM slowwave_ingest)
      ORDER BY conversation_id, end_at DESC, id DESC) latest
JOIN episodic_memory e ON e.id = latest.id
WHERE e.consolidated_at IS NULL AND e.quarantined_at IS NULL
  AND e.first_claimed_at IS NULL AND e.claimed_by IS NULL AND e.consolidated_messages = 0
  AND e.closed_at IS NULL
FOR UPDATE OF e
