-- ingest: a source with more conversations than one transaction may hold is set aside, for
-- the session, to be written a group of conversations at a time (ingest_group). A pooled
-- connection may still hold the rows a stopped run set aside (a stop can cancel the writer's
-- own DROP): they are dropped first, never written.
DROP TABLE IF EXISTS pg_temp.slowwave_ingest_aside;
CREATE TEMP TABLE slowwave_ingest_aside AS SELECT * FROM slowwave_ingest;
CREATE INDEX ON slowwave_ingest_aside (conversation_id)
