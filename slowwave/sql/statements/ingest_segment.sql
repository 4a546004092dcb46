-- ingest: messages not seen before → episodes, in one statement.
-- Within a conversation, messages in time order start a new segment when the source's session
-- changes or, without sessions, after a silence longer than %(gap_s)s seconds; a segment is cut
-- every %(max_messages)s messages. An episode's key is its first message, so keys are stable
-- when a source grows. A conversation's latest episode, while pending and never claimed
-- (slowwave_ingest_tails), goes on by the same rule: the new messages it would have held had
-- they come with it are added to it. So a conversation recorded a few messages at a time ends
-- with the episodes it would have had ingested at once.
WITH fresh AS (
    SELECT s.* FROM slowwave_ingest s
    WHERE NOT EXISTS (
        SELECT 1 FROM ingested_messages m
        WHERE m.conversation_id = s.conversation_id AND m.message_id = s.message_id)
), flagged AS (
    SELECT f.*, t.episode_id AS tail, coalesce(t.messages, 0) AS tail_messages,
           CASE
               WHEN lag(f.at) OVER w IS NULL THEN
                   CASE
                       WHEN t.episode_id IS NULL THEN 1
                       WHEN f.session_id IS DISTINCT FROM t.session_id THEN 1
                       WHEN f.session_id IS NULL
                            AND f.at - t.end_at > make_interval(secs => %(gap_s)s) THEN 1
                       ELSE 0
                   END
               WHEN f.session_id IS DISTINCT FROM lag(f.session_id) OVER w THEN 1
               WHEN f.session_id IS NULL
                    AND f.at - lag(f.at) OVER w > make_interval(secs => %(gap_s)s) THEN 1
               ELSE 0
           END AS boundary
    FROM fresh f
    LEFT JOIN slowwave_ingest_tails t ON t.conversation_id = f.conversation_id
    WINDOW w AS (PARTITION BY f.conversation_id ORDER BY f.at, f.line)
), segmented AS (
    SELECT *, sum(boundary) OVER (PARTITION BY conversation_id ORDER BY at, line) AS segment
    FROM flagged
), numbered AS (
    -- segment 0 goes on from the tail: its messages count in the cut
    SELECT *,
           (CASE WHEN segment = 0 THEN tail_messages ELSE 0 END
            + row_number() OVER (PARTITION BY conversation_id, segment ORDER BY at, line) - 1)
               / %(max_messages)s AS part,
           jsonb_build_object('speaker', speaker, 'text', text, 'message_id', message_id,
                              'at', at)
               || CASE WHEN session_id IS NULL THEN '{}'::jsonb
                       ELSE jsonb_build_object('session_id', session_id) END AS message
    FROM segmented
), grown AS (
    UPDATE episodic_memory e
    SET messages = (SELECT jsonb_agg(m ORDER BY (m ->> 'at')::timestamptz, o)
                    FROM jsonb_array_elements(e.messages || g.messages) WITH ORDINALITY a(m, o)),
        start_at = least(e.start_at, g.start_at),
        end_at = greatest(e.end_at, g.end_at),
        surprise = greatest(e.surprise, g.surprise),  -- NULL only when both are
        summary = NULL  -- written for fewer messages: the backfill writes it again
    FROM (SELECT tail, jsonb_agg(message ORDER BY at, line) AS messages,
                 min(at) AS start_at, max(at) AS end_at, max(surprise) AS surprise
          FROM numbered WHERE segment = 0 AND part = 0
          GROUP BY tail) g
    WHERE e.id = g.tail
    RETURNING e.id
), episodes AS MATERIALIZED (
    SELECT slowwave_uuid7() AS id, conversation_id, segment, part,
           array_agg(message_id ORDER BY at, line) AS message_ids,
           jsonb_agg(message ORDER BY at, line) AS messages,
           min(at) AS start_at, max(at) AS end_at, max(surprise) AS surprise
    FROM numbered
    WHERE NOT (segment = 0 AND part = 0)
    GROUP BY conversation_id, segment, part
), inserted AS (
    INSERT INTO episodic_memory (id, conversation_id, external_key, messages, surprise,
                                 start_at, end_at)
    SELECT id, conversation_id, conversation_id || ':' || message_ids[1], messages, surprise,
           start_at, end_at
    FROM episodes
    ORDER BY conversation_id, start_at
    ON CONFLICT (external_key) DO NOTHING
    RETURNING id
), recorded AS (
    INSERT INTO ingested_messages (conversation_id, message_id, episode_id)
    -- an episode's own message ids, not a join back to the messages by segment and part
    SELECT e.conversation_id, unnest(e.message_ids), e.id
    FROM episodes e
    WHERE e.id IN (SELECT id FROM inserted)
    UNION ALL
    SELECT n.conversation_id, n.message_id, n.tail
    FROM numbered n
    WHERE n.segment = 0 AND n.part = 0 AND n.tail IN (SELECT id FROM grown)
    RETURNING 1
)
SELECT (SELECT count(*) FROM inserted) AS episodes, (SELECT count(*) FROM recorded) AS messages,
       (SELECT count(*) FROM grown) AS grown
