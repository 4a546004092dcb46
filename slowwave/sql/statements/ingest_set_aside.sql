-- ingest: a source with more conversations than one transaction may hold is set aside, for
-- the session, to be written a group of conversations at a time (ingest_group).
CREATE TEMP TABLE slowwave_ingest_aside AS SELECT * FROM slowwave_ingest;
CREATE INDEX ON slowwave_ingest_aside (conversation_id)
