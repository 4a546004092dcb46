-- ingest: the conversations of the staged messages (held against a forget, then checked
-- against the tombstones, before anything is written).
SELECT DISTINCT conversation_id FROM slowwave_ingest
