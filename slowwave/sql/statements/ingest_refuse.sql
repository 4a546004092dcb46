-- ingest: the staged messages of forgotten conversations are refused: out of the staging
-- table, their lines back for the rejects report.
DELETE FROM slowwave_ingest WHERE conversation_id = ANY(%(conversations)s::text[])
RETURNING line
