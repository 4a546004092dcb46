-- ingest: the conversations of the staged messages, in key order (held against a forget, then
-- checked against the tombstones, before anything is written; in groups when there are many).
SELECT DISTINCT conversation_id FROM slowwave_ingest ORDER BY 1
