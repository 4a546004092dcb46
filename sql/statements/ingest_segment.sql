-- ingest: messages not seen before → episodes, in one statement.
-- Within a conversation, messages in time order start a new segment when the source's session
-- changes or, without sessions, after a silence longer than %(gap_s)s seconds; a segment is cut
-- every %(max_messages)s messages. An episode's key is its first message, so keys are stable
-- when a source grows.
WITH fresh AS (
    SELECT s.* FROM slowwave_ingest s
    WHERE NOT EXISTS (
        SELECT 1 FROM ingested_messages m
        WHERE m.conversation_id = s.conversation_id AND m.message_id = s.message_id)
), flagged AS (
    SELECT f.*,
           CASE
               WHEN lag(at) OVER w IS NULL THEN 1
               WHEN session_id IS DISTINCT FROM lag(session_id) OVER w THEN 1
               WHEN session_id IS NULL
                    AND at - lag(at) OVER w > make_interval(secs => %(gap_s)s) THEN 1
               ELSE 0
           END AS boundary
    FROM fresh f
    WINDOW w AS (PARTITION BY conversation_id ORDER BY at, line)
), segmented AS (
    SELECT *, sum(boundary) OVER (PARTITION BY conversation_id ORDER BY at, line) AS segment
    FROM flagged
), numbered AS (
    SELECT *,
           (row_number() OVER (PARTITION BY conversation_id, segment ORDER BY at, line) - 1)
               / %(max_messages)s AS part
    FROM segmented
), episodes AS MATERIALIZED (
    SELECT slowwave_uuid7() AS id, conversation_id, segment, part,
           conversation_id || ':' || (array_agg(message_id ORDER BY at, line))[1] AS external_key,
           jsonb_agg(jsonb_build_object('speaker', speaker, 'text', text,
                                        'message_id', message_id, 'at', at)
                     ORDER BY at, line) AS messages,
           min(at) AS start_at, max(at) AS end_at
    FROM numbered
    GROUP BY conversation_id, segment, part
), inserted AS (
    INSERT INTO episodic_memory (id, conversation_id, external_key, messages, start_at, end_at)
    SELECT id, conversation_id, external_key, messages, start_at, end_at
    FROM episodes
    ORDER BY conversation_id, start_at
    ON CONFLICT (external_key) DO NOTHING
    RETURNING id
), recorded AS (
    INSERT INTO ingested_messages (conversation_id, message_id, episode_id)
    SELECT n.conversation_id, n.message_id, e.id
    FROM numbered n
    JOIN episodes e USING (conversation_id, segment, part)
    WHERE e.id IN (SELECT id FROM inserted)
    RETURNING 1
)
SELECT (SELECT count(*) FROM inserted) AS episodes, (SELECT count(*) FROM recorded) AS messages
