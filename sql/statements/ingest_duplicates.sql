-- ingest: a message id repeated within its conversation in one source; the first line wins.
DELETE FROM slowwave_ingest s
USING (
    SELECT line, row_number() OVER (PARTITION BY conversation_id, message_id ORDER BY line) AS n,
           first_value(line) OVER (PARTITION BY conversation_id, message_id ORDER BY line) AS first
    FROM slowwave_ingest
) d
WHERE s.line = d.line AND d.n > 1
RETURNING s.line, s.conversation_id, s.message_id, d.first
