-- ingest: one group of the conversations set aside, staged for this transaction.
INSERT INTO slowwave_ingest
SELECT * FROM slowwave_ingest_aside WHERE conversation_id = ANY(%(conversations)s::text[])
