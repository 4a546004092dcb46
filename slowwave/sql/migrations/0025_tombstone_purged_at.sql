-- When a forget's bytes left the database's files: a purge (VACUUM FULL and the WAL moved on)
-- that began after the forget committed. A server purges right after a forget's answer, so the
-- answer says "queued" and the conversation's GET says when it is done. Tombstones written
-- before this migration keep NULL: whether a purge followed them was not recorded.
ALTER TABLE history_operations ADD COLUMN purged_at timestamptz;
