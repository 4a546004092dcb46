-- ingest: a message id repeated within its conversation in one source; the first line wins.
-- Counted by hashing (message ids are seldom repeated: nothing is sorted, and the delete finds
-- nothing to join when none is).
DELETE FROM slowwave_ingest s
USING (
    SELECT conversation_id, message_id, min(line) AS first
    FROM slowwave_ingest
    GROUP BY conversation_id, message_id
    HAVING count(*) > 1
) d
WHERE s.conversation_id = d.conversation_id AND s.message_id = d.message_id AND s.line > d.first
RETURNING s.line, s.conversation_id, s.message_id, d.first
